//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// hopperLaunch is one attention launch: the entry point, its grid and
// block size, and whether it quantizes its own inputs (a fused call
// without quant_pack9).
type hopperLaunch struct {
	fn         C.CUfunction
	gx, gy, gz int
	threads    int
	quantizes  bool
}

// attention returns the launch of a call of shape s: the fused entry
// (quant_pack9 before it) or not, in one tile where cfg.OneTile says so
// (loadHopper loads those entries for every config OneTile can hold),
// with the grid and block cfg.Launch gives; a fused call that
// cfg.OneTileQuantizing takes runs the one-tile form that quantizes its
// own inputs, in the clusters cfg.QuantizingLaunch gives.
func (k *hopperKernels) attention(s backend.Shape, fused bool) hopperLaunch {
	if fused && k.attnQuantizing != nil && k.cfg.OneTileQuantizing(s.Sq, s.Sk) {
		l := hopperLaunch{fn: k.attnQuantizing, quantizes: true}
		l.gx, l.gy, l.gz, l.threads = k.cfg.QuantizingLaunch(s.B, s.Hq)
		return l
	}
	l := hopperLaunch{fn: k.attn}
	switch one := k.cfg.OneTile(s.Sk); {
	case one && fused:
		l.fn = k.attnFusedOne
	case one:
		l.fn = k.attnOne
	case fused:
		l.fn = k.attnFused
	}
	l.gx, l.gy, l.gz, l.threads = k.cfg.Launch(s.B, s.Hq, s.Sq, s.Sk)
	return l
}

func (r *resident) launch(stage int) error {
	written, paged := r.vImageWritten, r.pagedNext // (one launch's)
	r.vImageWritten, r.pagedNext = false, nil
	tc, err := geometry(stage, r.shape.D)
	if err != nil {
		return err
	}
	if len(r.bufs) == 0 {
		return errors.New("cuda: resident used after Free")
	}
	if r.fused && stage != tiles.HopperStage {
		return fmt.Errorf("%w: cuda: float32 inputs quantized on launch run on stage %d only", backend.ErrUnsupported, tiles.HopperStage)
	}
	if err := variantsOn(&r.shape, stage); err != nil {
		return err
	}
	s := r.shape
	if (written || paged != nil) && stage != tiles.HopperStage {
		return fmt.Errorf("cuda: the V image written, or the cache's pages given, for a launch on stage %d", stage)
	}
	if paged != nil {
		return r.launchPaged(paged)
	}
	if stage == tiles.HopperStage {
		if ok, err := r.launchTensors(written); ok || err != nil {
			return err
		}
	}
	if r.scores != nil && !r.fused {
		if err := r.launchScores(); err != nil {
			return err
		}
	}
	switch stage {
	case tiles.HopperStage:
		if r.dev.hopperErr != nil {
			return r.dev.hopperErr
		}
		k := r.kernels()
		b, hq, hkv := int64(s.B), int64(s.Hq), int64(s.Hkv)
		sizes := [3]int64{b * hq * int64(k.cfg.QImageBytes(s.Sq)), b * hkv * int64(k.cfg.KImageBytes(s.Sk)), b * hkv * int64(k.cfg.VImageBytes(s.Sk))}
		fns := [3]C.CUfunction{k.packQ, k.packK, k.packV}
		if r.fused {
			fns = [3]C.CUfunction{}
		}
		l := k.attention(s.Shape, r.fused)
		if l.quantizes { // its codes stay in shared memory: no images
			sizes = [3]int64{}
		}
		if err := r.pack(stage, sizes, fns); err != nil {
			return err
		}
		if r.fused {
			fp := r.fusedParams()
			if !l.quantizes {
				if err := r.launchQuantPack(k, fp); err != nil {
					return err
				}
				if parts := r.dev.keySplits(k, &s, l.gx*l.gy*l.gz); parts > 1 && k.attnFusedSplit != nil {
					return r.launchFusedSplit(k, fp, l, parts)
				}
			}
			return launchStruct(l.fn, l.gx, l.gy, l.gz, l.threads, k.cfg.SharedBytes(), r.dev.stream, unsafe.Pointer(fp))
		}
		return launch(l.fn, l.gx, l.gy, l.gz, l.threads, k.cfg.SharedBytes(), r.dev.stream, r.params)
	case tiles.AdaStage:
		if r.dev.fp8mmaErr != nil {
			return r.dev.fp8mmaErr
		}
		k, ok := r.dev.ada[adaDim(s.D)]
		if !ok {
			return r.dev.adaMissing(s.D)
		}
		sizes := [3]int64{0, 0, int64(s.B) * int64(s.Hkv) * int64(k.cfg.VImageBytes(s.Sk))}
		if err := r.pack(stage, sizes, [3]C.CUfunction{nil, nil, k.packV}); err != nil {
			return err
		}
		gx, gy, gz := k.cfg.Grid(s.B, s.Hkv, s.Group(), s.Sq)
		return launch(k.attention(&s), gx, gy, gz, tc.Threads, k.cfg.SharedBytes(), r.dev.stream, r.params)
	}
	if r.dev.fp8mmaErr != nil && slices.Contains(fp8mmaStages, stage) {
		return r.dev.fp8mmaErr
	}
	gx, gy, gz := tc.Grid(s.B, s.Hq, s.Sq)
	return launch(r.dev.fns[[2]int{stage, s.D}], gx, gy, gz, tc.Threads, 0, r.dev.stream, r.params)
}

