//go:build !linux

package par

// threadCPU: no per-thread CPU time here (-1); the pool always polls.
func threadCPU() int64 { return -1 }
