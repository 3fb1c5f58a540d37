package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/mutant"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPackedItems: the packed form's items (packedItems) cover each
// sequence's packed rows for each KV head once, in blocks of bm from row
// 0, and come in their order: "cost" the costliest first, "mixed" each
// kind by cost and every prefix within one item of the two kinds'
// proportion of the whole. An item's tiles are
// counted here from every row's keys (PagedProblem.KeyRange), its cost
// half its tiles, rounded up, where it has at most bm/2 rows. Ties keep
// batch, head and row order. Cases: the serving step (4 chunks of 512
// beside 60 decode tokens, Hq32 Hkv8, 4096-8191 cached), a window, no
// mask, groups of 1 and 3, sequences without queries, and a batch of
// decode tokens only.
func TestPackedItems(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (set FP8ATTN_SEED to reproduce)", seed)
	rng := rand.New(rand.NewPCG(seed, 0x9AC0))
	const bm, bn = 128, 128
	step := func() ([]int, []int) {
		var counts, lens []int
		for b := range 64 {
			counts = append(counts, map[bool]int{true: 512, false: 1}[b < 4])
			lens = append(lens, 4096+rng.IntN(4096))
		}
		return counts, lens
	}
	stepCounts, stepLens := step()
	for _, c := range []struct {
		hq, hkv, window int
		mask            backend.Mask
		counts, lens    []int
	}{
		{32, 8, 0, backend.CausalLowerRight, stepCounts, stepLens},
		{12, 4, 300, backend.CausalLowerRight, []int{1, 200, 0, 45, 1}, []int{900, 1300, 50, 45, 5000}},
		{8, 8, 0, backend.NoMask, []int{100, 1, 1, 300}, []int{100, 2000, 7, 4000}},
		{6, 2, 0, backend.CausalLowerRight, []int{1, 1, 1, 1, 1}, []int{10, 3000, 129, 128, 700}},
	} {
		for _, order := range []string{"cost", "mixed"} {
			t.Run(fmt.Sprintf("hq%d-hkv%d-w%d-%v-q%d-%s", c.hq, c.hkv, c.window, c.mask, len(c.counts), order), func(t *testing.T) {
				p := &backend.PagedProblem{B: len(c.counts), Hq: c.hq, Hkv: c.hkv, D: 128, Mask: c.mask,
					Variants: backend.Variants{SlidingWindow: c.window}, SeqLens: make([]int32, len(c.lens)), QStarts: make([]int32, len(c.counts)+1)}
				for b, n := range c.lens {
					p.SeqLens[b] = int32(n)
					p.QStarts[b+1] = p.QStarts[b] + int32(c.counts[b])
				}
				checkPackedItems(t, p, packedItems(p, bm, bn, order), bm, bn, order)
			})
		}
	}
}

