//go:build !purego

#include "textflag.h"

// func Pause()
TEXT ·Pause(SB), NOSPLIT, $0-0
	YIELD
	RET
