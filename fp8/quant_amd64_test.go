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

// convKernel is an assembly conversion of float32 to T (a code or a code's
// value) and whether this CPU runs it.
type convKernel[T any] struct {
	name string
	ok   bool
	fn   func(*T, *float32, int, float32, uint32, uint32)
}

func encodeKernels() []convKernel[E4M3] {
	return []convKernel[E4M3]{{"avx2", hasAVX2, encodeE4M3AVX2}, {"avx512", hasAVX512, encodeE4M3AVX512}}
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
	const chunk = 1 << 16
	kernels := encodeKernels()
	forAllInputsParallel(t, chunk, func() func(src []float32) string {
		want, got := make([]E4M3, chunk), make([]E4M3, chunk)
		return func(src []float32) string {
			n := len(src)
			for _, m := range []Mode{SatFinite, NoSat, Torch} {
				encodeE4M3Go(want[:n], src, 1, m)
				ovf, ns := modeArgs(m)
				for _, k := range kernels {
					if !k.ok {
						continue
					}
					k.fn(&got[0], &src[0], n, 1, ovf, ns)
					for i := range n {
						if got[i] != want[i] {
							return fmt.Sprintf("%s %v: %#08x -> %#02x, want %#02x", k.name, m, math.Float32bits(src[i]), uint8(got[i]), uint8(want[i]))
						}
					}
				}
			}
			return ""
		}
	})
	for _, k := range kernels {
		if !k.ok {
			t.Logf("%s: not on this CPU", k.name)
		}
	}
}

