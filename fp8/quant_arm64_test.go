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

// The NEON routines against the Go loops, bit for bit: a strided sweep of
// all 2^32 float32 inputs plus both ends and the middle of every run of
// the GPU-made E4M3 tables (where the code changes), every mode, at scale
// 1; random scales, lengths and misalignments inside guard regions; the
// amax and the decoder on their special values.

// neonModeArgs are encodeE4M3NEON's and roundE4M3NEON's (ovf, nanSign) for
// a mode, as encodeE4M3Vector and roundE4M3Vector pass them.
func neonModeArgs(m Mode, value bool) (uint32, uint32) {
	ovf, nanSign := uint32(0x7f), uint32(0)
	switch m {
	case SatFinite:
		ovf = 0x7e
	case Torch:
		nanSign = 0x80
	}
	if value {
		ovf, nanSign = math.Float32bits(e4m3Table[ovf]), nanSign<<24
	}
	return ovf, nanSign
}

// neonSweepStride is the sweep's stride: every 4099th input with -short,
// every 7th without (614 million inputs, 3 to 5 minutes under qemu on two
// cores; all 2^32 would take 20 to 30). Between the run boundaries every
// input of a run has the same code, which the sweep samples.
func neonSweepStride() uint64 {
	if testing.Short() {
		return 4099
	}
	return 7
}

// neonCheck encodes and rounds src (a multiple of 16 inputs) by NEON and
// by the Go loops in every mode, and says where they first differ ("").
func neonCheck(src []float32, codes, wantCodes []E4M3, vals, wantVals []float32) string {
	n := len(src)
	for _, m := range []Mode{SatFinite, NoSat, Torch} {
		encodeE4M3Go(wantCodes[:n], src, 1, m)
		ovf, ns := neonModeArgs(m, false)
		encodeE4M3NEON(&codes[0], &src[0], n, 1, ovf, ns)
		roundE4M3Go(wantVals[:n], src, 1, m)
		ovf, ns = neonModeArgs(m, true)
		roundE4M3NEON(&vals[0], &src[0], n, 1, ovf, ns)
		for i := range n {
			b := math.Float32bits(src[i])
			if codes[i] != wantCodes[i] {
				return fmt.Sprintf("encode %v: %#08x -> %#02x, want %#02x", m, b, uint8(codes[i]), uint8(wantCodes[i]))
			}
			if math.Float32bits(vals[i]) != math.Float32bits(wantVals[i]) {
				return fmt.Sprintf("round %v: %#08x -> %#08x, want %#08x", m, b, math.Float32bits(vals[i]), math.Float32bits(wantVals[i]))
			}
		}
	}
	return ""
}

