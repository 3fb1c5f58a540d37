package cuda

import "github.com/fp8attn/fp8attn/internal/tiles"

// When a masked call takes the narrow form (launch.go): pure arithmetic on
// the grid, built with or without the cuda tag so that its tests run
// everywhere.

// narrowMostTiles is the most key tiles the longest wide block of a call
// may load for the narrow form to take it: it measured ahead at 8 (B2 H8
// S1024 D128 causal) and behind at 68 (512 rows after 8192 cached keys).
const narrowMostTiles = 16

// narrowPlan is whether a masked call at D 128 runs on the narrow form
// (blocks of 64 rows, NarrowPerSM an SM) rather than the wide one (128
// rows in two consumer warpgroups that take GEMM turns), on sms SMs, where
// the narrow grid has narrowBlocks blocks and the longest wide block loads
// wideTiles key tiles. The narrow form is ahead only where its grid is one
// wave that puts two blocks on an SM where the wide grid leaves one, over
// short rows, whose blocks' fixed steps then run beside each other's
// tiles. Over longer rows, and in grids of several waves, the wide form's
// turns win (H200, public call in graph replay; docs/design/hopper-prefill.md).
func narrowPlan(sms, narrowBlocks, wideTiles int) bool {
	return narrowBlocks > sms && narrowBlocks <= tiles.NarrowPerSM*sms && wideTiles <= narrowMostTiles
}
