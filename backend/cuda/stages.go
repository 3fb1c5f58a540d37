// Package cuda is the NVIDIA GPU backend: CUDA kernels we wrote (package
// kernels), loaded as PTX and launched through the CUDA driver API
// (gorgonia.org/cu v0.9.6 plus a small cgo file of our own). It is built
// only with -tags cuda; without the tag, selecting "cuda" returns an error
// saying so.
//
// Backends registered: "cuda" (the best kernel for the GPU at hand, see
// bestStage) and one per target architecture (targets): "cuda/sm90" (the
// Hopper kernel), "cuda/sm89" (the Ada kernel) and "cuda/sm80" (Ampere's
// kernels, chosen by shape). The ladder of stages 1-8, the validated
// progression the targets grew from (docs/design/ladder.md), is not
// registered as backends: tests run every stage, and tools name them
// through internal/kernelreg ("stage1" .. "stage8", sdpabench -kernel).
//
// A build always runs the kernel modules it embeds. Kernel development
// builds (-tags cuda,kerneldev) may load them from files the environment
// names instead (overrides_kerneldev.go; docs/DEVELOPING.md).
package cuda

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// allStages are the kernel stages, in the order they were built: the
// ladder (tiles.Stages, the compute_89 family), the Hopper kernel,
// tiles.HopperStage (sm_90a, loaded on compute capability 9.0 only), and
// the Ada kernel, tiles.AdaStage (compute_89, both GEMMs on FP8 mma.sync).
// Each is complete and validated; docs/BENCHMARKS.md records where each one
// is fastest (bestStage). Every stage's geometry is defined once, in
// internal/tiles.
var allStages = append(append([]int(nil), tiles.Stages...), tiles.HopperStage, tiles.AdaStage)

// A target is a public backend for one GPU architecture: "cuda/" + kernel.
// It runs a fixed stage, or (stage 0) the stage bestStage chooses for
// compute capability cc.
type target struct {
	kernel    string // the name in internal/kernelreg
	stage, cc int
}

// targets are the public per-architecture backends.
var targets = []target{
	{kernel: "sm90", stage: tiles.HopperStage},
	{kernel: "sm89", stage: tiles.AdaStage},
	{kernel: "sm80", cc: 80}, // stages 5 and 6, by shape
}

// kernelName is the internal/kernelreg name of a stage: its target's
// ("sm90", "sm89") or, for the ladder, "stageN".
func kernelName(stage int) string {
	for _, t := range targets {
		if t.stage != 0 && t.stage == stage {
			return t.kernel
		}
	}
	return fmt.Sprintf("stage%d", stage)
}

// stageBackendName is the backend name of a stage's kernel: "cuda/sm90",
// "cuda/sm89", or "cuda/stageN" for a ladder stage (reported by tools, never
// registered with package backend).
func stageBackendName(stage int) string { return "cuda/" + kernelName(stage) }

// headDims are the head dimensions of stages 1-8.
var headDims = append([]int(nil), tiles.HeadDims...)

// hopperHeadDims are the head dimensions of the Hopper kernel (stage 9).
var hopperHeadDims = append([]int(nil), tiles.HopperHeadDims...)

// adaHeadDims are the head dimensions of the Ada kernel (stage 10).
var adaHeadDims = append([]int(nil), tiles.AdaHeadDims...)

// fp8mmaStages need FP8 mma.sync (compute capability 8.9 or newer): the
// compute_80 build for Ampere leaves them out.
var fp8mmaStages = []int{7, 8, tiles.AdaStage}

// bestStage is the stage "cuda" runs for a problem of shape s on a GPU of
// compute capability cc (major*10 + minor).
//   - On 9.0, the Hopper kernel (stage 9) for every head dim it has:
//     the fastest on the H200 (docs/BENCHMARKS.md), and within the accuracy rule
//     since each tile's P·V is promoted to float32 and rows are normalized
//     by the tensor cores' sum of the rounded weights (docs/ACCURACY.md,
//     "P·V on Hopper's FP8 tensor cores, fixed"; hopperByDefault).
//   - On 8.9 and newer other than 9.0 (Ada, and Blackwell running the
//     compute_89 PTX), the Ada kernel (stage 10), the one with both GEMMs
//     on FP8 tensor cores: chosen from its design and sm_89 SASS
//     (docs/design/ada-prefill.md); no L4 time is measured.
//   - Otherwise (Ampere, and head dims the kernels above lack), from
//     stages 1-6 and, on 8.9+, 7 (commit 1ef45cc, H200): stage 6 for D=128;
//     for D=64, stage 5 up to 512 keys (small 4.50 µs, mission 7.96 µs,
//     where the later stages' extra warps only add merge work) and stage 7
//     beyond (long 80.1 µs against stage 5's 81.9), stage 6 where 7 is
//     missing.
func bestStage(s backend.Shape, cc int) int {
	switch {
	case cc == 90 && hopperDim(s.D) != 0 && (hopperByDefault || !slices.Contains(tiles.HeadDims, s.D)):
		return tiles.HopperStage
	case cc >= 89 && cc != 90 && adaDim(s.D) != 0:
		return tiles.AdaStage
	case s.D == 128:
		return 6
	case s.Sk <= 512:
		return 5
	case cc < 89:
		return 6
	}
	return 7
}

