//go:build (amd64 || arm64) && !purego

package par

// Pause tells the CPU that the calling goroutine is spinning, waiting for
// another thread (PAUSE on amd64, YIELD on arm64): the core then gives
// more of its resources to the other hardware thread that shares it,
// which a bare spinning loop slows down, and the loop burns less power.
// Every polling loop of this package and of the pipes built on it calls
// it once a round. Its Go form is an empty function.
//
//go:noescape
func Pause()
