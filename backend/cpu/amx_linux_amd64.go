//go:build !purego

package cpu

import (
	"syscall"
	"unsafe"
)

// amxPermit asks Linux for this process's permission to use the AMX tile
// data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16
// and later) and reports whether it was granted.
func amxPermit() bool {
	const (
		archGetXCompPerm = 0x1022
		archReqXCompPerm = 0x1023
		xtiledata        = 18
	)
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXCompPerm, xtiledata, 0); e != 0 {
		return false
	}
	var perm uint64
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archGetXCompPerm, uintptr(unsafe.Pointer(&perm)), 0); e != 0 {
		return false
	}
	return perm&(1<<xtiledata) != 0
}
