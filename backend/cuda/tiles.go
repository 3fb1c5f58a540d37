// Package cuda is the NVIDIA GPU backend: PTX kernels we wrote (package
// kernels), loaded and launched through the CUDA driver API
// (gorgonia.org/cu v0.9.6 plus a small cgo file of our own). It is built
// only with -tags cuda; without the tag, selecting "cuda" returns an error
// saying so.
//
// Backends registered: "cuda" (the fastest stage that passed validation, see
// BestStage) and "cuda/stage1" .. "cuda/stage8" (one kernel stage each).
package cuda

import (
	"fmt"

	"github.com/fp8attn/fp8attn/backend"
)

// Stages are the kernel stages, in the order they were built. Each is
// complete and validated; docs/PERF.md records where each one is fastest
// (not always the latest: BestStage).
var Stages = []int{1, 2, 3, 4, 5, 6, 7, 8}

// BestStage is the stage "cuda" runs for a problem of shape s: the fastest
// stage that passes the conformance suite, by the H200 run recorded in
// docs/PERF.md (commit 1ef45cc): stage 6 for D=128 (large); for D=64, stage 5
// up to 512 keys (small 4.50 µs, mission 7.96 µs, where the later stages'
// extra warps only add merge work) and stage 7 beyond (long 80.1 µs against
// stage 5's 81.9).
func BestStage(s backend.Shape) int {
	switch {
	case s.D == 128:
		return 6
	case s.Sk <= 512:
		return 5
	}
	return 7
}

// HeadDims are the head dimensions the kernels are built for; other head
// dimensions are rejected with ErrUnsupported.
var HeadDims = []int{64, 128}

// TileConfig is one kernel's launch geometry. It is the single source for
// the launcher, the tests and the benchmarks, and must equal the constants
// the kernel was compiled with (checked when the module loads).
type TileConfig struct {
	BlockM  int // query rows per block
	BlockN  int // keys per K/V tile
	Threads int // threads per block
	Stages  int // depth of the cp.async K/V ring
}

// Tiles returns the configuration of stage's kernel for head dimension d.
func Tiles(stage, d int) (TileConfig, error) {
	if d != 64 && d != 128 {
		return TileConfig{}, fmt.Errorf("%w: cuda kernels support head dims %v, not %d", backend.ErrUnsupported, HeadDims, d)
	}
	switch stage {
	case 1:
		return TileConfig{BlockM: 16, BlockN: 64, Threads: 128, Stages: 2}, nil
	case 2:
		// Four warps share each 32-key tile of a 16-row block; S, P and O
		// live in shared memory too.
		return TileConfig{BlockM: 16, BlockN: 32, Threads: 128, Stages: 2}, nil
	case 3, 4:
		warps, bn, ring := 2, 64, 2
		if d == 128 {
			warps, bn = 1, 32
		}
		if stage == 4 {
			ring = 3
		}
		return TileConfig{BlockM: 16 * warps, BlockN: bn, Threads: 32 * warps, Stages: ring}, nil
	case 5, 6, 7, 8:
		// 16 query rows per block; the keys split across 4 warps (D=64) or
		// 2 (D=128), each with its own 2-slot ring of 32-key tiles; stages
		// 6-8 twice the warps with 1-slot rings.
		splits, ring := 4, 2
		if d == 128 {
			splits = 2
		}
		if stage >= 6 {
			splits, ring = 2*splits, 1
		}
		return TileConfig{BlockM: 16, BlockN: 32, Threads: 32 * splits, Stages: ring}, nil
	}
	return TileConfig{}, fmt.Errorf("%w: no cuda kernel stage %d (have %v)", backend.ErrUnsupported, stage, Stages)
}

// KernelName returns the PTX entry point of stage for head dimension d.
func KernelName(stage, d int) string { return fmt.Sprintf("fp8attn_stage%d_d%d", stage, d) }

// Grid returns the launch grid for a problem: (query blocks, query heads,
// batch).
func (t TileConfig) Grid(s backend.Shape) (x, y, z int) {
	return (s.Sq + t.BlockM - 1) / t.BlockM, s.Hq, s.B
}

// supports is the shape check every cuda backend shares.
func supports(p *backend.Problem, stage int) error {
	if p.Precision != backend.FP8E4M3 {
		return fmt.Errorf("%w: cuda kernels take FP8E4M3 inputs, not %v", backend.ErrUnsupported, p.Precision)
	}
	if _, err := Tiles(stage, p.D); err != nil {
		return err
	}
	if p.Hq > 65535 || p.B > 65535 {
		return fmt.Errorf("%w: cuda grid limits: heads and batch must be <= 65535", backend.ErrUnsupported)
	}
	return nil
}