// checkPackedItems holds items to TestPackedItems' rules for p and order.
func checkPackedItems(t *testing.T, p *backend.PagedProblem, items []packedItem, bm, bn int, order string) {
	t.Helper()
	group := p.Hq / p.Hkv
	type key struct{ b, kvh, r0 int }
	want := map[key]int{}
	for b := range p.B {
		rows := p.Queries(b) * group
		for kvh := range p.Hkv {
			for r0 := 0; r0 < rows; r0 += bm {
				want[key{b, kvh, r0}] = min(bm, rows-r0)
			}
		}
	}
	if len(items) != len(want) {
		t.Fatalf("%d items, want %d", len(items), len(want))
	}
	cost := make([]int, len(items))
	for i, it := range items {
		k := key{int(it.B), int(it.KVH), int(it.R0)}
		rows, ok := want[k]
		if !ok || int(it.Rows) != rows {
			t.Fatalf("item %d %+v: not one of the sequences' blocks (or twice), want %d rows", i, it, rows)
		}
		delete(want, k)
		lo, hi := int(p.SeqLens[it.B]), 0
		for r := it.R0; r < it.R0+it.Rows; r++ {
			l, h := p.KeyRange(int(it.B), int(r)/group)
			if l < h {
				lo, hi = min(lo, l), max(hi, h)
			}
		}
		if lo < hi {
			cost[i] = (hi+bn-1)/bn - lo/bn
		}
		if 2*int(it.Rows) <= bm {
			cost[i] = (cost[i] + 1) / 2
		}
	}
	short := func(i int) bool { return 2*int(items[i].Rows) <= bm }
	// Each kind's items (all items but for "mixed") by cost, ties in
	// batch, head and row order.
	last := map[bool]int{}
	var total [2]int
	for i := range items {
		kind := order == "mixed" && short(i)
		if j, ok := last[kind]; ok {
			a, b := items[j], items[i]
			inOrder := a.B < b.B || a.B == b.B && (a.KVH < b.KVH || a.KVH == b.KVH && a.R0 < b.R0)
			if cost[i] > cost[j] || cost[i] == cost[j] && !inOrder {
				t.Fatalf("item %d %+v (cost %d) after item %d %+v (cost %d)", i, b, cost[i], j, a, cost[j])
			}
		}
		last[kind] = i
		if short(i) {
			total[0] += cost[i]
		} else {
			total[1] += cost[i]
		}
	}
	if order != "mixed" {
		return
	}
	var sc, lc, maxShort, maxLong int
	for i := range items {
		if short(i) {
			sc, maxShort = sc+cost[i], max(maxShort, cost[i])
		} else {
			lc, maxLong = lc+cost[i], max(maxLong, cost[i])
		}
		// The short items' share of the prefix against the long ones':
		// sc/S and lc/L apart by at most one item of either kind.
		if sc*total[1] > lc*total[0]+maxShort*total[1] || lc*total[0] > sc*total[1]+maxLong*total[0] {
			t.Fatalf("after item %d: short items' cost %d of %d, long %d of %d: not interleaved", i, sc, total[0], lc, total[1])
		}
	}
}

// TestPackedPlanCatchesMutants: the packed form's plan, broken on
// purpose, fails TestPackedItems (FP8ATTN_MUTANTS=1).
func TestPackedPlanCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cuda", "backend/cuda/packed_plan.go"
	tests := []string{"TestPackedItems"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a sequence's last block of rows left out", File: file, Pkg: pkg,
			Old: "for r0 := 0; r0 < rows; r0 += bm {", New: "for r0 := 0; r0+bm <= rows; r0 += bm {", Tests: tests},
		{Name: "an item's tiles from its first row's keys only", File: file, Pkg: pkg,
			Old: "hi := p.VisibleKeys(b, (r0+nr-1)/group)", New: "hi := p.VisibleKeys(b, r0/group)", Tests: tests},
		{Name: "a window's lower edge from the query's index, not its position", File: file, Pkg: pkg,
			Old: "pos = i + n - count", New: "pos = i", Tests: tests},
		{Name: "a short item weighs all its tiles", File: file, Pkg: pkg,
			Old: "cost = (cost + 1) / 2", New: "cost = cost + 0", Tests: tests},
		{Name: "the lightest first", File: file, Pkg: pkg,
			Old: "return cmp.Compare(b.cost, a.cost)", New: "return cmp.Compare(a.cost, b.cost)", Tests: tests},
		{Name: "ties out of batch order", File: file, Pkg: pkg,
			Old: "slices.SortStableFunc(ws,", New: "slices.SortFunc(ws,", Tests: tests},
		{Name: "the mixed order's short items all first", File: file, Pkg: pkg,
			Old: "(s < len(short) && sc*longCost <= lc*shortCost)", New: "s < len(short)", Tests: tests},
		{Name: "the mixed order's short items merged by count, not cost", File: file, Pkg: pkg,
			Old: "ws, sc, s = append(ws, short[s]), sc+short[s].cost, s+1", New: "ws, sc, s = append(ws, short[s]), sc+1, s+1", Tests: tests},
	})
}
