package cuda

import "github.com/fp8attn/fp8attn/backend"

// The key split's plan (split.go): pure arithmetic on the grid, built
// with or without the cuda tag so that its tests run everywhere.

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

// keySplitPlan returns the parts a tiled grid of blocks blocks on sms SMs,
// at kernel head dim kd, divides each block's key tiles into (1: none),
// where the block with the most loads tiles tiles and the call has rows
// query rows of head dim d: the count, with minPartTiles tiles a part on
// average and every part a block of one wave (so grids of more than half
// the SMs take none), that minimizes the modelled time of a block over
// its part of the tiles plus the merge (splitCost), where that is at most
// splitGain of the unsplit time.
func keySplitPlan(kd, sms, blocks, tiles int, rows float64, d int) int {
	c, ok := splitCost[kd]
	if !ok || blocks <= 0 {
		return 1
	}
	whole := c.fixed + float64(tiles)*c.perTile
	best, bestCost := 1, splitGain*whole
	for parts := 2; parts*blocks <= sms && parts*minPartTiles <= tiles; parts++ {
		per := (tiles + parts - 1) / parts
		bytes := rows * float64(d) * 4 * float64(parts+1)
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
