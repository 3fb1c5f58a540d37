//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/poison"
)

// resident is one problem's tensors on the device: upload once, run many
// times, download when asked.
type resident struct {
	dev   *device
	shape backend.Problem // shape, scale, mask; no host data
	// params has an allocation of its own: it holds no Go pointers, so cgo
	// lets the launcher pass its address to the driver.
	params *params
	bufs   []pooled
	outN   int64
	lse    bool
	// bad is the device flag of a resident made by NewResident: the score
	// factor kernel's report of a factor beyond backend.MaxScoreFactor (0
	// for Upload's residents, whose factors the host checked).
	bad uint64
	// scores is the score-factor launch of a resident made by NewResident
	// (nil for Upload's): its inputs may change between runs, so every
	// launch recomputes the factors and repacks.
	scores *scoreParams
	// fused marks a resident made by AttentionQuantizing: its Q, K and V
	// buffers hold float32 inputs, which each stage-9 launch quantizes
	// straight into the images (quant_pack9, which also writes the scale
	// buffers) instead of packing codes; the fused attention entry computes
	// the score factors from those scales.
	fused bool
	// tensors is the tensor-form launch of a resident over device inputs
	// (launchTensors), made on its first Hopper launch; tensorsRefused
	// marks one whose layout the tensor maps cannot describe.
	tensors        *tensorLaunch
	tensorsRefused bool
	// fusedSplit is a fused resident's key-split launch (launchFusedSplit):
	// the fused parameters and the parts, no tensor maps.
	fusedSplit *tensorLaunch
	// vImageWritten marks a resident whose next launch, which must be a
	// tiled tensor-form one, finds the V image already written (by the
	// paged prefill's inputs kernel): it packs no V and takes no head
	// start (which reads V's first tiles from the V tensor). The next
	// launch clears it.
	vImageWritten bool
	// pagedNext, where not nil, makes the next launch, which must be a
	// tiled tensor-form one at pagedTilesHeadDim, the paged form reading K
	// and V from the cache's pages it names (the paged prefill); the next
	// launch clears it.
	pagedNext *pagedTiles
	// images holds, per stage, the device layouts its pack kernels wrote
	// (Q, K, V images; 0 where a stage has none), made on the stage's
	// first launch and kept until Free.
	images map[int][3]uint64
	// parts is the key split's workspace (TensorParams' part_o, then
	// part_w), of partsBytes bytes, made on the first split launch and
	// kept until Free (split.go).
	parts      uint64
	partsBytes int64
}

// Upload copies p's FP8 inputs and scales to the device, on the device's
// stream, and reserves its output (and LSE, if p.LSE is not nil). p must be
// a validated FP8E4M3 problem; with QuantizeOnRead, its float32 inputs are
// encoded on the host with its scales on the way (fp8.EncodeE4M3, NoSat:
// the codes fp8.QuantizeE4M3 gives). The inputs go to one device block in
// one copy, staged through page-locked memory when small (the codes are
// encoded straight into it). The host slices may be reused once Upload
// returns.
func (d *device) Upload(p *backend.Problem) (*resident, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: cuda: uploading a nil problem", backend.ErrInvalid)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := supportsInputs(p); err != nil {
		return nil, err
	}
	r := &resident{dev: d, shape: *p, params: new(params), outN: int64(len(p.Out)), lse: p.LSE != nil}
	scores := scoreScales(p)
	r.shape.Q, r.shape.K, r.shape.V = nil, nil, nil
	r.shape.Q8, r.shape.K8, r.shape.V8, r.shape.Out, r.shape.LSE = nil, nil, nil, nil, nil
	in := uploadLayout(p, scores)
	err := d.do(func() error {
		var b deviceBuffers
		// put reserves n bytes of device memory (an output).
		put := func(n int64) (uint64, error) {
			ptr, size, err := d.alloc(n)
			if err != nil {
				return 0, err
			}
			r.bufs = append(r.bufs, pooled{ptr, size})
			return uint64(ptr), nil
		}
		base, err := put(int64(in.total))
		if err != nil {
			return err
		}
		for i, dst := range []*uint64{&b.Q, &b.K, &b.V, &b.QScale, &b.KScale, &b.VScale, &b.ScoreScale} {
			*dst = base + uint64(in.off[i])
		}
		if b.Out, err = put(4 * r.outN); err != nil {
			return err
		}
		if b.Sinks, err = d.residentSinks(p.Sinks, put); err != nil {
			return err
		}
		if r.lse {
			if b.LSE, err = put(4 * int64(len(p.LSE))); err != nil {
				return err
			}
		}
		*r.params = newParams(p, b)
		return d.uploadInputs(cu.DevicePtr(base), in)
	})
	if err != nil {
		r.Free()
		return nil, err
	}
	return r, nil
}