// forAllInputsParallel hands every float32 bit pattern (-short: every
// 4099th) to a check, in chunks of up to chunk patterns (a multiple of 16)
// on GOMAXPROCS goroutines, each with its own check from newCheck; a check
// returns "" or what failed, and the first failure of each goroutine is
// reported.
func forAllInputsParallel(t *testing.T, chunk int, newCheck func() func(src []float32) string) {
	step := uint64(1)
	if testing.Short() {
		step = 4099
	}
	workers := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			check := newCheck()
			src := make([]float32, chunk)
			for base := uint64(w) * uint64(chunk) * step; base < 1<<32; base += uint64(workers*chunk) * step {
				n := 0
				for b := base; b < 1<<32 && n < chunk; b += step {
					src[n] = math.Float32frombits(uint32(b))
					n++
				}
				n &^= 15
				if n == 0 {
					continue
				}
				if f := check(src[:n]); f != "" {
					mu.Lock()
					failures = append(failures, f)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
}

func roundKernels() []convKernel[float32] {
	return []convKernel[float32]{{"avx2", hasAVX2, roundE4M3AVX2}, {"avx512", hasAVX512, roundE4M3AVX512}}
}

// roundModeArgs are the assembly's (ovf, nanSign) for a mode, as
// roundE4M3Vector passes them.
func roundModeArgs(m Mode) (uint32, uint32) {
	switch m {
	case SatFinite:
		return math.Float32bits(MaxE4M3), 0
	case Torch:
		return 0x7fc00000, 1 << 31
	}
	return 0x7fc00000, 0
}

// TestRoundE4M3AllInputs holds each assembly rounder this CPU runs to
// roundE4M3Go, bit for bit (NaN bits included), on every float32 bit
// pattern (-short: every 4099th), in all three modes, at scale 1.
func TestRoundE4M3AllInputs(t *testing.T) {
	const chunk = 1 << 16
	kernels := roundKernels()
	forAllInputsParallel(t, chunk, func() func(src []float32) string {
		want, got := make([]float32, chunk), make([]float32, chunk)
		return func(src []float32) string {
			n := len(src)
			for _, m := range []Mode{SatFinite, NoSat, Torch} {
				roundE4M3Go(want[:n], src, 1, m)
				ovf, ns := roundModeArgs(m)
				for _, k := range kernels {
					if !k.ok {
						continue
					}
					k.fn(&got[0], &src[0], n, 1, ovf, ns)
					for i := range n {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							return fmt.Sprintf("%s %v: %#08x -> %#08x, want %#08x", k.name, m, math.Float32bits(src[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
						}
					}
				}
			}
			return ""
		}
	})
}

// TestRoundE4M3Scales: each assembly rounder against roundE4M3Go with the
// scales and inputs of TestEncodeE4M3Scales, inside guard regions.
func TestRoundE4M3Scales(t *testing.T) {
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
	checkConversions(t, 8, math.Float32frombits(0x7fa5a5a5), same, roundE4M3Go, roundModeArgs, roundKernels())
}

// checkConversions holds kernels to their Go loop goLoop on 2000 trials of
// testInputs at testScales, in every mode, at random lengths and
// misalignments inside guard regions filled with poison (same compares
// two results bit for bit).
func checkConversions[T any](t *testing.T, stream uint64, poison T, same func(a, b T) bool, goLoop func([]T, []float32, float32, Mode), args func(Mode) (uint32, uint32), kernels []convKernel[T]) {
	t.Helper()
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, stream))
	const guard = 32
	for trial := range 2000 {
		n := 16 * (1 + rng.IntN(20))
		off := rng.IntN(16)
		scale := testScales[trial%len(testScales)]
		src := testInputs(rng, n)
		m := Mode(trial % 3)
		want := make([]T, n)
		goLoop(want, src, scale, m)
		ovf, ns := args(m)
		for _, k := range kernels {
			if !k.ok {
				continue
			}
			buf := make([]T, off+n+2*guard)
			for i := range buf {
				buf[i] = poison
			}
			dst := buf[guard+off : guard+off+n]
			k.fn(&dst[0], &src[0], n, scale, ovf, ns)
			for i := range n {
				if !same(dst[i], want[i]) {
					t.Fatalf("%s %v scale %v: %v (%#08x) -> %v, want %v", k.name, m, scale, src[i], math.Float32bits(src[i]), dst[i], want[i])
				}
			}
			for i, c := range buf {
				if (i < guard+off || i >= guard+off+n) && !same(c, poison) {
					t.Fatalf("%s: guard element %d overwritten", k.name, i)
				}
			}
		}
	}
}

var (
	testScales = []float32{1, 0.75, 3.7e-3, -2, 1e-30, 1e30, 0, posInf, -posInf, nan32, 1e-40, 448, 1.0 / 448}
	// testSpecials are zeros, the smallest subnormals, the overflow
	// boundary 464 and its neighbours, 448, 480, the smallest normal E4M3
	// and values beside it, the subnormal quantum and beside it, the largest
	// float32, ±Inf and NaNs with payloads and signs.
	testSpecials = []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 464, 464.00003, -464.00003, 448, 480, 0.015625, 0.0146, 0.0009765625,
		0.00097656256, math.MaxFloat32, posInf, -posInf, nan32, -nan32, float32(math.Float32frombits(0xffc00001))}
	posInf, nan32 = float32(math.Inf(1)), float32(math.NaN())
)

// testInputs returns n inputs, a quarter of them specials, a quarter random
// bit patterns, the rest normal at magnitudes from 1e-6 to 1e5.
func testInputs(rng *rand.Rand, n int) []float32 {
	src := make([]float32, n)
	for i := range src {
		switch rng.IntN(4) {
		case 0:
			src[i] = testSpecials[rng.IntN(len(testSpecials))]
		case 1:
			src[i] = math.Float32frombits(rng.Uint32())
		default:
			src[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6)))
		}
	}
	return src
}

// TestEncodeE4M3Scales: each assembly encoder against encodeE4M3Go with
// scales that round, overflow, underflow, are negative, zero, Inf or NaN,
// on random and special inputs, at random lengths and misalignments inside
// guard regions.
func TestEncodeE4M3Scales(t *testing.T) {
	same := func(a, b E4M3) bool { return a == b }
	checkConversions(t, 5, E4M3(0xA5), same, encodeE4M3Go, modeArgs, encodeKernels())
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
