//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/kernelreg"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/internal/timing"
)

// kernelBackend runs one kernel stage (stage 0: bestStage for the
// problem's shape) on device 0, which opens on first use.
type kernelBackend struct {
	name  string
	stage int
	// cc, if not 0, is the compute capability bestStage chooses for (stage
	// 0) in place of the device's: "cuda/sm80" runs Ampere's choice on any
	// GPU.
	cc int
	// poison makes every call fill the device outputs with
	// poison.Bits before the kernel runs, so that an element the
	// kernel never writes cannot pass a test (pooled buffers hold earlier
	// results). Tests set it; the registered backends do not.
	poison bool
	// pagedCpAsync makes its paged caches run the cp.async attention kernel
	// where the warp-specialized one would (tests run both).
	pagedCpAsync bool
	// pagedWSBlocks, if positive, makes its paged caches run the
	// warp-specialized kernel on every call, on at most that many blocks,
	// so that each block walks several units (tests).
	pagedWSBlocks int
	// pagedPrefillRows, if not 0, is the query rows from which its paged
	// caches' calls run on the prefill kernels (negative: never), so that
	// tests and benchmarks run both paths.
	pagedPrefillRows int
	// pagedInPlaceTiles makes its paged caches' prefill calls read their
	// tiles from the pages in place where the paged form takes them, which
	// calls otherwise gather (pagedTilesOn; tests run both).
	pagedInPlaceTiles bool
	// pagedPacked makes its paged caches' varlen FP8 calls run on the
	// packed form in one launch where it takes them, even where packedOn
	// says not (TestPackedVarlen sets it); pagedGroups makes them run in
	// groups beside the split-KV kernel, as calls the packed form does not
	// take do (TestPagedVarlenFP8 sets it).
	pagedPacked, pagedGroups bool
	// hostEngine, if not nil, wraps the engine of its calls on host slices
	// (hostAttention), so that a benchmark can time each copy on the
	// device.
	hostEngine func(hostEngine) hostEngine
}

// stageFor opens device 0 and returns the stage to run p with.
func (b *kernelBackend) stageFor(p *backend.Problem) (*device, int, error) {
	d, err := openDevice(0)
	if err != nil {
		return nil, 0, err
	}
	if b.stage == 0 {
		cc := d.stageCapability()
		if b.cc != 0 {
			cc = min(cc, b.cc)
		}
		return d, bestStage(p.Shape, cc), nil
	}
	return d, b.stage, nil
}

// Name returns "cuda", a target's "cuda/smNN", or a ladder stage's
// "cuda/stageN".
func (b *kernelBackend) Name() string { return b.name }

// Supports accepts FP8E4M3 problems whose head dim the stage has
// (headDims; for stages 9 and 10 hopperHeadDims and adaHeadDims and the
// multiples of 16 below their largest, run on zero columns by the next
// kernel up: tiles.KernelDim) on a GPU that loads the stage; problems with
// attention variants on stages 9 and 10 only (variantsOn).
func (b *kernelBackend) Supports(p *backend.Problem) error {
	if p == nil {
		return fmt.Errorf("%w: cuda: a nil problem", backend.ErrInvalid)
	}
	if b.stage != 0 { // a fixed stage: shape errors without touching the GPU
		if err := supports(p, b.stage); err != nil {
			return err
		}
	}
	d, st, err := b.stageFor(p)
	if err != nil {
		return err
	}
	if b.stage == 0 { // the stage bestStage chose for this GPU
		if err := supports(p, st); err != nil {
			return err
		}
	}
	return d.loads(st, p.D)
}

// loads returns nil if the device has stage st's kernels for head dim dim
// (the Hopper module, the FP8 mma.sync stages, the Ada kernel of the head
// dim), or why not.
func (d *device) loads(st, dim int) error {
	if st == tiles.HopperStage {
		return d.hopperErr
	}
	if slices.Contains(fp8mmaStages, st) && d.fp8mmaErr != nil {
		return d.fp8mmaErr
	}
	if _, ok := d.ada[adaDim(dim)]; st == tiles.AdaStage && !ok {
		return d.adaMissing(dim)
	}
	return nil
}

// QuantizesOnRead reports whether the backend encodes p's float32 inputs
// itself (backend.Problem.QuantizeOnRead): it encodes them straight into
// the page-locked ring that carries them to the device (hostAttention), so
// no codes are written to Go memory and copied again. (A caller that asks
// ScalesOnRead first leaves the scales to it as well.)
func (b *kernelBackend) QuantizesOnRead(p *backend.Problem) bool {
	if p == nil {
		return false
	}
	_, _, err := problemShape(p)
	return err == nil
}

// Attention uploads p, runs the stage, and downloads the result. A
// problem with QuantizeOnRead goes through the page-locked ring
// (hostAttention): its codes encoded into it on the host, their scales
// computed there too with ScalesOnRead.
func (b *kernelBackend) Attention(p *backend.Problem) (err error) {
	d, st, err := b.stageFor(p)
	if err != nil {
		return err
	}
	if p != nil {
		if err := variantsOn(p, st); err != nil { // before anything is uploaded
			return err
		}
	}
	if p != nil && p.QuantizeOnRead {
		return b.hostAttention(d, st, p)
	}
	r, err := d.Upload(p)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	if b.poison {
		if err := r.Poison(); err != nil {
			return err
		}
	}
	if err := r.Run(st); err != nil {
		return err
	}
	return r.Download(p.Out, p.LSE)
}

// DeviceTimes implements timing.Timer: per-call device time in CUDA-graph
// replay.
func (b *kernelBackend) DeviceTimes(p *backend.Problem, iters int) ([]float64, error) {
	return b.times(p, iters, true)
}

