package cuda

import (
	"cmp"
	"slices"

	"github.com/fp8attn/fp8attn/backend"
)

// The packed form's plan (packed.go): its items and their order, pure
// arithmetic on the call's lengths, built with or without the cuda tag so
// that its tests run everywhere.

// packedItem is an item of the packed form (the kernel's int4): sequence
// B's packed rows R0 .. R0+Rows-1 for KV head KVH, packed row R being query
// R/group of query head KVH·group + R%group.
type packedItem struct{ B, KVH, R0, Rows int32 }

// packedItems returns p's items in the order the launch numbers them: for
// each sequence with queries and each KV head, its Queries(b)·group packed
// rows in blocks of bm (the kernel's rows). Each item costs its key tiles
// of bn keys, half as many for a short item (at most bm/2 rows, whose two
// warpgroups take half of each tile's keys each). Order "mixed": the long
// items the costliest first and the short ones likewise, merged so that
// every prefix holds the two kinds in the proportion of their whole costs
// (the tensor-bound chunks beside the bandwidth-bound decode tokens in
// each wave); otherwise ("cost") the costliest first. Ties keep batch,
// head and row order.
func packedItems(p *backend.PagedProblem, bm, bn int, order string) []packedItem {
	group := p.Hq / p.Hkv
	type weighed struct {
		it   packedItem
		cost int // the time its key tiles take, in whole tiles
	}
	var ws []weighed
	for b := range p.B {
		rows := p.Queries(b) * group
		for kvh := range p.Hkv {
			for r0 := 0; r0 < rows; r0 += bm {
				nr := min(bm, rows-r0)
				cost := packedKeyTiles(p, b, r0, nr, bn)
				if 2*nr <= bm {
					cost = (cost + 1) / 2
				}
				ws = append(ws, weighed{packedItem{int32(b), int32(kvh), int32(r0), int32(nr)}, cost})
			}
		}
	}
	slices.SortStableFunc(ws, func(a, b weighed) int { return cmp.Compare(b.cost, a.cost) })
	if order == "mixed" {
		var short, long []weighed
		var shortCost, longCost int
		for _, w := range ws {
			if 2*int(w.it.Rows) <= bm {
				short, shortCost = append(short, w), shortCost+w.cost
			} else {
				long, longCost = append(long, w), longCost+w.cost
			}
		}
		ws = ws[:0]
		var s, l, sc, lc int
		for s < len(short) || l < len(long) {
			if l == len(long) || (s < len(short) && sc*longCost <= lc*shortCost) {
				ws, sc, s = append(ws, short[s]), sc+short[s].cost, s+1
			} else {
				ws, lc, l = append(ws, long[l]), lc+long[l].cost, l+1
			}
		}
	}
	items := make([]packedItem, len(ws))
	for i, w := range ws {
		items[i] = w.it
	}
	return items
}

// packedKeyTiles is the key tiles of bn keys the kernel loads for
// sequence b's packed rows r0 .. r0+nr-1: from its first row's first key
// to its last row's visible keys.
func packedKeyTiles(p *backend.PagedProblem, b, r0, nr, bn int) int {
	group, count, n := p.Hq/p.Hkv, p.Queries(b), int(p.SeqLens[b])
	lo := packedFirstKey(p, r0/group, count, n)
	hi := p.VisibleKeys(b, (r0+nr-1)/group)
	return max(0, (hi+bn-1)/bn-lo/bn)
}

// packedFirstKey is the kernel's first_key (kernels/common.cuh) for query
// i of count over n keys: its window's lower edge (the keys' end is
// PagedProblem.VisibleKeys).
func packedFirstKey(p *backend.PagedProblem, i, count, n int) int {
	if p.SlidingWindow <= 0 {
		return 0
	}
	pos := i
	if p.Mask == backend.CausalLowerRight {
		pos = i + n - count
	}
	return max(0, min(pos-p.SlidingWindow+1, n))
}
