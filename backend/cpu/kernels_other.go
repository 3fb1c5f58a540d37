//go:build (!amd64 && !arm64) || purego

package cpu

// kernelSets lists the kernel sets this build runs, fastest first: here only
// the portable Go kernels.
var kernelSets = []*kernelSet{&goKernels}

// fmaPeak: this build has no peak-rate loop (see kernels_amd64.go).
func fmaPeak(isa string, n int) float64 { return 0 }
