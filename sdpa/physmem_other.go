//go:build !linux && !darwin

package sdpa

// physicalMemory cannot be read portably here: the default bound is
// fallbackHostLimit.
func physicalMemory() int64 { return 0 }
