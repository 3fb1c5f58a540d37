// Package cuda is the NVIDIA GPU backend: CUDA kernels we wrote (package
// kernels), loaded as PTX and launched through the CUDA driver API
// (gorgonia.org/cu v0.9.6 plus a small cgo file of our own). It is built
// only with -tags cuda; without the tag, selecting "cuda" returns an error
// saying so.
//
// Backends registered: "cuda" (the fastest stage that passed validation, see
// BestStage) and "cuda/stage1" .. "cuda/stageN" (one kernel stage each; the
// list is Stages).
package cuda

import (
	"errors"
	"fmt"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// Stages are the kernel stages, in the order they were built. Each is
// complete and validated; docs/PERF.md records where each one is fastest
// (not always the latest: BestStage). The list and every stage's geometry
// are defined once, in internal/tiles.
var Stages = append([]int(nil), tiles.Stages...)

// HeadDims are the head dimensions the kernels are built for; other head
// dimensions are rejected with ErrUnsupported.
var HeadDims = append([]int(nil), tiles.HeadDims...)

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

// geometry returns stage's tile geometry for head dimension d, or an error
// wrapping ErrUnsupported.
func geometry(stage, d int) (tiles.Config, error) {
	c, err := tiles.Get(stage, d)
	if errors.Is(err, tiles.ErrNoKernel) {
		return c, fmt.Errorf("%w: cuda: %v", backend.ErrUnsupported, err)
	}
	return c, err
}

// supports is the shape check every cuda backend shares.
func supports(p *backend.Problem, stage int) error {
	if p.Precision != backend.FP8E4M3 {
		return fmt.Errorf("%w: cuda kernels take FP8E4M3 inputs, not %v", backend.ErrUnsupported, p.Precision)
	}
	if _, err := geometry(stage, p.D); err != nil {
		return err
	}
	if p.Hq > 65535 || p.B > 65535 {
		return fmt.Errorf("%w: cuda grid limits: heads and batch must be <= 65535", backend.ErrUnsupported)
	}
	return nil
}
