package fp8

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// refFormat is an independent float64 model of an FP8 format: values from
// math.Ldexp, rounding by math.RoundToEven on the scaled magnitude. It shares
// no code with the bit-level converter.
type refFormat struct {
	name      string
	mantBits  int
	minExp    int // exponent of the smallest normal
	maxFinite float64
	hasInf    bool
	values    [256]float64 // code -> value; NaN for NaN codes, ±Inf for Inf codes
}

func newRefFormat(name string, mantBits, expBits int, hasInf bool) *refFormat {
	bias := 1<<(expBits-1) - 1
	f := &refFormat{name: name, mantBits: mantBits, minExp: 1 - bias, hasInf: hasInf}
	expMax := 1<<expBits - 1
	for c := 0; c < 256; c++ {
		e, m := (c>>mantBits)&expMax, c&(1<<mantBits-1)
		var v float64
		switch {
		case hasInf && e == expMax && m == 0:
			v = math.Inf(1)
		case hasInf && e == expMax, !hasInf && e == expMax && m == 1<<mantBits-1:
			v = math.NaN()
		case e == 0:
			v = math.Ldexp(float64(m), f.minExp-mantBits)
		default:
			v = math.Ldexp(1+float64(m)/float64(int(1)<<mantBits), e-bias)
		}
		if c&0x80 != 0 {
			v = -v
		}
		f.values[c] = v
		if !math.IsInf(v, 0) && !math.IsNaN(v) && v > f.maxFinite {
			f.maxFinite = v
		}
	}
	return f
}

var (
	refE4M3 = newRefFormat("e4m3", 3, 4, false)
	refE5M2 = newRefFormat("e5m2", 2, 5, true)
)

// round returns the float64 value x rounds to in the format, ignoring
// overflow, or +Inf when it overflows.
func (f *refFormat) round(x float64) float64 {
	a := math.Abs(x)
	if math.IsInf(a, 0) {
		return math.Inf(1)
	}
	_, e := math.Frexp(a)
	lead := max(e-1, f.minExp)
	q := math.Ldexp(1, lead-f.mantBits)
	r := math.RoundToEven(a/q) * q
	if r > f.maxFinite {
		return math.Inf(1)
	}
	return r
}

// check reports whether got is the correct conversion of x in mode m, given
// r = f.round(x).
func (f *refFormat) check(x float32, r float64, got uint8, m Mode) bool {
	neg := math.Signbit(float64(x))
	gotNeg := got&0x80 != 0
	v := f.values[got]
	if x != x {
		if m == Torch {
			return got&0x7F == 0x7F && gotNeg == neg
		}
		return got == 0x7F
	}
	if gotNeg != neg {
		return false
	}
	if math.IsInf(r, 1) {
		switch {
		case m == SatFinite:
			return math.Abs(v) == f.maxFinite
		case f.hasInf:
			return math.IsInf(v, 0)
		default:
			return got&0x7F == 0x7F
		}
	}
	return math.Abs(v) == r
}

