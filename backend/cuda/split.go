//go:build cuda

package cuda

import (
	"unsafe"

	"github.com/fp8attn/fp8attn/backend"
)

// The key split of the tiled tensor form and of the fused form after
// quant_pack9 (fp8attn_stage9fs; kernels/hopper/split.cuh): a
// grid of few blocks over long rows of keys (a chunk of new queries after
// a long context: 128 queries of 32 heads are 32 blocks of 128 rows, a
// quarter of an H200's SMs, each walking every key) leaves most SMs idle
// while each block walks its tiles. Dividing each block's key tiles into
// parts that run as blocks of their own, then merging the parts' rows
// (fp8attn_merge9), spreads the walk over the SMs.

// keySplits returns the parts the tiled tensor form, and the fused form,
// divide each block's key tiles into for shape s on a grid of blocks blocks
// (keySplitPlan's; 1: none): the softcap twins, which have no split, and
// the one-tile form take none, and tests force a count (splitsForced).
func (d *device) keySplits(k hopperKernels, s *backend.Problem, blocks int) int {
	if k.attnTensorsSplit == nil || d.hopperMerge == nil || k.cfg.OneTile(s.Sk) {
		return 1
	}
	if d.splitsForced > 0 {
		return d.splitsForced
	}
	rows := float64(s.B) * float64(s.Hq) * float64(s.Sq)
	return keySplitPlan(k.cfg.D, d.SMs, blocks, blockTiles(s, k.cfg.BlockM, k.cfg.BlockN), rows, s.D)
}

// splitParts makes tl, the resident's tensor-form or fused launch, a key
// split in parts parts: its workspace (grown where too small: part_o,
// then part_w, each 256-byte aligned) in the launch's parameters. The
// caller is inside do.
func (r *resident) splitParts(tl *tensorLaunch, parts int) error {
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
	tl.P.PartO, tl.P.PartW, tl.P.Splits = r.parts, r.parts+uint64(outBytes), int64(parts)
	return nil
}

// launchMerge runs fp8attn_merge9 over tl's parts: a warp a row of the
// call's output. The caller is inside do.
func (r *resident) launchMerge(tl *tensorLaunch) error {
	s := r.shape
	rows := s.B * s.Hq * s.Sq
	return launchStruct(r.dev.hopperMerge, (rows+mergeRows-1)/mergeRows, 1, 1, 32*mergeRows, 0, r.dev.stream, unsafe.Pointer(&tl.P))
}

// launchFusedSplit runs a fused resident's attention as the key split in
// parts parts (fp8attn_stage9fs over the images quant_pack9 wrote, on
// grid l's blocks times parts, then fp8attn_merge9), with fp, the fused
// parameters. The caller is inside do, after quant_pack9's launch.
func (r *resident) launchFusedSplit(k hopperKernels, fp *fusedQuantParams, l hopperLaunch, parts int) error {
	if r.fusedSplit == nil {
		r.fusedSplit = new(tensorLaunch)
	}
	tl := r.fusedSplit
	tl.P.F = *fp
	if err := r.splitParts(tl, parts); err != nil {
		return err
	}
	if err := launchStruct(k.attnFusedSplit, l.gx, l.gy, l.gz*parts, l.threads, k.cfg.SharedBytes(), r.dev.stream, unsafe.Pointer(&tl.P)); err != nil {
		return err
	}
	return r.launchMerge(tl)
}