// launchTensors runs the Hopper kernel's tensor form on a resident over
// device inputs (NewResident's): the kernel reads Q and K where they are
// through tensor maps and computes the score factors from the scales. In
// one tile (cfg.OneTile) it transposes V itself: one launch. Tiled, V is
// transposed once per call into the V image first, by fp8attn_pack9vt
// through the same map (kernels/hopper/tensors.cuh says why): two
// launches, the second a programmatic dependent one, or the attention
// alone where written (the caller wrote the image, as the paged prefill's
// inputs kernel does: then the form must be the tiled one). Where the
// tiled grid is one wave (no more blocks than SMs) and has no softcap, the
// head start's pair (fp8attn_pack9vth, fp8attn_stage9th), whose blocks
// begin their first tiles while the pack finishes, unless the call has a
// causal mask (a sliding window included), the head dim has the narrow
// form (fp8attn_stage9tn: blocks of 64 rows, two an SM) and narrowPlan
// gives the call to it (narrowTakes), which then runs it (but for the key
// split, which comes first); where keySplits divides
// the blocks' key tiles into parts, the key split (fp8attn_stage9ts, then
// fp8attn_merge9: three launches). It reports false, launching nothing, where
// the form does not take the call, which the pack path then runs: no
// tensor entry for the head dim, a layout the tensor maps cannot describe
// (an address or a stride not a multiple of 16 bytes), or, tiled, more
// than maxGridY KV heads of all batches (the V pack's grid y). The maps
// are encoded on the first launch and kept: the resident's buffers and
// shape are fixed; an encoding the driver refuses otherwise is an error.
// The caller is inside do.
func (r *resident) launchTensors(written bool) (bool, error) {
	fn, one := r.tensorEntry()
	if written && (fn == nil || one) { // (prefillVImage asks tensorEntry the same)
		return true, errors.New("cuda: the V image written for a launch that does not read it")
	}
	if fn == nil {
		return false, nil
	}
	s := r.shape
	k := r.kernels()
	if _, err := r.tensorLaunch(k); err != nil {
		return true, err
	}
	gx, gy, gz, threads := k.cfg.Launch(s.B, s.Hq, s.Sq, s.Sk)
	smem := k.cfg.TensorSharedBytes()
	if !one { // the V image, a block a tile (fp8attn_pack9vt), unless the caller wrote it
		if err := r.vImage(); err != nil {
			return true, err
		}
		r.tensors.P.F.P.VImage = r.params.VImage
		pack := k.packVTensor
		parts := r.dev.keySplits(k, &s, gx*gy*gz)
		r.tensors.P.Splits = 0
		switch {
		case parts > 1:
			if err := r.splitParts(r.tensors, parts); err != nil {
				return true, err
			}
			fn, gz = k.attnTensorsSplit, gz*parts
		case r.dev.narrowTakes(k, &s):
			fn, smem = k.attnTensorsNarrow, k.cfg.NarrowSharedBytes()
			gx, gy, gz, threads = k.cfg.NarrowLaunch(s.B, s.Hq, s.Sq)
		case k.attnTensorsHead != nil && gx*gy*gz <= r.dev.headStartBlocks && !written:
			fn, pack = k.attnTensorsHead, k.packVTensorHead
		}
		if !written {
			if err := r.launchVPack(pack); err != nil {
				return true, err
			}
		}
	}
	if err := launchStruct(fn, gx, gy, gz, threads, smem, r.dev.stream, unsafe.Pointer(&r.tensors.P)); err != nil {
		return true, err
	}
	if r.tensors.P.Splits == 0 {
		return true, nil
	}
	return true, r.launchMerge(r.tensors)
}