// Poison fills the device output (and LSE) with poison.Bits, on the
// stream, so that an element a kernel never writes is recognisable after
// Download. Tests use it; production calls do not.
func (r *resident) Poison() error { return r.dev.do(r.poisonLocked) }

// poisonLocked is Poison inside do.
func (r *resident) poisonLocked() error {
	if err := cu.MemsetD32Async(cu.DevicePtr(r.params.Out), poison.Bits, r.outN, r.dev.stream); err != nil {
		return err
	}
	return r.poisonLSELocked()
}

// poisonLSELocked is poisonLocked for the LSE alone (where it has one).
func (r *resident) poisonLSELocked() error {
	if !r.lse {
		return nil
	}
	return cu.MemsetD32Async(cu.DevicePtr(r.params.LSE), poison.Bits, int64(r.shape.B*r.shape.Hq*r.shape.Sq), r.dev.stream)
}

// Run launches stage's kernel on the device's stream (asynchronously).
func (r *resident) Run(stage int) error {
	return r.dev.do(func() error { return r.launch(stage) })
}

// Download copies the output (and LSE, when lse is not nil and the problem
// has one) to the host behind the launched work on the stream, waits for it,
// and reports a kernel's failure.
func (r *resident) Download(out, lse []float32) error {
	if int64(len(out)) != r.outN {
		return fmt.Errorf("%w: download into %d elements, output has %d", backend.ErrInvalid, len(out), r.outN)
	}
	nlse := r.shape.B * r.shape.Hq * r.shape.Sq
	if lse != nil && r.lse && len(lse) != nlse {
		return fmt.Errorf("%w: download LSE into %d elements, LSE has %d", backend.ErrInvalid, len(lse), nlse)
	}
	return r.dev.do(func() error {
		if len(r.bufs) == 0 {
			return errors.New("cuda: resident used after Free")
		}
		copies := []hostCopy{{dev: cu.DevicePtr(r.params.Out), host: bytesOf(out)}}
		if lse != nil && r.lse {
			copies = append(copies, hostCopy{dev: cu.DevicePtr(r.params.LSE), host: bytesOf(lse)})
		}
		var bad [1]int32
		if r.bad != 0 {
			copies = append(copies, hostCopy{dev: cu.DevicePtr(r.bad), host: bytesOf(bad[:])})
		}
		if err := r.dev.download(copies); err != nil {
			return err
		}
		return factorError(bad[0], r.shape.Hq)
	})
}

// Free hands the resident's buffers back: they return to the device's pool
// once the work issued on them so far has completed on the stream. A
// resident must not be used after Free; a second Free does nothing.
func (r *resident) Free() error { return r.dev.do(r.release) }

// release is Free inside do.
func (r *resident) release() error {
	if len(r.bufs) == 0 {
		return nil
	}
	bufs := r.bufs
	r.bufs = nil
	return r.dev.release(bufs)
}

