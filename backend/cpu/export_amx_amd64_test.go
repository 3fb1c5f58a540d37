//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// NewAMXEmulated returns a backend on the AMX path with the tile products
// in Go (amxEmulated), where the CPU runs the path's AVX-512 kernels.
func NewAMXEmulated(workers int) (*Backend, bool) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return nil, false
	}
	b, err := NewISA(workers, "go")
	if err != nil {
		return nil, false
	}
	b.name, b.ks = "cpu/amx-emulated", &amxEmulated
	return b, true
}

// NewAMXBroken is NewAMXEmulated with B's middle part ignored (h·m and
// m·m left out of every tile product): a deliberately broken AMX path the
// conformance suite must fail.
func NewAMXBroken(workers int) (*Backend, bool) {
	b, ok := NewAMXEmulated(workers)
	if !ok {
		return nil, false
	}
	ks := withAMX("amx-broken", func(c []float32, ldc int, a []uint16, lda, aPart int, bp []uint16, bPart, bStep, n int) {
		broken := append([]uint16(nil), bp...)
		clear(broken[bPart : 2*bPart])
		amxGemm6Go(c, ldc, a, lda, aPart, broken, bPart, bStep, n)
	}, false)
	b.name, b.ks = "cpu/amx-broken", &ks
	return b, true
}