// tensorLaunch returns the resident's tensor-form launch (r.tensors), made
// on its first use with k's maps.
func (r *resident) tensorLaunch(k hopperKernels) (*tensorLaunch, error) {
	if r.tensors == nil {
		tl := new(tensorLaunch)
		sp := r.scores
		tl.P.F = fusedQuantParams{P: *r.params, Bad: sp.Bad, Scale: sp.Scale, Limit: sp.Limit}
		if err := tensorMapsFor(&tl.P, k.cfg); err != nil {
			return nil, err
		}
		r.tensors = tl
	}
	return r.tensors, nil
}

// kernels returns the Hopper kernels of the resident's launch: hopperFor's,
// or their entries without the float32 row sums (hopperKernels.noLSE)
// where the launch writes no LSE and the head dim has them.
func (r *resident) kernels() hopperKernels {
	k := r.dev.hopperFor(&r.shape)
	if r.params.LSE == 0 && k.noLSE != nil && noLSEOn() {
		return *k.noLSE
	}
	return k
}

// narrowTakes is whether the narrow form runs call s: a masked call, on
// a module that has it, with the form on (narrowOn), where narrowPlan
// takes it (narrowForced in tests).
func (d *device) narrowTakes(k hopperKernels, s *backend.Problem) bool {
	if k.attnTensorsNarrow == nil || s.Mask == backend.NoMask || !narrowOn() {
		return false
	}
	if d.narrowForced {
		return true
	}
	x, y, z, _ := k.cfg.NarrowLaunch(s.B, s.Hq, s.Sq)
	return narrowPlan(d.SMs, x*y*z, blockTiles(s, k.cfg.BlockM, k.cfg.BlockN))
}

// tensorEntry returns the tensor form's entry point that a Hopper launch
// of the resident runs (nil where the pack path runs it: no tensor entry
// for the head dim, or a layout launchTensors refuses), and whether it is
// the one-tile form. A refusal is kept.
func (r *resident) tensorEntry() (fn C.CUfunction, one bool) {
	s := r.shape
	if r.scores == nil || r.fused || r.dev.hopperErr != nil {
		return nil, false
	}
	k := r.kernels()
	fn, one = k.attnTensors, k.cfg.OneTile(s.Sk)
	if one {
		fn = k.attnTensorsOne
	}
	if fn == nil || r.tensorsRefused {
		return nil, one
	}
	if r.tensors == nil && (!tensorMappable(r.params) || (!one && s.B*s.Hkv > maxGridY)) {
		r.tensorsRefused = true
		return nil, one
	}
	return fn, one
}

// vImage makes sure the resident has the tiled tensor form's V image
// (r.params.VImage): allocated on first use, kept until Free.
func (r *resident) vImage() error {
	return r.pack(tiles.HopperStage, [3]int64{0, 0, r.vImageBytes()}, [3]C.CUfunction{})
}

