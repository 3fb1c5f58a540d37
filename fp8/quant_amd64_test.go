//go:build !purego

package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

type encodeKernel struct {
	name  string
	ok    bool
	width int
	fn    func(*E4M3, *float32, int, float32, uint32, uint32)
}

func encodeKernels() []encodeKernel {
	return []encodeKernel{{"avx2", hasAVX2, 8, encodeE4M3AVX2}, {"avx512", hasAVX512, 16, encodeE4M3AVX512}}
}

// modeArgs are the assembly's (ovf, nanSign) for a mode, as encodeE4M3Vector
// passes them.
func modeArgs(m Mode) (uint32, uint32) {
	switch m {
	case SatFinite:
		return 0x7e, 0
	case Torch:
		return 0x7f, 0x80
	}
	return 0x7f, 0
}

// TestEncodeE4M3AllInputs holds each assembly encoder this CPU runs to
// encodeE4M3Go on every float32 bit pattern (-short: every 4099th), in all
// three modes, at scale 1.
func TestEncodeE4M3AllInputs(t *testing.T) {
	step := uint64(1)
	if testing.Short() {
		step = 4099
	}
	const chunk = 1 << 16
	kernels := encodeKernels()
	workers := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := make([]float32, chunk)
			want, got := make([]E4M3, chunk), make([]E4M3, chunk)
			for base := uint64(w) * chunk * step; base < 1<<32; base += uint64(workers) * chunk * step {
				n := 0
				for b := base; b < 1<<32 && n < chunk; b += step {
					src[n] = math.Float32frombits(uint32(b))
					n++
				}
				n &^= 15
				for _, m := range []Mode{SatFinite, NoSat, Torch} {
					encodeE4M3Go(want[:n], src[:n], 1, m)
					ovf, ns := modeArgs(m)
					for _, k := range kernels {
						if !k.ok || n == 0 {
							continue
						}
						k.fn(&got[0], &src[0], n, 1, ovf, ns)
						for i := range n {
							if got[i] != want[i] {
								mu.Lock()
								failures = append(failures, fmt.Sprintf("%s %v: %#08x -> %#02x, want %#02x", k.name, m, math.Float32bits(src[i]), uint8(got[i]), uint8(want[i])))
								mu.Unlock()
								return
							}
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	for _, k := range kernels {
		if !k.ok {
			t.Logf("%s: not on this CPU", k.name)
		}
	}
}

// TestEncodeE4M3Scales: each assembly encoder against encodeE4M3Go with
// scales that round, overflow, underflow, are negative, zero, Inf or NaN,
// on random and special inputs, at random lengths and misalignments inside
// guard regions.
func TestEncodeE4M3Scales(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 5))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	scales := []float32{1, 0.75, 3.7e-3, -2, 1e-30, 1e30, 0, inf, -inf, nan, 1e-40, 448, 1.0 / 448}
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 464, 464.00003, -464.00003, 448, 480, 0.015625, 0.0146, 0.0009765625,
		0.00097656256, math.MaxFloat32, inf, -inf, nan, -nan, float32(math.Float32frombits(0xffc00001))}
	const guard = 32
	for trial := range 2000 {
		n := 16 * (1 + rng.IntN(20))
		off := rng.IntN(16)
		scale := scales[trial%len(scales)]
		src := make([]float32, n)
		for i := range src {
			switch rng.IntN(4) {
			case 0:
				src[i] = specials[rng.IntN(len(specials))]
			case 1:
				src[i] = math.Float32frombits(rng.Uint32())
			default:
				src[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6)))
			}
		}
		m := Mode(trial % 3)
		want := make([]E4M3, n)
		encodeE4M3Go(want, src, scale, m)
		ovf, ns := modeArgs(m)
		for _, k := range encodeKernels() {
			if !k.ok {
				continue
			}
			buf := make([]E4M3, off+n+2*guard)
			for i := range buf {
				buf[i] = 0xA5
			}
			dst := buf[guard+off : guard+off+n]
			k.fn(&dst[0], &src[0], n, scale, ovf, ns)
			for i := range n {
				if dst[i] != want[i] {
					t.Fatalf("%s %v scale %v: %v (%#08x) -> %#02x, want %#02x", k.name, m, scale, src[i], math.Float32bits(src[i]), uint8(dst[i]), uint8(want[i]))
				}
			}
			for i, c := range buf {
				if (i < guard+off || i >= guard+off+n) && c != 0xA5 {
					t.Fatalf("%s: guard byte %d overwritten", k.name, i)
				}
			}
		}
	}
}

// TestAmaxKernels: each assembly amax against amaxGo on random data with
// NaN, ±Inf, -0, subnormals and the largest finite value, at random lengths.
func TestAmaxKernels(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 6))
	kernels := []struct {
		name  string
		ok    bool
		width int
		fn    func(*float32, int) uint32
	}{{"avx2", hasAVX2, 8, amaxAVX2}, {"avx512", hasAVX512, 16, amaxAVX512}}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	specials := []float32{nan, -nan, inf, -inf, float32(math.Copysign(0, -1)), 1e-45, -math.MaxFloat32, 3}
	for trial := range 3000 {
		n := 16 * (1 + rng.IntN(40))
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 100)
		}
		for range rng.IntN(6) {
			x[rng.IntN(n)] = specials[rng.IntN(len(specials))]
		}
		if trial%7 == 0 { // nothing finite but zeros
			for i := range x {
				x[i] = []float32{nan, inf, -inf, 0}[rng.IntN(4)]
			}
		}
		want := math.Float32bits(amaxGo(x))
		for _, k := range kernels {
			if !k.ok {
				continue
			}
			if got := k.fn(&x[0], n); got != want {
				t.Fatalf("%s n=%d: %#08x, want %#08x", k.name, n, got, want)
			}
		}
	}
}
