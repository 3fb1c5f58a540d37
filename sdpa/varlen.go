package sdpa

import (
	"fmt"
	"math"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// AttentionVarlenInto computes attention for a batch of sequences of
// different lengths packed one after another, as FlashAttention's varlen
// functions take them (cu_seqlens). q is [1][Hq][totalQ][D] and k, v are
// [1][Hkv][totalK][D], all in layout BSHD, so that each sequence's rows
// are contiguous ([total][H][D]); sequence i has the query rows
// cuSeqQ[i] .. cuSeqQ[i+1]-1 and the keys cuSeqK[i] .. cuSeqK[i+1]-1. The
// offsets start at 0, never decrease, and end at totalQ and totalK; both
// lists have one entry per sequence plus one; like every tensor, the packed
// ones hold at least one row (a sequence may be empty). out has q's shape and layout;
// lse, if not nil, is [Hq][totalQ], FlashAttention's order. The mask and
// the FP8 scales (one per sequence and head) apply to each sequence on its
// own: with CausalLowerRight, each sequence's last query sees all of its
// keys (a chunk of new tokens against a sequence's history). A sequence
// with queries and no keys gets zeros and LSE -Inf. Each sequence is one
// call of the backend, on views of the packed inputs (no copies); the
// outputs go to scratch and are copied into out and lse once every
// sequence's call has succeeded, so that an error (one only a sequence's
// data shows, too: FP8 scales whose score factor would overflow) leaves
// out and lse as they were.
func AttentionVarlenInto(out *Tensor, lse []float32, q, k, v *Tensor, cuSeqQ, cuSeqK []int, opts *Options) error {
	if err := checkAll(q.check, k.check, v.check, q == nil, k == nil, v == nil); err != nil {
		return err
	}
	if out == nil {
		return fmt.Errorf("%w: out is nil", ErrInvalid)
	}
	if err := out.check("out"); err != nil {
		return err
	}
	for _, t := range []struct {
		name string
		t    *Tensor
	}{{"q", q}, {"k", k}, {"v", v}, {"out", out}} {
		if t.t.Layout != BSHD || t.t.B != 1 {
			return fmt.Errorf("%w: varlen %s must be [1][H][total][D] in layout BSHD, got B=%d layout %v", ErrInvalid, t.name, t.t.B, t.t.Layout)
		}
	}
	if out.H != q.H || out.S != q.S || out.D != q.D {
		return fmt.Errorf("%w: out is [1][%d][%d][%d], q is [1][%d][%d][%d]", ErrInvalid, out.H, out.S, out.D, q.H, q.S, q.D)
	}
	if k.H != v.H || k.S != v.S || k.D != v.D || q.D != k.D {
		return fmt.Errorf("%w: varlen k [1][%d][%d][%d] and v [1][%d][%d][%d] must match, with q's head dim %d", ErrInvalid, k.H, k.S, k.D, v.H, v.S, v.D, q.D)
	}
	if len(cuSeqQ) != len(cuSeqK) || len(cuSeqQ) < 2 {
		return fmt.Errorf("%w: %d query offsets and %d key offsets: want one per sequence plus one, for at least one sequence", ErrInvalid, len(cuSeqQ), len(cuSeqK))
	}
	for _, c := range []struct {
		name  string
		cu    []int
		total int
	}{{"cuSeqQ", cuSeqQ, q.S}, {"cuSeqK", cuSeqK, k.S}} {
		if c.cu[0] != 0 || c.cu[len(c.cu)-1] != c.total {
			return fmt.Errorf("%w: %s runs from %d to %d, want 0 to %d", ErrInvalid, c.name, c.cu[0], c.cu[len(c.cu)-1], c.total)
		}
		for i := 1; i < len(c.cu); i++ {
			if c.cu[i] < c.cu[i-1] {
				return fmt.Errorf("%w: %s decreases at %d (%d after %d)", ErrInvalid, c.name, i, c.cu[i], c.cu[i-1])
			}
		}
	}
	if lse != nil && len(lse) != q.H*q.S {
		return fmt.Errorf("%w: lse has %d elements, want Hq·totalQ = %d", ErrInvalid, len(lse), q.H*q.S)
	}
	buf := varlenBufs.Get()
	defer varlenBufs.Put(buf)
	// What every sequence's call would check (heads, options) is checked
	// once here, before anything is written: a sequence with no keys is
	// written directly, and would otherwise precede the error.
	if err := problem(&buf.p, shapeOf(1, q.H, q.S, q.D), shapeOf(1, k.H, k.S, k.D), shapeOf(1, v.H, v.S, v.D), opts); err != nil {
		return err
	}
	if buf.p.Precision != FP32 && buf.p.Precision != FP8E4M3 {
		return fmt.Errorf("%w: unknown precision %d", ErrInvalid, int(buf.p.Precision))
	}
	hq, hkv, d := q.H, k.H, q.D
	// The sequences' outputs and log-sum-exps go to scratch first, and
	// to out and lse once every sequence's call has succeeded: a call can
	// fail on its data (FP8 scales whose score factor would overflow),
	// and the sequences before it must not have been written.
	buf.outAll = freelist.Grow(buf.outAll, len(out.Data))
	all := &Tensor{Data: buf.outAll, B: 1, H: out.H, S: out.S, D: out.D, Layout: BSHD}
	var allLSE []float32
	if lse != nil {
		buf.lseAll = freelist.Grow(buf.lseAll, len(lse))
		allLSE = buf.lseAll
	}
	for i := 0; i+1 < len(cuSeqQ); i++ {
		q0, q1, k0, k1 := cuSeqQ[i], cuSeqQ[i+1], cuSeqK[i], cuSeqK[i+1]
		if q1 == q0 {
			continue
		}
		if k1 == k0 { // queries with no keys: zeros and -Inf
			clear(all.Data[q0*hq*d : q1*hq*d])
			for h := range hq {
				for j := q0; j < q1; j++ {
					if lse != nil {
						allLSE[h*q.S+j] = float32(math.Inf(-1))
					}
				}
			}
			continue
		}
		view := func(t *Tensor, s0, s1, h int, dst *Tensor) *Tensor {
			*dst = Tensor{Data: t.Data[s0*h*d : s1*h*d], B: 1, H: h, S: s1 - s0, D: d, Layout: BSHD}
			return dst
		}
		var seqLSE []float32
		if lse != nil {
			buf.lse = freelist.Grow(buf.lse, hq*(q1-q0))
			seqLSE = buf.lse
		}
		err := attentionInto(view(all, q0, q1, hq, &buf.out), seqLSE,
			view(q, q0, q1, hq, &buf.q), view(k, k0, k1, hkv, &buf.k), view(v, k0, k1, hkv, &buf.v), opts)
		if err != nil {
			return fmt.Errorf("sequence %d: %w", i, err)
		}
		for h := 0; lse != nil && h < hq; h++ {
			copy(allLSE[h*q.S+q0:h*q.S+q1], seqLSE[h*(q1-q0):(h+1)*(q1-q0)])
		}
	}
	// (A sequence with no queries leaves its rows, which are none.)
	copy(out.Data, all.Data)
	copy(lse, allLSE)
	return nil
}

// varlenBuffers are one varlen call's views and scratch, reused: a
// sequence's LSE, and the call's outputs and LSEs until every sequence
// has succeeded.
type varlenBuffers struct {
	q, k, v, out   Tensor
	lse            []float32
	outAll, lseAll []float32
	p              backend.Problem // for the up-front checks
}