// problemShape checks p's shape, scale, mask and layout (a problem whose
// data sits in device buffers: Validate's checks but the slices') and
// returns the element counts of Q and of K (or V).
func problemShape(p *backend.Problem) (nq, nkv int64, err error) {
	if p == nil {
		return 0, 0, fmt.Errorf("%w: cuda: nil problem", backend.ErrInvalid)
	}
	s := p.Shape
	if nq, err = (tensorShape{s.B, s.Hq, s.Sq, s.D, p.Layout}).elements(); err != nil {
		return 0, 0, err
	}
	if nkv, err = (tensorShape{s.B, s.Hkv, s.Sk, s.D, p.Layout}).elements(); err != nil {
		return 0, 0, err
	}
	if s.Hq%s.Hkv != 0 || math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) || p.Mask < backend.NoMask || p.Mask > backend.CausalLowerRight {
		return 0, 0, fmt.Errorf("%w: cuda: problem %+v, scale %v, mask %d", backend.ErrInvalid, s, p.Scale, int(p.Mask))
	}
	return nq, nkv, nil
}

// NewResident makes a resident over FP8 inputs already in device memory:
// E4M3 codes q, k, v and their per-(batch, head) dequantization scales qs,
// ks, vs, as Quantize leaves them, for a problem of p's shape, scale, mask
// and layout (p's data fields are ignored; p.LSE != nil asks for an LSE
// output). The input buffers stay the caller's and must outlive the
// resident; its outputs are its own. The caller may rewrite the inputs
// between runs (quantize the next step's tensors into them): every Run
// computes the score factors from the scales then in the buffers, and the
// stages that read a packed layout (9, 10) pack it again. A factor beyond
// backend.MaxScoreFactor (the host's Validate error) is reported by
// Download.
func (d *device) NewResident(p *backend.Problem, q, k, v, qs, ks, vs *buffer) (*resident, error) {
	return d.newResident(p, [6]*buffer{q, k, v, qs, ks, vs}, nil, nil)
}

// newResident is NewResident writing its output (and LSE) into out and lse
// when they are not nil; with out, the score-factor flag is out's (Read
// reports it) instead of the resident's.
func (d *device) newResident(p *backend.Problem, in [6]*buffer, out, lse *buffer) (*resident, error) {
	r, err := d.residentFor(p, in, out, lse)
	if err != nil {
		return nil, err
	}
	if err := d.do(func() error { return r.setUp(in, out, lse) }); err != nil {
		return nil, errors.Join(err, r.Free())
	}
	return r, nil
}

// residentFor checks newResident's arguments and returns the resident it
// sets up (setUp), which holds nothing yet.
func (d *device) residentFor(p *backend.Problem, in [6]*buffer, out, lse *buffer) (*resident, error) {
	nq, nkv, err := problemShape(p)
	if err != nil {
		return nil, err
	}
	s := p.Shape
	q, k, v, qs, ks, vs := in[0], in[1], in[2], in[3], in[4], in[5]
	checks := []error{q.fits(d, nq, "q"), k.fits(d, nkv, "k"), v.fits(d, nkv, "v"), qs.fits(d, 4*int64(s.B*s.Hq), "q scales"),
		ks.fits(d, 4*int64(s.B*s.Hkv), "k scales"), vs.fits(d, 4*int64(s.B*s.Hkv), "v scales")}
	if out != nil {
		checks = append(checks, out.fits(d, 4*nq, "out"))
	}
	if lse != nil {
		checks = append(checks, lse.fits(d, 4*int64(s.B*s.Hq*s.Sq), "lse"))
	}
	if err := errors.Join(checks...); err != nil {
		return nil, err
	}
	pp := *p
	pp.Precision = backend.FP8E4M3
	pp.Q, pp.K, pp.V, pp.Q8, pp.K8, pp.V8, pp.QScale, pp.KScale, pp.VScale, pp.Out, pp.LSE = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	if err := supportsInputs(&pp); err != nil {
		return nil, err
	}
	return &resident{dev: d, shape: pp, params: new(params), outN: nq, lse: p.LSE != nil || lse != nil}, nil
}

