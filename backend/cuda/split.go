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

// mergeRows is fp8attn_merge9's rows a block (a warp a row; its launch
// bounds are 256 threads).
const mergeRows = 8

// splitCost is the modelled time of a block of the tiled form at a kernel
// head dim, in microseconds: fixed, its set-up, fill, drain and epilogue,
// and perTile, a key tile's. D 64, 128 and 256 are the measured ones
// (public call on FP8 tensors, graph replay, B4 H32 S4096 at 512-4096
// keys, H200: docs/design/hopper-prefill.md, "Where the time goes"); D 96
// and 192 lie between their neighbours (not measured).
var splitCost = map[int]struct{ fixed, perTile float64 }{
	64: {3.3, 0.89}, 96: {4.1, 1.07}, 128: {4.85, 1.25}, 192: {5.7, 1.27}, 256: {6.5, 1.28},
}

// The merge's modelled time: a launch in sequence, then its reads of the
// parts and writes of the rows (float32, at a few TB/s). A split is taken
// only where its parts average minPartTiles tiles at least (a block's
// fixed cost is about four tiles'; the last part may hold fewer) and the
// model gains splitGain at least: the split rounds its rows otherwise
// than one walk over the keys, so it is kept for the calls it clearly
// speeds.
const (
	mergeFixed       = 2.0    // µs
	mergeBytesPerSec = 3.0e12 // bytes a second
	minPartTiles     = 8
	splitGain        = 0.75 // the split's modelled time over the unsplit's, at most
)

// keySplits returns the parts the tiled tensor form divides each block's
// key tiles into for shape s on a grid of blocks blocks (1: none): the
// count, with minPartTiles tiles a part on average and every part a block
// of one wave, that minimizes the modelled time of a block over its part
// of the tiles plus the merge (splitCost), where that is at most
// splitGain of the unsplit time. Grids of more than half the SMs, kernels
// without a split (the softcap twins) and the one-tile form take none;
// tests force a count (splitsForced).
func (d *device) keySplits(k hopperKernels, s *backend.Problem, blocks int) int {
	if k.attnTensorsSplit == nil || d.hopperMerge == nil || k.cfg.OneTile(s.Sk) {
		return 1
	}
	if d.splitsForced > 0 {
		return d.splitsForced
	}
	c, ok := splitCost[k.cfg.D]
	if !ok || 2*blocks > d.SMs || blocks <= 0 {
		return 1
	}
	tiles := blockTiles(s, k.cfg.BlockM, k.cfg.BlockN)
	rows := float64(s.B) * float64(s.Hq) * float64(s.Sq)
	whole := c.fixed + float64(tiles)*c.perTile
	best, bestCost := 1, splitGain*whole
	for parts := 2; parts*blocks <= d.SMs && parts*minPartTiles <= tiles; parts++ {
		per := (tiles + parts - 1) / parts
		bytes := rows * float64(s.D) * 4 * float64(parts+1)
		cost := c.fixed + float64(per)*c.perTile + mergeFixed + bytes/mergeBytesPerSec*1e6
		if cost < bestCost {
			best, bestCost = parts, cost
		}
	}
	return best
}

// blockTiles is the most key tiles of blockN keys a block of blockM query
// rows of s loads: from the tile of its first row's first key through
// that of its last row's last (backend.Problem.KeyRange).
func blockTiles(s *backend.Problem, blockM, blockN int) int {
	most := 0
	for i0 := 0; i0 < s.Sq; i0 += blockM {
		lo, _ := s.KeyRange(i0)
		_, hi := s.KeyRange(min(i0+blockM, s.Sq) - 1)
		if hi > lo {
			most = max(most, (hi+blockN-1)/blockN-lo/blockN)
		}
	}
	return most
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