// forAllFloat32 calls a check for every float32 bit pattern (or, with
// -short, a deterministic sample that still covers every exponent), in
// parallel: each worker calls newCheck once and its check with the inputs
// of its chunks in increasing order (the chunks go out in order), so that
// the check may keep a cursor. A check returns "" or what disagrees; the
// first 20 disagreements are reported, and no chunk starts after them.
func forAllFloat32(t *testing.T, newCheck func() func(bits uint32) string) {
	step := uint64(1)
	if testing.Short() {
		step = 4099 // prime stride: hits every exponent and both signs
	}
	workers := runtime.GOMAXPROCS(0)
	const chunk = 1 << 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	var enough atomic.Bool // 20 reported: the chunks left are skipped
	next := make(chan uint64, workers)
	go func() {
		for s := uint64(0); s < 1<<32; s += chunk {
			next <- s
		}
		close(next)
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			check := newCheck()
			for s := range next {
				if enough.Load() {
					continue
				}
				for u := s; u < s+chunk; u += step {
					if what := check(uint32(u)); what != "" {
						mu.Lock()
						if len(bad) < 20 {
							bad = append(bad, fmt.Sprintf("input 0x%08x (%g): %s", u, math.Float32frombits(uint32(u)), what))
						} else {
							enough.Store(true)
						}
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
}

// TestConvertExhaustive holds ToE4M3 and ToE5M2, in every mode, over all
// 2^32 float32 inputs (-short: a stride-4099 sample), to the float64 model
// and to the tables made on the GPU (gpuTables: CUDA's SatFinite and NoSat
// conversions, PyTorch's casts for Torch), in one pass.
func TestConvertExhaustive(t *testing.T) {
	modes := []Mode{SatFinite, NoSat, Torch}
	tables := make([][]run, len(gpuTables))
	for i, tb := range gpuTables {
		tables[i] = readRLE(t, tb.file)
	}
	var shift [2][Torch + 1]uint // each conversion's byte in a packed word of the six codes
	var seen [2][Torch + 1]bool
	for i, tb := range gpuTables {
		if seen[tb.format][tb.mode] || len(gpuTables) != 2*len(modes) {
			t.Fatalf("gpuTables must hold each of the six conversions once")
		}
		seen[tb.format][tb.mode] = true
		shift[tb.format][tb.mode] = 8 * uint(i)
	}
	forAllFloat32(t, func() func(uint32) string {
		at := make([]int, len(tables)) // each table's run of the inputs from start on
		var start, next uint64         // the inputs [start, next) lie in those runs
		var want uint64                // and the tables give them these codes, packed
		return func(bits uint32) string {
			x := math.Float32frombits(bits)
			r4, r5 := refE4M3.round(float64(x)), refE5M2.round(float64(x))
			var got uint64
			for _, m := range modes {
				c4, c5 := uint8(ToE4M3(x, m)), uint8(ToE5M2(x, m))
				if !refE4M3.check(x, r4, c4, m) || !refE5M2.check(x, r5, c5, m) {
					return fmt.Sprintf("mode %v: the converter disagrees with the float64 model", m)
				}
				got |= uint64(c4)<<shift[0][m] | uint64(c5)<<shift[1][m]
			}
			if u := uint64(bits); u < start || u >= next {
				start, next, want = u, 1<<32, 0
				for i, runs := range tables {
					for at[i]+1 < len(runs) && uint64(runs[at[i]+1].start) <= u {
						at[i]++
					}
					if at[i]+1 < len(runs) {
						next = min(next, uint64(runs[at[i]+1].start))
					}
					want |= uint64(runs[at[i]].code) << (8 * uint(i))
				}
			}
			if got != want {
				for i, tb := range gpuTables {
					if g, w := uint8(got>>(8*uint(i))), uint8(want>>(8*uint(i))); g != w {
						return fmt.Sprintf("%s: got %02x, GPU gave %02x", tb.file, g, w)
					}
				}
			}
			return ""
		}
	})
}

func TestDecodeTables(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, tc := range []struct {
			got float32
			ref *refFormat
		}{{E4M3(c).Float32(), refE4M3}, {E5M2(c).Float32(), refE5M2}} {
			want := tc.ref.values[c]
			if math.IsNaN(want) != math.IsNaN(float64(tc.got)) || (!math.IsNaN(want) && float64(tc.got) != want) ||
				math.Signbit(float64(tc.got)) != (c&0x80 != 0) && !math.IsNaN(want) {
				t.Errorf("%s code 0x%02x decodes to %g, want %g", tc.ref.name, c, tc.got, want)
			}
		}
	}
	if refE4M3.maxFinite != MaxE4M3 || refE5M2.maxFinite != MaxE5M2 {
		t.Fatalf("max finite: %g %g", refE4M3.maxFinite, refE5M2.maxFinite)
	}
}

// TestRoundTrip: every finite code converts back to itself in every mode.
func TestRoundTrip(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, m := range []Mode{SatFinite, NoSat, Torch} {
			if v := E4M3(c); !v.IsNaN() && ToE4M3(v.Float32(), m) != v {
				t.Errorf("e4m3 0x%02x mode %v: round trip gives 0x%02x", c, m, ToE4M3(v.Float32(), m))
			}
			if v := E5M2(c); !v.IsNaN() && !(m == SatFinite && c&0x7F == 0x7C) && ToE5M2(v.Float32(), m) != v {
				t.Errorf("e5m2 0x%02x mode %v: round trip gives 0x%02x", c, m, ToE5M2(v.Float32(), m))
			}
		}
	}
}

// TestHandPicked pins the boundary cases the modes are defined by.
func TestHandPicked(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negNaN := math.Float32frombits(0xFFC00000)
	cases := []struct {
		x          float32
		m          Mode
		e4m3, e5m2 uint8
	}{
		{0, SatFinite, 0x00, 0x00},
		{float32(math.Copysign(0, -1)), NoSat, 0x80, 0x80},
		{448, NoSat, 0x7E, 0x5F},
		{464, NoSat, 0x7E, 0x5F},         // tie: to even 448
		{464.0001, NoSat, 0x7F, 0x5F},    // past the tie: NaN
		{-500, NoSat, 0xFF, 0xE0},        // E4M3 overflow keeps the sign; E5M2 512
		{-500, SatFinite, 0xFE, 0xE0},    // saturates
		{61440, NoSat, 0x7F, 0x7C},       // E5M2 tie rounds to Inf
		{61440, SatFinite, 0x7E, 0x7B},   // saturates
		{inf, SatFinite, 0x7E, 0x7B},     // Inf clamps
		{-inf, NoSat, 0xFF, 0xFC},        // E4M3 NaN with sign; E5M2 -Inf
		{nan, SatFinite, 0x7F, 0x7F},     // NaN canonical
		{negNaN, NoSat, 0x7F, 0x7F},      // CUDA drops the NaN's sign
		{negNaN, Torch, 0xFF, 0xFF},      // PyTorch keeps it
		{1.0 / 512, NoSat, 0x01, 0x18},   // E4M3 smallest subnormal
		{1.0 / 1024, NoSat, 0x00, 0x14},  // half of it: tie to even zero
		{3.0 / 1024, NoSat, 0x02, 0x1A},  // 1.5 E4M3 quanta: tie to even 2
		{5.0 / 1024, NoSat, 0x02, 0x1D},  // 2.5 quanta: tie to even 2
		{1.0 / 65536, NoSat, 0x00, 0x01}, // E5M2 smallest subnormal
	}
	for _, c := range cases {
		if got := uint8(ToE4M3(c.x, c.m)); got != c.e4m3 {
			t.Errorf("ToE4M3(%g, %v) = 0x%02x, want 0x%02x", c.x, c.m, got, c.e4m3)
		}
		if got := uint8(ToE5M2(c.x, c.m)); got != c.e5m2 {
			t.Errorf("ToE5M2(%g, %v) = 0x%02x, want 0x%02x", c.x, c.m, got, c.e5m2)
		}
	}
}

func FuzzToE4M3(f *testing.F) {
	for _, s := range []float32{0, 1, -1, 448, 464, 465, 1e-3, 1.0 / 1024, float32(math.Inf(-1))} {
		f.Add(math.Float32bits(s))
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		r4, r5 := refE4M3.round(float64(x)), refE5M2.round(float64(x))
		for _, m := range []Mode{SatFinite, NoSat, Torch} {
			if !refE4M3.check(x, r4, uint8(ToE4M3(x, m)), m) {
				t.Fatalf("ToE4M3(0x%08x, %v) = 0x%02x", bits, m, ToE4M3(x, m))
			}
			if !refE5M2.check(x, r5, uint8(ToE5M2(x, m)), m) {
				t.Fatalf("ToE5M2(0x%08x, %v) = 0x%02x", bits, m, ToE5M2(x, m))
			}
		}
	})
}