// LaunchTimes implements timing.LaunchTimer: per-call device time of
// launches issued back to back.
func (b *kernelBackend) LaunchTimes(p *backend.Problem, iters int) ([]float64, error) {
	return b.times(p, iters, false)
}

func (b *kernelBackend) times(p *backend.Problem, iters int, graphed bool) ([]float64, error) {
	if p != nil && p.ScalesOnRead {
		return nil, fmt.Errorf("%w: cuda: device times of a problem without its scales (quantize it first)", backend.ErrUnsupported)
	}
	d, st, err := b.stageFor(p)
	if err != nil {
		return nil, err
	}
	r, err := d.Upload(p)
	if err != nil {
		return nil, err
	}
	times, err := r.Times(st, iters, graphed)
	return times, errors.Join(err, r.Free())
}

// init registers "cuda" and the targets as backends, and the targets and
// the ladder stages with internal/kernelreg.
func init() {
	backend.MustRegister(&kernelBackend{name: "cuda"}, 20)
	for _, t := range targets {
		b := &kernelBackend{name: "cuda/" + t.kernel, stage: t.stage, cc: t.cc}
		backend.MustRegister(b, -1)
		kernelreg.Register(t.kernel, b)
	}
	for _, s := range tiles.Stages {
		kernelreg.Register(kernelName(s), &kernelBackend{name: stageBackendName(s), stage: s})
	}
}

// AttentionQuantizing implements backend.QuantizingMemory: where the stage
// is 9 and quant_pack9 or its long form takes the heads (quantPackFor), one
// launch quantizes the float32 inputs straight into stage 9's images and a
// second runs the attention (its score factors from the scales the first
// wrote); where the call is
// one that the one-tile form takes whole in a cluster a head
// (tiles.HopperConfig.OneTileQuantizing: D 64, 129-256 keys, at most 256
// query rows), that form quantizes its own inputs in one launch. Either
// way the output and LSE are bit for bit Quantize followed by AttentionOn
// (its codes and scales never written); elsewhere ErrUnsupported, and the
// caller makes those two calls. Where the FP8 call divides its blocks'
// keys (keySplits), the fused form divides them into the same parts
// (launchFusedSplit).
func (b *kernelBackend) AttentionQuantizing(p *backend.Problem, out, lse, q, k, v backend.Buffer) (err error) {
	bufs, err := ours(q, k, v, out, lse)
	if err != nil {
		return err
	}
	if p == nil || bufs[0] == nil || bufs[1] == nil || bufs[2] == nil || bufs[3] == nil {
		return fmt.Errorf("%w: cuda: AttentionQuantizing without a problem, an input or an output buffer", backend.ErrInvalid)
	}
	pp := *p
	pp.Precision = backend.FP8E4M3
	nq, nkv, err := problemShape(&pp)
	if err != nil {
		return err
	}
	d, st, err := b.stageFor(&pp)
	if err != nil {
		return err
	}
	if st != tiles.HopperStage || d.hopperErr != nil || !d.fusable(&pp) {
		return fmt.Errorf("%w: cuda: no fused quantization for stage %d, Sq %d, Sk %d, D %d", backend.ErrUnsupported, st, pp.Sq, pp.Sk, pp.D)
	}
	if err := b.Supports(&pp); err != nil {
		return err
	}
	for i, x := range bufs[:3] {
		if err := x.fits(d, 4*[]int64{nq, nkv, nkv}[i], [...]string{"q", "k", "v"}[i]); err != nil {
			return err
		}
	}
	var scales [3]*buffer
	defer func() {
		for _, sc := range scales {
			if sc != nil {
				err = errors.Join(err, sc.Free())
			}
		}
	}()
	for i, n := range []int{pp.B * pp.Hq, pp.B * pp.Hkv, pp.B * pp.Hkv} {
		if scales[i], err = d.Alloc(4 * int64(n)); err != nil {
			return err
		}
	}
	r, err := d.newResident(&pp, [6]*buffer{bufs[0], bufs[1], bufs[2], scales[0], scales[1], scales[2]}, bufs[3], bufs[4])
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	r.fused = true
	return r.Run(st)
}

// AttentionOn implements backend.Memory: a resident over the buffers
// (NewResident) run with the backend's stage (bestStage for "cuda"), its
// output and LSE written into out and lse. It returns without waiting for
// the device: a score factor beyond the limit is reported by out's Read.
func (b *kernelBackend) AttentionOn(p *backend.Problem, out, lse backend.Buffer, in [6]backend.Buffer) (err error) {
	bufs, err := ours(append(in[:], out, lse)...)
	if err != nil {
		return err
	}
	if bufs[6] == nil || p == nil {
		return fmt.Errorf("%w: cuda: AttentionOn without a problem or an output buffer", backend.ErrInvalid)
	}
	for _, x := range bufs[:6] {
		if x == nil {
			return fmt.Errorf("%w: cuda: AttentionOn with a nil input buffer", backend.ErrInvalid)
		}
	}
	pp := *p
	pp.Precision = backend.FP8E4M3
	d, st, err := b.stageFor(&pp)
	if err != nil {
		return err
	}
	if err := b.Supports(&pp); err != nil { // the stage's shape check and the device's
		return err
	}
	r, err := d.newResident(&pp, [6]*buffer(bufs[:6]), bufs[6], bufs[7])
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	return r.Run(st)
}

// The device-timing interfaces sdpabench uses.
var (
	_ timing.Timer       = (*kernelBackend)(nil)
	_ timing.LaunchTimer = (*kernelBackend)(nil)
	_ timing.PagedTimer  = (*pagedKV)(nil)
)
