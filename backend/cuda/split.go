//go:build cuda

package cuda

import (
	"github.com/fp8attn/fp8attn/backend"
)

// The key split of the tiled tensor form (kernels/hopper/split.cuh): a
// grid of few blocks over long rows of keys (a chunk of new queries after
// a long context: 128 queries of 32 heads are 32 blocks of 128 rows, a
// quarter of an H200's SMs, each walking every key) leaves most SMs idle
// while each block walks its tiles. Dividing each block's key tiles into
// parts that run as blocks of their own, then merging the parts' rows
// (fp8attn_merge9), spreads the walk over the SMs.

// keySplits returns the parts the tiled tensor form divides each block's
// key tiles into for shape s on a grid of blocks blocks, and the modelled
// microseconds that saves (keySplitPlan's; 1 and 0: none): the softcap
// twins, which have no split, and the one-tile form take none, and tests
// force a count (splitsForced, saving nothing).
func (d *device) keySplits(k hopperKernels, s *backend.Problem, blocks int) (parts int, saves float64) {
	if k.attnTensorsSplit == nil || d.hopperMerge == nil || k.cfg.OneTile(s.Sk) {
		return 1, 0
	}
	if d.splitsForced > 0 {
		return d.splitsForced, 0
	}
	rows := float64(s.B) * float64(s.Hq) * float64(s.Sq)
	return keySplitPlan(k.cfg.D, d.SMs, blocks, blockTiles(s, k.cfg.BlockM, k.cfg.BlockN), rows, s.D)
}

// splitsBeforeFusing reports whether float32 call p (FP8 precision) runs
// as Quantize, then the FP8 call, rather than as quant_pack9 and the fused
// entry, which cannot divide its blocks' keys: where the FP8 call's tensor
// form would divide them (keySplits) and save more than Quantize's second
// pass over the float32 values costs (quantizeFirst); and where tests
// force a split, which the fused entry would not round as the FP8 call
// does.
func (d *device) splitsBeforeFusing(p *backend.Problem) bool {
	k := d.hopperFor(p)
	if k.attnTensors == nil {
		return false
	}
	gx, gy, gz, _ := k.cfg.Launch(p.B, p.Hq, p.Sq, p.Sk)
	parts, saves := d.keySplits(k, p, gx*gy*gz)
	if parts > 1 && d.splitsForced > 0 {
		return true
	}
	floatBytes := 4 * float64(p.D) * float64(p.B) * (float64(p.Hq)*float64(p.Sq) + 2*float64(p.Hkv)*float64(p.Sk))
	return parts > 1 && quantizeFirst(saves, floatBytes)
}

// splitParts makes the resident's tensor launch a key split in parts
// parts: its workspace (grown where too small: part_o, then part_w, each
// 256-byte aligned) in the launch's parameters. The caller is inside do.
func (r *resident) splitParts(parts int) error {
	s := r.shape
	rows := int64(parts) * int64(s.B) * int64(s.Hq) * int64(s.Sq)
	outBytes := (rows*int64(s.D)*4 + 255) / 256 * 256
	need := outBytes + 2*rows*4
	if r.partsBytes < need {
		p, size, err := r.dev.alloc(need)
		if err != nil {
			return err
		}
		r.bufs = append(r.bufs, pooled{p, size})
		r.parts, r.partsBytes = uint64(p), size
	}
	r.tensors.P.PartO, r.tensors.P.PartW, r.tensors.P.Splits = r.parts, r.parts+uint64(outBytes), int64(parts)
	return nil
}
