//go:build (amd64 || arm64) && !purego

package par

// Pause tells the CPU that the calling goroutine is spinning, waiting for
// another thread (PAUSE on amd64, YIELD on arm64): on x86 the core then
// gives more of its resources to the other hardware thread that shares
// it, which a bare spinning loop slows down (a PAUSE takes about 40 ns on
// recent Intel cores); many arm64 cores treat YIELD as a no-op. The pool's
// polling loops and the GPU backend's host pipe call it once a round.
// Without assembly (pause_other.go) it is an empty function.
//
//go:noescape
func Pause()