// setUp reserves a new resident's own buffers (score factors, the flag,
// and its outputs where out and lse are nil) and fills its params. The
// caller is inside do.
func (r *resident) setUp(in [6]*buffer, out, lse *buffer) error {
	d, s, p := r.dev, r.shape.Shape, &r.shape
	q, k, v, qs, ks, vs := in[0], in[1], in[2], in[3], in[4], in[5]
	nq := r.outN
	own := func(n int64) (uint64, error) {
		ptr, size, err := d.alloc(n)
		if err != nil {
			return 0, err
		}
		r.bufs = append(r.bufs, pooled{ptr, size})
		return uint64(ptr), nil
	}
	b := deviceBuffers{Q: uint64(q.buf.p), K: uint64(k.buf.p), V: uint64(v.buf.p),
		QScale: uint64(qs.buf.p), KScale: uint64(ks.buf.p), VScale: uint64(vs.buf.p)}
	var err error
	if b.ScoreScale, err = own(4 * int64(s.B*s.Hq)); err != nil {
		return err
	}
	if b.Sinks, err = d.residentSinks(p.Sinks, own); err != nil {
		return err
	}
	switch {
	case out != nil:
		if err := d.flagFor(out); err != nil {
			return err
		}
		r.bad = uint64(out.flag.p)
	default:
		if r.bad, err = own(4); err != nil {
			return err
		}
	}
	switch {
	case out != nil:
		b.Out = uint64(out.buf.p)
	default:
		if b.Out, err = own(4 * nq); err != nil {
			return err
		}
	}
	switch {
	case lse != nil:
		b.LSE = uint64(lse.buf.p)
	case r.lse:
		if b.LSE, err = own(4 * int64(s.B*s.Hq*s.Sq)); err != nil {
			return err
		}
	}
	*r.params = newParams(p, b)
	r.scores = &scoreParams{QScale: b.QScale, KScale: b.KScale, ScoreScale: b.ScoreScale, Bad: r.bad,
		Scale: float64(p.Scale), Limit: backend.MaxScoreFactor(s.D), B: int32(s.B), Hq: int32(s.Hq), Hkv: int32(s.Hkv)}
	if out != nil { // the flag is out's, cleared when set and read
		return nil
	}
	return cu.MemsetD32Async(cu.DevicePtr(r.bad), 0, 1, d.stream)
}

// flagFor gives out its flag word (buffer.flag), zeroed, if it has none.
// The caller is inside do.
func (d *device) flagFor(out *buffer) error {
	if out.flag.p != 0 {
		return nil
	}
	ptr, size, err := d.alloc(4)
	if err != nil {
		return err
	}
	out.flag = pooled{ptr, size}
	if c := d.capturing(); c != nil { // cleared once, when the capture ends (not at every replay)
		c.zero = append(c.zero, zeroRun{ptr, 1})
		return nil
	}
	return cu.MemsetD32Async(ptr, 0, 1, d.stream)
}

// launchScores computes the score factors of a resident over device
// inputs from the scales in its buffers now, flagging a factor beyond the
// limit. The caller is inside do.
func (r *resident) launchScores() error {
	sp := r.scores
	return launchStruct(r.dev.quant.scores, (int(sp.B*sp.Hq)+255)/256, 1, 1, 256, 0, r.dev.stream, unsafe.Pointer(sp))
}

// factorError turns a score-factor flag the device wrote (1 + the
// (batch, query head) index of a factor beyond backend.MaxScoreFactor, 0
// for none) into the error the host's Validate gives for host-quantized
// inputs. hq splits the index (0: unknown).
func factorError(flag int32, hq int) error {
	if flag == 0 {
		return nil
	}
	where := fmt.Sprintf("head index %d (batch·Hq + head)", flag-1)
	if hq > 0 {
		where = fmt.Sprintf("head (%d, %d)", int(flag-1)/hq, int(flag-1)%hq)
	}
	return fmt.Errorf("%w: %s: scale × Q descale × K descale (descales the call computed) can make scores overflow float32", backend.ErrInvalid, where)
}
