//go:build !(amd64 || arm64) || purego

package par

// Pause tells the CPU that the calling goroutine is spinning (see the
// assembly forms); here it does nothing.
func Pause() {}
