//go:build !amd64 || purego

package cpu

// kernelSets lists the kernel sets this build runs, fastest first: here only
// the portable Go kernels.
var kernelSets = []*kernelSet{&goKernels}