// TestNEONConversionsAllInputs: the strided sweep, on GOMAXPROCS
// goroutines, then the run boundaries.
func TestNEONConversionsAllInputs(t *testing.T) {
	const chunk = 1 << 14
	step := neonSweepStride()
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	fails := make([]string, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, vals, wantVals := make([]float32, chunk), make([]float32, chunk), make([]float32, chunk)
			codes, wantCodes := make([]E4M3, chunk), make([]E4M3, chunk)
			for base := uint64(w) * chunk * step; base < 1<<32; base += uint64(workers) * chunk * step {
				n := 0
				for b := base; b < 1<<32 && n < chunk; b += step {
					src[n] = math.Float32frombits(uint32(b))
					n++
				}
				if n &^= 15; n == 0 {
					continue
				}
				if f := neonCheck(src[:n], codes, wantCodes, vals, wantVals); f != "" {
					fails[w] = f
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range fails {
		if f != "" {
			t.Error(f)
		}
	}
	var src []float32
	for _, file := range []string{"cuda_device_e4m3_satfinite.rle", "cuda_device_e4m3_nosat.rle", "torch_e4m3.rle"} {
		runs := readRLE(t, file)
		for i, r := range runs {
			end := runEnd(runs, i)
			for _, u := range []uint32{r.start, r.start + (end-r.start)/2, end} {
				src = append(src, math.Float32frombits(u))
			}
		}
	}
	t.Logf("stride %d: %d inputs swept; %d at run boundaries", step, (1<<32)/step, len(src))
	src = append(src, make([]float32, 16)...)[:(len(src)+15)&^15]
	n := len(src)
	codes, vals := make([]E4M3, n), make([]float32, n)
	if f := neonCheck(src, codes, make([]E4M3, n), vals, make([]float32, n)); f != "" {
		t.Error(f)
	}
}

// TestNEONConversionsScales: random scales (rounding, overflowing,
// underflowing, negative, zero, Inf, NaN) on random and special inputs, at
// random lengths and misalignments inside guard regions.
func TestNEONConversionsScales(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 9))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	scales := []float32{1, 0.75, 3.7e-3, -2, 1e-30, 1e30, 0, inf, -inf, nan, 1e-40, 448, 1.0 / 448}
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 464, 464.00003, -464.00003, 448, 480, 0.015625, 0.0146,
		0.0009765625, 0.00097656256, math.MaxFloat32, inf, -inf, nan, -nan, math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001)}
	const guard = 32
	for trial := range 2000 {
		n, off := 16*(1+rng.IntN(20)), rng.IntN(16)
		scale, m := scales[trial%len(scales)], Mode(trial%3)
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
		cbuf, vbuf := make([]E4M3, off+n+2*guard), make([]float32, off+n+2*guard)
		for i := range cbuf {
			cbuf[i], vbuf[i] = 0xa5, math.Float32frombits(0x7fa5a5a5)
		}
		codes, vals := cbuf[guard+off:guard+off+n], vbuf[guard+off:guard+off+n]
		wantCodes, wantVals := make([]E4M3, n), make([]float32, n)
		encodeE4M3Go(wantCodes, src, scale, m)
		roundE4M3Go(wantVals, src, scale, m)
		ovf, ns := neonModeArgs(m, false)
		encodeE4M3NEON(&codes[0], &src[0], n, scale, ovf, ns)
		ovf, ns = neonModeArgs(m, true)
		roundE4M3NEON(&vals[0], &src[0], n, scale, ovf, ns)
		for i := range n {
			if codes[i] != wantCodes[i] || math.Float32bits(vals[i]) != math.Float32bits(wantVals[i]) {
				t.Fatalf("%v scale %v: %#08x -> %#02x %#08x, want %#02x %#08x", m, scale, math.Float32bits(src[i]),
					uint8(codes[i]), math.Float32bits(vals[i]), uint8(wantCodes[i]), math.Float32bits(wantVals[i]))
			}
		}
		for i := range cbuf {
			if (i < guard+off || i >= guard+off+n) && (cbuf[i] != 0xa5 || math.Float32bits(vbuf[i]) != 0x7fa5a5a5) {
				t.Fatalf("guard element %d overwritten (n=%d)", i, n)
			}
		}
	}
}

// TestNEONAmax: amaxNEON against amaxGo on random data with NaN, ±Inf, -0,
// subnormals and the largest finite value, some with nothing finite but
// zeros.
func TestNEONAmax(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 10))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	specials := []float32{nan, -nan, inf, -inf, float32(math.Copysign(0, -1)), 1e-45, -math.MaxFloat32, math.MaxFloat32, 3}
	for trial := range 3000 {
		n := 16 * (1 + rng.IntN(40))
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 100)
		}
		for range rng.IntN(6) {
			x[rng.IntN(n)] = specials[rng.IntN(len(specials))]
		}
		if trial%7 == 0 {
			for i := range x {
				x[i] = []float32{nan, inf, -inf, 0}[rng.IntN(4)]
			}
		}
		if got, want := amaxNEON(&x[0], n), math.Float32bits(amaxGo(x)); got != want {
			t.Fatalf("n=%d: %#08x, want %#08x", n, got, want)
		}
	}
}

// TestNEONDecode: decodeE4M3NEON against the table on all 256 codes at
// scales that round, overflow, underflow, and are zero, negative, Inf and
// NaN (a NaN code's bits and a NaN scale's both), not writing past n.
func TestNEONDecode(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 11))
	for _, scale := range []float32{1, 0.5, -3.7, 1e-30, 1e30, 0, 1e-40, float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xff800001)} {
		src := make([]E4M3, 256+16)
		for i, c := range rng.Perm(256) {
			src[i] = E4M3(c)
		}
		dst := make([]float32, len(src)+1)
		dst[len(src)] = 42
		decodeE4M3NEON(&dst[0], &src[0], len(src), scale)
		want := make([]float32, len(src))
		decodeE4M3Table(want, src, scale)
		for i := range src {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("scale %v: code %#02x -> %#08x, want %#08x", scale, uint8(src[i]), math.Float32bits(dst[i]), math.Float32bits(want[i]))
			}
		}
		if dst[len(src)] != 42 {
			t.Fatal("wrote past n")
		}
	}
}