// hopperByDefault: whether bestStage chooses stage 9 on compute
// capability 9.0 for the head dims the other stages have too (64, 128).
// False from commit 1927a86 while its P·V ran in one wgmma accumulator
// (64x the quantization error on values of one sign at 4096 keys); true
// since P·V is promoted per tile and TestFP8PAccuracy passes (1.08-1.33x on
// values of one sign, 1.08-1.12x on N(0,1); H200, 2026-11-23). False turns
// the choice back to stages 5-7 for D 64/128.
const hopperByDefault = true

// hopperDim and adaDim are the head dims of the Hopper and Ada kernels that
// run head dim d (its own, or the next one up over zero columns:
// tiles.KernelDim), 0 for none.
func hopperDim(d int) int {
	k, _ := tiles.HopperKernelDim(d)
	return k
}

func adaDim(d int) int {
	k, _ := tiles.AdaKernelDim(d)
	return k
}

// geometry returns stage's tile geometry for head dimension d (for stages
// 9 and 10 that of the kernel that runs d: tiles.KernelDim), or an error
// wrapping ErrUnsupported. For the Ada kernel, BlockM is the rows of a
// block, which pack heads with positions (tiles.AdaConfig.Pack).
func geometry(stage, d int) (tiles.Config, error) {
	switch stage {
	case tiles.HopperStage:
		kd, err := tiles.HopperKernelDim(d)
		if err != nil {
			return tiles.Config{}, fmt.Errorf("%w: cuda: %v", backend.ErrUnsupported, err)
		}
		h, _ := tiles.Hopper(kd)
		return tiles.Config{BlockM: h.BlockM, BlockN: h.BlockN, Threads: h.Threads, Ring: h.Ring}, nil
	case tiles.AdaStage:
		kd, err := tiles.AdaKernelDim(d)
		if err != nil {
			return tiles.Config{}, fmt.Errorf("%w: cuda: %v", backend.ErrUnsupported, err)
		}
		a, _ := tiles.Ada(kd)
		return tiles.Config{BlockM: a.BlockM(), BlockN: a.BlockN, Threads: a.Threads(), Ring: a.Ring}, nil
	}
	c, err := tiles.Get(stage, d)
	if errors.Is(err, tiles.ErrNoKernel) {
		return c, fmt.Errorf("%w: cuda: %v", backend.ErrUnsupported, err)
	}
	return c, err
}

// supportsInputs is the check every upload makes: FP8 inputs within the
// grid's limits.
func supportsInputs(p *backend.Problem) error {
	switch {
	case p.Precision == backend.FP32:
		return errFP32Inputs
	case p.Precision != backend.FP8E4M3:
		return fmt.Errorf("%w: cuda kernels take FP8E4M3 inputs, not %v", backend.ErrUnsupported, p.Precision)
	case p.Hq > maxGridY || p.B > maxGridY:
		return errGridLimits
	}
	return nil
}

// maxGridY is the largest grid y and z of a launch: query heads and
// batches (and a V pack's KV heads of all batches) each up to it.
const maxGridY = 65535

// The refusals supportsInputs returns most, made once: backend.Select asks
// every backend on every call with Backend "", and a refusal there must
// not allocate (an FP32 call on a GPU host runs on the CPU allocation-free).
var (
	errFP32Inputs = fmt.Errorf("%w: cuda kernels take FP8E4M3 inputs, not %v", backend.ErrUnsupported, backend.FP32)
	errGridLimits = fmt.Errorf("%w: cuda grid limits: heads and batch must be <= 65535", backend.ErrUnsupported)
)

// supports is the shape check of one stage (device capabilities aside).
func supports(p *backend.Problem, stage int) error {
	if err := supportsInputs(p); err != nil {
		return err
	}
	if err := variantsOn(p, stage); err != nil {
		return err
	}
	_, err := geometry(stage, p.D)
	return err
}

// variantsOn refuses a problem with attention variants on a stage without
// them: the Hopper kernel (stage 9) and the Ada kernel (stage 10) compute
// the sliding window, the softcap and the sinks; the other stages compute
// none, and a call must never get a plain result in their place.
func variantsOn(p *backend.Problem, stage int) error {
	if stage == tiles.HopperStage || stage == tiles.AdaStage || !p.Variants.Any() {
		return nil
	}
	return p.Variants.Unsupported(fmt.Sprintf("cuda stage %d (stages %d, Hopper, and %d, Ada, have them)", stage, tiles.HopperStage, tiles.AdaStage))
}