// vImageBytes is the size of the tiled tensor form's V image.
func (r *resident) vImageBytes() int64 {
	s := r.shape
	cfg := r.dev.hopperFor(&s).cfg
	return int64(s.B) * int64(s.Hkv) * int64(cfg.VImageBytes(s.Sk))
}

// launchVPack launches pack (fp8attn_pack9vt or its head start's
// fp8attn_pack9vth) over the tensor form's parameters: a block of 128
// threads a tile of each KV head of every batch entry.
func (r *resident) launchVPack(pack C.CUfunction) error {
	s := r.shape
	k := r.dev.hopperFor(&s)
	ntiles := (s.Sk + k.cfg.BlockN - 1) / k.cfg.BlockN
	return launchStruct(pack, ntiles, s.B*s.Hkv, 1, 128, k.packVTensorSmem, r.dev.stream, unsafe.Pointer(&r.tensors.P))
}

// pack lays the resident's inputs out for stage on the device: the pack
// kernels (one per image with a nonzero size; one thread per 16 image
// bytes, 256 a block) write the Q, K and V images, which stay with the
// resident until Free; once for Upload's residents, at every launch for
// NewResident's (whose inputs may change); a nil kernel only allocates its
// image (quant_pack9 fills them). It leaves the stage's images in the
// params block. The caller holds d.mu with the context current.
func (r *resident) pack(stage int, sizes [3]int64, fns [3]C.CUfunction) error {
	imgs, ok := r.images[stage]
	r.params.QImage, r.params.KImage, r.params.VImage = imgs[0], imgs[1], imgs[2]
	if ok && r.scores == nil { // inputs that cannot change: packed once
		return nil
	}
	for i, n := range sizes {
		if n == 0 || imgs[i] != 0 {
			continue
		}
		p, size, err := r.dev.alloc(n)
		if err != nil {
			return err
		}
		r.bufs = append(r.bufs, pooled{p, size})
		imgs[i] = uint64(p)
	}
	r.params.QImage, r.params.KImage, r.params.VImage = imgs[0], imgs[1], imgs[2]
	for i, fn := range fns {
		if sizes[i] == 0 || fn == nil { // (no pack kernels: quant_pack9 writes the images)
			continue
		}
		if err := launch(fn, int((sizes[i]/16+255)/256), 1, 1, 256, 0, r.dev.stream, r.params); err != nil {
			return err
		}
	}
	if r.images == nil {
		r.images = map[int][3]uint64{}
	}
	r.images[stage] = imgs
	return nil
}

// Times measures stage's device time per call, in microseconds, one figure
// per batch of calls (see device.timeCalls); warm-up launches (which also
// pack the Hopper kernel's inputs) come first.
func (r *resident) Times(stage, iters int, graphed bool) ([]float64, error) {
	var out []float64
	err := r.dev.do(func() error {
		var err error
		out, err = r.dev.timeCalls(iters, graphed, func() error { return r.launch(stage) })
		return err
	})
	return out, err
}

// timeCalls measures the device time of one call (the work call issues on
// the stream), in microseconds, one figure per batch of 10 calls, after 10
// warm-up calls. With graphed, a batch is captured once in a CUDA graph and
// the graph is replayed between CUDA events, so that host launch overhead
// stays out (the method of the PyTorch and Triton scripts in bench/).
// Without, the batch is launched back to back between events (launch
// overhead included where the kernel is shorter than a launch). The caller
// holds d.mu with the context current (inside do).
func (d *device) timeCalls(iters int, graphed bool, call func() error) ([]float64, error) {
	const batch = 10
	n := max(iters/batch, 5)
	out := make([]float64, n)
	evs := make([]cu.Event, n+1)
	for i := range evs {
		ev, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return nil, err
		}
		evs[i] = ev
		defer cu.DestroyEvent(&evs[i])
	}
	for i := 0; i < 10; i++ { // warm up
		if err := call(); err != nil {
			return nil, err
		}
	}
	issue := func() error {
		for j := 0; j < batch; j++ {
			if err := call(); err != nil {
				return err
			}
		}
		return nil
	}
	if graphed {
		g, err := capture(d.stream, issue)
		if err != nil {
			return nil, err
		}
		defer g.destroy()
		issue = func() error { return g.launch(d.stream) }
		if err := issue(); err != nil { // the graph's first replay uploads it
			return nil, err
		}
	}
	if err := evs[0].Record(d.stream); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		if err := issue(); err != nil {
			return nil, err
		}
		if err := evs[i+1].Record(d.stream); err != nil {
			return nil, err
		}
	}
	if err := evs[n].Synchronize(); err != nil {
		return nil, fmt.Errorf("cuda: kernel failed: %w", err)
	}
	for i := range out {
		ms, err := evs[i].Elapsed(evs[i+1])
		if err != nil {
			return nil, err
		}
		out[i] = ms * 1e3 / batch
	}
	return out, nil
}

