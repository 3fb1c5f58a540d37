//go:build cuda

package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
)

// packedCase is a varlen batch for the packed form: each sequence's new
// queries and its tokens (the new ones its last), the GQA group.
type packedCase struct {
	hkv, g       int
	counts, lens []int
	mask         backend.Mask
	layout       backend.Layout
	window       int
	sinks, lse   bool
	negative     bool   // the call's scale
	values       string // the cache's values: "" filledCache's, "plain" plainCache's
}

func (c packedCase) name() string {
	return fmt.Sprintf("hkv%d-g%d-q%v-n%v-%v-%v-w%d-s%v-lse%v-neg%v-%s", c.hkv, c.g, c.counts, c.lens, c.mask, c.layout, c.window, c.sinks,
		c.lse, c.negative, cmp.Or(c.values, "filled"))
}

// TestPackedVarlen: the packed form (one launch over a varlen batch, each
// item one sequence's GQA-packed rows for one KV head) matches, sequence by
// sequence, the float64 oracle on the paged form's model (tileModel: each
// query row at its own scale, each key tile's pages at the larger of their
// scales) within the Hopper kernel's tolerances, over pages of scales 10^6
// apart and query rows 2^12 apart: decode tokens (one query, a group of 4
// in one block's rows), chunks past one block of rows, a sequence without
// queries, one whose queries are all its tokens, items whose rows end
// inside the second warpgroup, groups of 1, 3 and 8, both layouts, both masks, a window and sinks, with and without an LSE,
// and a negative scale; and on values of one magnitude (plainCache), where
// the tolerance resolves one key's weight, decode tokens over long
// sequences and an item of 20 rows (both warpgroups on halves of every
// tile, each form of it), a window of 7 keys and sinks.
// Each sequence is held to the worst-case tier and to the RMS one.
// Outputs and LSEs are poisoned first; the packed form must run, and on
// device buffers give the host slices' bits.
func TestPackedVarlen(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A71)
	if d.ComputeCapability != 90 {
		t.Skip("the packed form is the Hopper kernel's")
	}
	be.pagedPacked = true
	for _, c := range []packedCase{
		{hkv: 2, g: 4, counts: []int{1, 37, 0, 200, 1, 3}, lens: []int{700, 300, 50, 1200, 1, 64}, mask: backend.CausalLowerRight,
			layout: backend.BHSD, lse: true},
		{hkv: 2, g: 3, counts: []int{5, 130, 1}, lens: []int{900, 130, 2500}, mask: backend.CausalLowerRight, layout: backend.BSHD,
			window: 100, sinks: true, lse: true},
		{hkv: 1, g: 8, counts: []int{64, 1, 17}, lens: []int{64, 500, 3000}, mask: backend.NoMask, layout: backend.BHSD, lse: true},
		{hkv: 4, g: 1, counts: []int{300, 1}, lens: []int{300, 4100}, mask: backend.CausalLowerRight, layout: backend.BSHD,
			negative: true},
		// Items of 80 and 75 rows: the second warpgroup's rows end inside it.
		{hkv: 2, g: 4, counts: []int{20, 1}, lens: []int{1000, 600}, mask: backend.CausalLowerRight, layout: backend.BHSD, lse: true},
		{hkv: 1, g: 3, counts: []int{25}, lens: []int{25}, mask: backend.NoMask, layout: backend.BSHD, lse: true},
		{hkv: 2, g: 4, counts: []int{1, 1, 90, 1, 5}, lens: []int{700, 150, 400, 2000, 1500}, mask: backend.CausalLowerRight,
			layout: backend.BHSD, lse: true, values: "plain"},
		{hkv: 2, g: 4, counts: []int{1, 1, 90, 1, 5}, lens: []int{700, 150, 400, 2000, 1500}, mask: backend.CausalLowerRight,
			layout: backend.BSHD, window: 7, sinks: true, lse: true, values: "plain"},
	} {
		t.Run(c.name(), func(t *testing.T) {
			kv, table, per := cacheOfValues(c.values)(t, be, rng, c.hkv, 128, 64, c.lens)
			defer kv.Close()
			p := packedProblem(c, table, per)
			for i := range p.Q {
				p.Q[i] = float32(rng.NormFloat64())
			}
			rowsApart(rng, p.Q, p.D)
			if c.sinks { // (large enough against a window's keys that a head's own sink tells)
				p.Sinks = normalSinks(rng, p.Hq, 5, 3)
			}
			poisonHost(p)
			before := packedLaunches.Load()
			if err := kv.Attention(p); err != nil {
				t.Fatal(err)
			}
			if packedLaunches.Load() != before+1 {
				t.Fatal("the packed form did not run, once")
			}
			sameOnDevice(t, d, kv, p) // (the device-buffer form: the host form's bits)
			if packedLaunches.Load() != before+2 {
				t.Fatal("the packed form did not run on device buffers")
			}
			for b, n := range c.lens {
				if c.counts[b] == 0 {
					continue
				}
				pb, out, lse := varlenSequence(p, b, per)
				if !c.lse {
					lse = nil
				}
				checkTileOracle(t, kv, pb, n, out, lse, fmt.Sprintf("sequence %d (%d queries, %d tokens)", b, c.counts[b], n))
			}
		})
	}
}

