//go:build !amd64 || purego

package cpu

// NewAMXEmulated: the AMX path is built for amd64 only.
func NewAMXEmulated(workers int) (*Backend, bool) { return nil, false }

// NewAMXBroken: the AMX path is built for amd64 only.
func NewAMXBroken(workers int) (*Backend, bool) { return nil, false }