// quantPackFor says which kernel quantizes p's float32 inputs into stage
// 9's images: quant_pack9 where a block's rows (the longest head's chunk)
// times D fit its codes, else the long form where it takes the heads
// (quantLongGeometry.takes). ok is false where neither runs: a head dim
// the Hopper kernel is not built for (quant_pack9 and the quantizing forms
// write and read whole kernel rows: a head dim run on zero columns goes
// through Quantize and the tensor form instead), longer heads, or a module
// without the kernels.
func (d *device) quantPackFor(p *backend.Problem) (long, ok bool) {
	if hopperDim(p.D) != p.D {
		return false, false
	}
	if g := d.quantPack; g.Cluster > 0 && p.B*(p.Hq+2*p.Hkv) <= 65535 && int64(g.chunkRows(max(p.Sq, p.Sk)))*int64(p.D) <= int64(g.Codes) {
		return false, true
	}
	return true, d.quantLong.takes(p)
}

// fusable reports whether quant_pack9 or its long form takes p's heads
// (quantPackFor).
func (d *device) fusable(p *backend.Problem) bool {
	_, ok := d.quantPackFor(p)
	return ok
}

// fusedParams are the parameters of a fused resident's kernels: quant_pack9
// and the fused attention entries (float32 Q, K and V; the score-factor
// check).
func (r *resident) fusedParams() *fusedQuantParams {
	sp := r.scores
	return &fusedQuantParams{P: *r.params, Bad: sp.Bad, Scale: sp.Scale, Limit: sp.Limit}
}

// launchQuantPack runs quant_pack9, or its long form where quantPackFor
// says so, with fp (a fused resident's fusedParams): float32 Q, K and V
// (its Q, K, V buffers) into the images and the scale buffers.
// quant_pack9 runs a cluster of Cluster blocks a head, each with its
// chunk's codes in dynamic shared memory; the long form a block for each
// block the device holds (at most one a chunk) with its scratch words. The
// caller is inside do, after pack allocated the images.
func (r *resident) launchQuantPack(k hopperKernels, fp *fusedQuantParams) error {
	s := r.shape
	long, ok := r.dev.quantPackFor(&s)
	if !ok {
		return fmt.Errorf("%w: cuda: no quantization into the images for D %d, Sq %d, Sk %d", backend.ErrUnsupported, s.D, s.Sq, s.Sk)
	}
	if !long {
		g := r.dev.quantPack
		return launchStruct(k.quantPack, g.Cluster, s.B*s.Hq+2*s.B*s.Hkv, 1, g.Threads, g.chunkRows(max(s.Sq, s.Sk))*s.D, r.dev.stream, unsafe.Pointer(fp))
	}
	g := r.dev.quantLong
	words, err := r.dev.zeroWords(int(g.words(&s)))
	if err != nil {
		return err
	}
	rows := g.chunkRows(&s)
	lp := quantLongParams{F: *fp, Words: words, ChunkRows: int32(rows)}
	return launchStruct(k.quantPackLong, int(min(g.chunks(&s, rows), int64(g.Blocks))), 1, 1, g.Threads, g.smem(s.D), r.dev.stream, unsafe.Pointer(&lp))
}