// packedProblem is c's varlen call at FP8E4M3 over the cache filledCache
// made (table, per): queries zero-filled, host slices.
func packedProblem(c packedCase, table []int32, per int) *backend.PagedProblem {
	const D = 128
	hq := c.hkv * c.g
	starts := []int32{0}
	for _, n := range c.counts {
		starts = append(starts, starts[len(starts)-1]+int32(n))
	}
	t := int(starts[len(starts)-1])
	scale := float32(1 / math.Sqrt(D))
	if c.negative {
		scale = -scale
	}
	p := &backend.PagedProblem{B: len(c.counts), Hq: hq, Hkv: c.hkv, Sq: slices.Max(c.counts), D: D, Scale: scale, Mask: c.mask,
		Layout: c.layout, PagesPerSeq: per, BlockTable: table, Q: make([]float32, hq*t*D), Out: make([]float32, hq*t*D),
		QStarts: starts, Precision: backend.FP8E4M3}
	if c.lse {
		p.LSE = make([]float32, hq*t)
	}
	for _, n := range c.lens {
		p.SeqLens = append(p.SeqLens, int32(n))
	}
	p.SlidingWindow = c.window
	return p
}

// varlenSequence is sequence b of the varlen call p as a call of its own
// (its queries copied out of the packed tensor, fresh outputs), with its
// rows of p's outputs: out [1][Hq][count][D] in p's layout, lse
// [1][Hq][count] (nil without one).
func varlenSequence(p *backend.PagedProblem, b, per int) (pb *backend.PagedProblem, out, lse []float32) {
	n, t, D := p.Queries(b), p.Rows(), p.D
	s := int(p.QStarts[b])
	q := *p
	q.B, q.Sq, q.QStarts = 1, n, nil
	q.SeqLens, q.BlockTable = p.SeqLens[b:b+1], p.BlockTable[b*per:(b+1)*per]
	q.Q, q.Out, out = make([]float32, p.Hq*n*D), make([]float32, p.Hq*n*D), make([]float32, p.Hq*n*D)
	q.LSE = make([]float32, p.Hq*n)
	if p.LSE != nil {
		lse = make([]float32, p.Hq*n)
	}
	for h := range p.Hq {
		for i := range n {
			from, to := p.Layout.Offset(0, h, s+i, p.Hq, t, D), p.Layout.Offset(0, h, i, p.Hq, n, D)
			copy(q.Q[to:to+D], p.Q[from:from+D])
			copy(out[to:to+D], p.Out[from:from+D])
			if lse != nil {
				lse[h*n+i] = p.LSE[h*t+s+i]
			}
		}
	}
	return &q, out, lse
}

// TestPackedFlagFactor: a packed call whose score factor passes the limit
// (backend.MaxScoreFactor) for one query head of one sequence is refused
// naming that sequence and head, whether the scale is positive or
// negative: keys and values about 10^25, sequence 1's head 5's queries
// about 10^12 (a factor near 10^32 against a limit near 10^31 at D 128;
// the other heads' near 10^20).
func TestPackedFlagFactor(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A72)
	if d.ComputeCapability != 90 {
		t.Skip("the packed form is the Hopper kernel's")
	}
	be.pagedPacked = true
	c := packedCase{hkv: 8, g: 4, counts: []int{3, 40, 1}, lens: []int{100, 300, 50}, mask: backend.CausalLowerRight, layout: backend.BHSD}
	kv, table, per := cacheOf(t, be, rng, c.hkv, 128, 64, c.lens, func(int, int, int) float32 {
		return float32(rng.NormFloat64() * 1e25)
	})
	defer kv.Close()
	for _, negative := range []bool{false, true} {
		c.negative = negative
		p := packedProblem(c, table, per)
		for i := range p.Q {
			p.Q[i] = float32(rng.NormFloat64())
		}
		for i := range p.QStarts[2] - p.QStarts[1] {
			at := p.Layout.Offset(0, 5, int(p.QStarts[1]+i), p.Hq, p.Rows(), p.D)
			for e := range p.D {
				p.Q[at+e] *= 1e12
			}
		}
		before := packedLaunches.Load()
		err := kv.Attention(p)
		if packedLaunches.Load() != before+1 {
			t.Fatal("the packed form did not run, once")
		}
		if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "head (1, 5)") {
			t.Errorf("negative scale %v: %v, want ErrInvalid naming head (1, 5)", negative, err)
		}
	}
}
