//go:build !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// randomAhead returns an ahead of five random float32 buffers (some
// empty), and the buffers' spans in prefetchPlan's order.
func randomAhead(rng *rand.Rand) (ahead, [5]span) {
	var spans [5]span
	for i := range spans {
		if n := rng.IntN(4000); n > 0 && rng.IntN(5) > 0 {
			spans[i] = floatSpan(make([]float32, n))
		}
	}
	var pf ahead
	pf.read[0], pf.read[1], pf.read[2], pf.write[0], pf.write[1] = spans[0], spans[1], spans[2], spans[3], spans[4]
	return pf, spans
}

// TestPrefetchPlan: each stream of the plan starts at its span and takes
// the span's whole lines divided among the groups, rounded down, so that
// the groups never reach past the span and leave fewer lines than groups;
// an empty or short span gives no stream.
func TestPrefetchPlan(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 32))
	for trial := 0; trial < 2000; trial++ {
		groups := 1 + rng.IntN(40)
		pf, spans := randomAhead(rng)
		plan := prefetchPlan(pf, groups)
		for i, sp := range spans {
			addr, n := plan[2*i], int(plan[2*i+1])
			lines := sp.bytes / 64
			if n*groups > lines || lines-n*groups >= groups {
				t.Fatalf("groups %d, stream %d of %d lines: %d lines a group", groups, i, lines, n)
			}
			if want := uintptr(sp.p); (n > 0 && addr != want) || (n == 0 && addr != 0) {
				t.Fatalf("groups %d, stream %d (%d lines a group): address %#x, want %#x", groups, i, n, addr, want)
			}
		}
	}
}

// TestStepsPrefetch: steps4x64AVX512 runs each group's share of every
// stream of its prefetch plan (each stream's address ends groups × its
// lines past its start) and computes the same bits as with no plan.
func TestStepsPrefetch(t *testing.T) {
	if !kernelSetRuns("avx512") {
		t.Skip("this CPU does not run the avx512 set")
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 33))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	for trial := 0; trial < 200; trial++ {
		d, groups := 16*(1+rng.IntN(8)), 1+rng.IntN(16)
		rows := 4 * groups
		q, kt, v := make([]float32, rows*d), make([]float32, d*panel), make([]float32, panel*d)
		acc, m, l := make([]float32, rows*d), make([]float32, rows), make([]float32, rows)
		for _, x := range [][]float32{q, kt, v, acc} {
			for i := range x {
				x[i] = normal(i)
			}
		}
		for r := range rows {
			m[r], l[r] = float32(4*rng.NormFloat64()), float32(50*rng.Float64())
			if rng.IntN(4) == 0 {
				m[r], l[r] = float32(math.Inf(-1)), 0
			}
		}
		scale := float32(1 / math.Sqrt(float64(d)))
		s, ws := make([]float32, 4*panel), make([]float32, 4*panel)
		wacc, wm, wl := append([]float32(nil), acc...), append([]float32(nil), m...), append([]float32(nil), l...)
		var a, wa [8]float32
		var none [10]uintptr
		steps4x64AVX512(&ws[0], &q[0], &kt[0], d, scale, &wm[0], &wl[0], &wa[0], &v[0], &wacc[0], groups, &none)
		pf, _ := randomAhead(rng)
		plan := prefetchPlan(pf, groups)
		start := *plan
		steps4x64AVX512(&s[0], &q[0], &kt[0], d, scale, &m[0], &l[0], &a[0], &v[0], &acc[0], groups, plan)
		for i := 0; i < 10; i += 2 {
			if want := start[i] + uintptr(groups)*start[i+1]*64; plan[i] != want && start[i+1] > 0 {
				t.Fatalf("d=%d groups=%d: stream %d of %d lines a group ended at %#x, want %#x (start %#x)", d, groups, i/2, start[i+1], plan[i], want, start[i])
			}
		}
		if none != [10]uintptr{} {
			t.Fatalf("an empty plan changed: %v", none)
		}
		for name, pair := range map[string][2][]float32{"acc": {acc, wacc}, "m": {m, wm}, "l": {l, wl}, "weights": {s, ws}} {
			if j := firstMismatch(pair[0], pair[1], 0); j >= 0 {
				t.Fatalf("d=%d groups=%d: %s[%d] = %v with prefetches, %v without", d, groups, name, j, pair[0][j], pair[1][j])
			}
		}
	}
}

// kernelSetRuns reports whether this CPU runs the named kernel set.
func kernelSetRuns(name string) bool {
	for _, ks := range kernelSets {
		if ks.name == name {
			return true
		}
	}
	return false
}
