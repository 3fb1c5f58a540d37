//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// quantKernels are the device quantization kernels (kernels/quant.cuh).
type quantKernels struct {
	amax, encode [2]C.CUfunction // [0]: one element at a time; [1]: four (D % 4 == 0)
	iota, scores C.CUfunction
	// The accuracy options (SmoothK, Hadamard) and the LSE correction.
	smoothK, rotate, correctLSE C.CUfunction
	scratch                     pooled // words kept 0 between launches (zeroWords)
	scratchWords                int
}

// loadQuant finds the quantization kernels in the attention module and
// checks their parameter blocks' layouts.
func (d *Device) loadQuant() error {
	if err := d.checkLayouts(d.mod, quantLayouts); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		fn   *C.CUfunction
	}{
		{"fp8attn_quant_amax", &d.quant.amax[0]}, {"fp8attn_quant_encode", &d.quant.encode[0]},
		{"fp8attn_quant_amax4", &d.quant.amax[1]}, {"fp8attn_quant_encode4", &d.quant.encode[1]},
		{"fp8attn_quant_iota", &d.quant.iota}, {"fp8attn_score_factors", &d.quant.scores},
		{"fp8attn_smooth_k", &d.quant.smoothK}, {"fp8attn_rotate", &d.quant.rotate}, {"fp8attn_correct_lse", &d.quant.correctLSE},
	} {
		fn, err := d.mod.Function(f.name)
		if err != nil {
			return fmt.Errorf("cuda: kernel %s: %w", f.name, err)
		}
		*f.fn = cFunction(fn)
	}
	return nil
}

// Buffer is device memory of a Device, from its pool (never managed
// memory). Its contents are ordered with all other work of the device on
// its stream.
type Buffer struct {
	dev *Device
	buf pooled
	n   int64
	// flag is a device word (0 when unused) where an attention that wrote
	// into this buffer (Backend.AttentionOn) flags a score factor beyond
	// backend.MaxScoreFactor; Read reports and clears it.
	flag pooled
	// pins counts the live graphs that use the buffer (Free fails while
	// it is not 0). Guarded by the device's lock.
	pins int
}

// Alloc returns a buffer of n bytes (n > 0). Its contents are undefined
// until written.
func (d *Device) Alloc(n int64) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: cuda: allocating %d bytes", backend.ErrInvalid, n)
	}
	b := &Buffer{dev: d, n: n}
	err := d.do(func() error {
		p, size, err := d.alloc(n)
		b.buf = pooled{p, size}
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Len returns the buffer's size in bytes.
func (b *Buffer) Len() int64 { return b.n }

// capturing returns the capture the calling goroutine records on b's
// device, or nil.
func (b *Buffer) capturing() *captureState {
	if b == nil || b.dev == nil {
		return nil
	}
	return b.dev.capturing()
}

func (b *Buffer) live() error {
	if b == nil || b.dev == nil {
		return fmt.Errorf("%w: cuda: nil buffer", backend.ErrInvalid)
	}
	if b.buf.p == 0 {
		return fmt.Errorf("%w: cuda: buffer used after Free", backend.ErrInvalid)
	}
	return nil
}

// fits checks that b is a live buffer of device d holding at least want
// bytes (the name says which operand, in the error).
func (b *Buffer) fits(d *Device, want int64, name string) error {
	if err := b.live(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if b.dev != d || b.n < want {
		return fmt.Errorf("%w: cuda: %s holds %d bytes of device %d, %d needed on device %d", backend.ErrInvalid, name, b.n, b.dev.Ordinal, want, d.Ordinal)
	}
	return nil
}

// problemShape checks p's shape, scale, mask and layout (a problem whose
// data sits in device buffers: Validate's checks but the slices') and
// returns the element counts of Q and of K (or V).
func problemShape(p *backend.Problem) (nq, nkv int64, err error) {
	if p == nil {
		return 0, 0, fmt.Errorf("%w: cuda: nil problem", backend.ErrInvalid)
	}
	s := p.Shape
	if nq, err = (TensorShape{s.B, s.Hq, s.Sq, s.D, p.Layout}).elements(); err != nil {
		return 0, 0, err
	}
	if nkv, err = (TensorShape{s.B, s.Hkv, s.Sk, s.D, p.Layout}).elements(); err != nil {
		return 0, 0, err
	}
	if s.Hq%s.Hkv != 0 || math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) || p.Mask < backend.NoMask || p.Mask > backend.CausalLowerRight {
		return 0, 0, fmt.Errorf("%w: cuda: problem %+v, scale %v, mask %d", backend.ErrInvalid, s, p.Scale, int(p.Mask))
	}
	return nq, nkv, nil
}

// Write copies src to the start of the buffer, on the stream; src may be
// reused when Write returns.
func (b *Buffer) Write(src []byte) error {
	if err := b.live(); err != nil {
		return err
	}
	if int64(len(src)) > b.n {
		return fmt.Errorf("%w: cuda: writing %d bytes into a buffer of %d", backend.ErrInvalid, len(src), b.n)
	}
	return b.dev.do(func() error { return b.dev.upload([]hostCopy{{b.buf.p, src}}) })
}

// Read copies the start of the buffer into dst behind the work issued on
// the stream, and waits for it (a kernel's failure is reported here).
func (b *Buffer) Read(dst []byte) error {
	if err := b.live(); err != nil {
		return err
	}
	if int64(len(dst)) > b.n {
		return fmt.Errorf("%w: cuda: reading %d bytes from a buffer of %d", backend.ErrInvalid, len(dst), b.n)
	}
	return b.dev.do(func() error {
		copies := []hostCopy{{b.buf.p, dst}}
		var flag [1]int32
		if b.flag.p != 0 {
			copies = append(copies, hostCopy{b.flag.p, bytesOf(flag[:])})
		}
		if err := b.dev.download(copies); err != nil {
			return err
		}
		if flag[0] == 0 {
			return nil
		}
		if err := cu.MemsetD32Async(b.flag.p, 0, 1, b.dev.stream); err != nil {
			return err
		}
		return fmt.Errorf("an attention that wrote this buffer: %w", factorError(flag[0], 0))
	})
}

// Free returns the buffer to the device's pool once the work issued on it
// so far has completed. A second Free does nothing.
func (b *Buffer) Free() error {
	if b == nil || b.dev == nil || b.buf.p == 0 {
		return nil
	}
	return b.dev.do(func() error {
		if b.pins > 0 {
			return fmt.Errorf("%w: cuda: freeing a buffer that %d live graph(s) use: Close them first", backend.ErrInvalid, b.pins)
		}
		bufs := []pooled{b.buf}
		if b.flag.p != 0 {
			bufs = append(bufs, b.flag)
		}
		b.buf, b.flag = pooled{}, pooled{}
		return b.dev.release(bufs)
	})
}

// TensorShape is a [B][H][S][D] tensor's shape and memory order.
type TensorShape struct {
	B, H, S, D int
	Layout     backend.Layout
}

// elements returns the element count, or an error for a bad shape.
func (s TensorShape) elements() (int64, error) {
	n, ok := checked.Mul(s.B, s.H, s.S, s.D)
	if s.B <= 0 || s.H <= 0 || s.S <= 0 || s.D <= 0 || !ok || s.B*s.H > math.MaxInt32 || s.S*s.D > math.MaxInt32 {
		return 0, fmt.Errorf("%w: cuda: tensor shape %+v", backend.ErrInvalid, s)
	}
	if s.Layout != backend.BHSD && s.Layout != backend.BSHD {
		return 0, fmt.Errorf("%w: cuda: unknown layout %d", backend.ErrInvalid, int(s.Layout))
	}
	return int64(n), nil
}

// Quantize quantizes src, a float32 tensor of shape s, into E4M3 codes
// (one byte an element, same layout) and one dequantization scale per
// (batch, head) (float32, [B][H]), on the device's stream, bit for bit as
// fp8.QuantizeE4M3 does per head on the host (amax/448 scales; NaN and ±Inf
// become NaN codes): the codes and scales sdpa.Quantize gives.
func (d *Device) Quantize(codes, scales, src *Buffer, s TensorShape) error {
	return d.QuantizeAll([]QuantizeTensor{{codes, scales, src, s}})
}

// QuantizeTensor is one tensor for QuantizeAll.
type QuantizeTensor struct {
	Codes, Scales, Src *Buffer
	Shape              TensorShape
}

// QuantizeAll is Quantize for several tensors, up to three of one head dim
// per launch of each phase (a call's Q, K and V in two launches).
func (d *Device) QuantizeAll(ts []QuantizeTensor) error {
	for _, t := range ts {
		n, err := t.Shape.elements()
		if err != nil {
			return err
		}
		if err := errors.Join(t.Src.fits(d, 4*n, "source"), t.Codes.fits(d, n, "codes"), t.Scales.fits(d, 4*int64(t.Shape.B*t.Shape.H), "scales")); err != nil {
			return err
		}
	}
	return d.do(func() error {
		for len(ts) > 0 {
			qp := &quantParams{}
			for len(ts) > 0 && qp.N < 3 && (qp.N == 0 || ts[0].Shape.D == int(qp.T[0].D)) {
				qp.T[qp.N] = quantTensorOf(ts[0].Src, ts[0].Codes, ts[0].Scales, ts[0].Shape)
				qp.N++
				ts = ts[1:]
			}
			if err := d.quantize(qp); err != nil {
				return err
			}
		}
		return nil
	})
}

// quantTensorOf fills the kernels' description of one tensor to quantize.
func quantTensorOf(src, codes, scales *Buffer, s TensorShape) quantTensor {
	bs, hs, rs := s.Layout.Strides(s.H, s.S, s.D)
	return quantTensor{Src: uint64(src.buf.p), Codes: uint64(codes.buf.p), Scales: uint64(scales.buf.p),
		BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs), B: int32(s.B), H: int32(s.H), S: int32(s.S), D: int32(s.D)}
}

// quantize launches the amax and encode kernels over qp's tensors (one
// launch each for all of them), heads split into chunks of about 16 KB of
// floats a block. qp is Go memory the driver copies at launch; quantize
// fills its scratch and chunk fields. The tensors share one head dim. The
// caller is inside do.
func (d *Device) quantize(qp *quantParams) error { return d.quantizePhases(qp, true) }

// quantizePhases is quantize, the amax phase left out when amax is false
// (a test sets the head's amax word itself).
func (d *Device) quantizePhases(qp *quantParams, amax bool) error {
	heads, chunks := 0, 0
	dim := int(qp.T[0].D)
	qp.Rows = int32(max(1, 4096/dim))
	for _, t := range qp.T[:qp.N] {
		heads += int(t.B) * int(t.H)
		chunks = max(chunks, (int(t.S)+int(qp.Rows)-1)/int(qp.Rows))
	}
	if heads > 65535 {
		return fmt.Errorf("%w: cuda: quantizing %d heads at once (at most 65535)", backend.ErrUnsupported, heads)
	}
	words, err := d.zeroWords(2 * heads) // amax, then done, per head
	if err != nil {
		return err
	}
	qp.Amax, qp.Done = words, words+4*uint64(heads)
	v := 0
	if dim%4 == 0 {
		v = 1
	}
	if amax {
		if err := launchStruct(d.quant.amax[v], chunks, heads, 1, 256, 0, d.stream, unsafe.Pointer(qp)); err != nil {
			return err
		}
	}
	return launchStruct(d.quant.encode[v], chunks, heads, 1, 256, 0, d.stream, unsafe.Pointer(qp))
}

// zeroWords returns n 32-bit device words that are 0 when the next launch
// starts and that the kernels given them leave 0 (the quantization kernels'
// amax and done words, the paged kernel's split counters): the device's
// scratch, grown as needed, or inside a capture words of the graph's own,
// zeroed once when the capture ends (a memset node would run at every
// replay, and the kernels leave them 0). The caller is inside do.
func (d *Device) zeroWords(n int) (uint64, error) {
	if c := d.capturing(); c != nil {
		p, err := d.own(c, 4*int64(n))
		if err != nil {
			return 0, err
		}
		c.zero = append(c.zero, zeroRun{cu.DevicePtr(p), int64(n)})
		return p, nil
	}
	if n > d.quant.scratchWords {
		if d.quant.scratch.p != 0 {
			if err := d.release([]pooled{d.quant.scratch}); err != nil {
				return 0, err
			}
			d.quant.scratch, d.quant.scratchWords = pooled{}, 0
		}
		p, size, err := d.alloc(4 * int64(n))
		if err != nil {
			return 0, err
		}
		d.quant.scratch, d.quant.scratchWords = pooled{p, size}, int(size/4)
		if err := cu.MemsetD32Async(p, 0, size/4, d.stream); err != nil {
			return 0, err
		}
	}
	return uint64(d.quant.scratch.p), nil
}

// NewResident makes a Resident over FP8 inputs already in device memory:
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
func (d *Device) NewResident(p *backend.Problem, q, k, v, qs, ks, vs *Buffer) (*Resident, error) {
	return d.newResident(p, [6]*Buffer{q, k, v, qs, ks, vs}, nil, nil)
}

// newResident is NewResident writing its output (and LSE) into out and lse
// when they are not nil; with out, the score-factor flag is out's (Read
// reports it) instead of the resident's.
func (d *Device) newResident(p *backend.Problem, in [6]*Buffer, out, lse *Buffer) (*Resident, error) {
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
	r := &Resident{dev: d, shape: pp, params: new(params), outN: nq, lse: p.LSE != nil || lse != nil}
	err = d.do(func() error {
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
		switch {
		case out != nil:
			if out.flag.p == 0 {
				ptr, size, err := d.alloc(4)
				if err != nil {
					return err
				}
				out.flag = pooled{ptr, size}
				if c := d.capturing(); c != nil { // cleared once, when the capture ends (not at every replay)
					c.zero = append(c.zero, zeroRun{ptr, 1})
				} else if err := cu.MemsetD32Async(ptr, 0, 1, d.stream); err != nil {
					return err
				}
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
		*r.params = newParams(&pp, b)
		r.scores = &scoreParams{QScale: b.QScale, KScale: b.KScale, ScoreScale: b.ScoreScale, Bad: r.bad,
			Scale: float64(p.Scale), Limit: backend.MaxScoreFactor(s.D), B: int32(s.B), Hq: int32(s.Hq), Hkv: int32(s.Hkv)}
		if out != nil { // the flag is out's, cleared when set and read
			return nil
		}
		return cu.MemsetD32Async(cu.DevicePtr(r.bad), 0, 1, d.stream)
	})
	if err != nil {
		return nil, errors.Join(err, r.Free())
	}
	return r, nil
}

// launchScores computes the score factors of a resident over device
// inputs from the scales in its buffers now, flagging a factor beyond the
// limit. The caller is inside do.
func (r *Resident) launchScores() error {
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
	return fmt.Errorf("%w: %s: scale × Q descale × K descale (quantized on the device) can make scores overflow float32", backend.ErrInvalid, where)
}

// Zero sets the buffer's bytes to 0, on the stream.
func (b *Buffer) Zero() error {
	if err := b.live(); err != nil {
		return err
	}
	return b.dev.do(func() error {
		if c := b.capturing(); c != nil {
			c.pin(b)
		}
		if b.n%4 == 0 {
			return cu.MemsetD32Async(b.buf.p, 0, b.n/4, b.dev.stream)
		}
		return cu.MemsetD8Async(b.buf.p, 0, b.n, b.dev.stream)
	})
}

// Alloc implements backend.Memory on device 0.
func (b *Backend) Alloc(n int64) (backend.Buffer, error) {
	d, err := OpenDevice(0)
	if err != nil {
		return nil, err
	}
	buf, err := d.Alloc(n)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// ours returns the cuda buffers behind backend buffers (nil stays nil),
// pinned to the graph when the caller is capturing one.
func ours(bufs ...backend.Buffer) ([]*Buffer, error) {
	out := make([]*Buffer, len(bufs))
	for i, b := range bufs {
		if b == nil {
			continue
		}
		cb, ok := b.(*Buffer)
		if !ok {
			return nil, fmt.Errorf("%w: cuda: a buffer of another backend (%T)", backend.ErrInvalid, b)
		}
		out[i] = cb
		if c := cb.capturing(); c != nil {
			c.pin(cb)
		}
	}
	return out, nil
}

// Quantize implements backend.Memory: Device.QuantizeAll on device 0.
func (b *Backend) Quantize(jobs ...backend.QuantizeJob) error {
	d, err := OpenDevice(0)
	if err != nil {
		return err
	}
	ts := make([]QuantizeTensor, len(jobs))
	for i, j := range jobs {
		bufs, err := ours(j.Codes, j.Scales, j.Src)
		if err != nil {
			return err
		}
		ts[i] = QuantizeTensor{bufs[0], bufs[1], bufs[2], TensorShape{j.B, j.H, j.S, j.D, j.Layout}}
	}
	return d.QuantizeAll(ts)
}

// quantPackGeometry is quant_pack9's geometry as the Hopper module exports
// it (fp8attn_quantpack9_config: QUANT_PACK_THREADS, QUANT_PACK_CLUSTER,
// QUANT_PACK_CODES in kernels/hopper.cuh): threads a block, blocks a head
// (a thread-block cluster), and the most codes a block encodes.
type quantPackGeometry struct {
	Threads, Cluster, Codes int
}

// chunkRows is the rows of a head a block of quant_pack9 takes: a
// Cluster-th of the head's, rounded up to 16 (a V key group).
func (g quantPackGeometry) chunkRows(rows int) int {
	return ((rows+g.Cluster-1)/g.Cluster + 15) / 16 * 16
}

// fusable reports whether quant_pack9 takes p's heads: a block's rows (the
// longest head's chunk) times D fit its codes, and D is a multiple of 16
// (whole 16-byte image chunks; the float4 loads need a multiple of 4).
func (d *Device) fusable(p *backend.Problem) bool {
	g := d.quantPack
	return g.Cluster > 0 && int64(g.chunkRows(max(p.Sq, p.Sk)))*int64(p.D) <= int64(g.Codes) && p.D%16 == 0
}

// fusedParams are the parameters of a fused resident's kernels: quant_pack9
// and the fused attention entries (float32 Q, K and V; the score-factor
// check).
func (r *Resident) fusedParams() *fusedQuantParams {
	sp := r.scores
	return &fusedQuantParams{P: *r.params, Bad: sp.Bad, Scale: sp.Scale, Limit: sp.Limit}
}

// launchQuantPack runs quant_pack9 with fp (a fused resident's
// fusedParams): float32 Q, K and V (its Q, K, V buffers) into the images
// and the scale buffers, a cluster of Cluster blocks a head, each with its
// chunk's codes in dynamic shared memory. The caller is inside do, after
// pack allocated the images.
func (r *Resident) launchQuantPack(fn C.CUfunction, fp *fusedQuantParams) error {
	d, s := r.dev, r.shape
	g := d.quantPack
	smem := g.chunkRows(max(s.Sq, s.Sk)) * s.D
	return launchStruct(fn, g.Cluster, s.B*s.Hq+2*s.B*s.Hkv, 1, g.Threads, smem, d.stream, unsafe.Pointer(fp))
}

// encodeCheck runs the Hopper module's fp8attn_encode_check (a test
// kernel: TestFastEncodeAllFloats) over the n float32 amax values in amax,
// its mismatch counts and examples into result (2n words, zeroed by the
// caller), on the stream.
func (d *Device) encodeCheck(amax, result *Buffer, n int) error {
	if d.hopperErr != nil {
		return d.hopperErr
	}
	fn, err := d.hmod.Function("fp8attn_encode_check")
	if err != nil {
		return fmt.Errorf("cuda: kernel fp8attn_encode_check: %w", err)
	}
	p := &encodeCheckParams{Amax: uint64(amax.buf.p), Result: uint64(result.buf.p), N: int32(n)}
	return d.do(func() error { return launchStruct(cFunction(fn), 8*d.SMs, 1, 1, 256, 0, d.stream, unsafe.Pointer(p)) })
}

// AttentionQuantizing implements backend.QuantizingMemory: where the stage
// is 9 and the heads fit quant_pack9, one launch quantizes the float32
// inputs straight into stage 9's images and a second runs the attention
// (its score factors from the scales the first wrote); where the call is
// one that the one-tile form takes whole in a cluster a head
// (tiles.HopperConfig.OneTileQuantizing: D 64, 129-256 keys, at most 256
// query rows), that form quantizes its own inputs in one launch. Either
// way the output and LSE are bit for bit Quantize followed by AttentionOn
// (its codes and scales never written); elsewhere ErrUnsupported, and the
// caller makes those two calls.
func (b *Backend) AttentionQuantizing(p *backend.Problem, out, lse, q, k, v backend.Buffer) (err error) {
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
	var scales [3]*Buffer
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
	r, err := d.newResident(&pp, [6]*Buffer{bufs[0], bufs[1], bufs[2], scales[0], scales[1], scales[2]}, bufs[3], bufs[4])
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	r.fused = true
	return r.Run(st)
}

// AttentionOn implements backend.Memory: a resident over the buffers
// (NewResident) run with the backend's stage (BestStage for "cuda"), its
// output and LSE written into out and lse. It returns without waiting for
// the device: a score factor beyond the limit is reported by out's Read.
func (b *Backend) AttentionOn(p *backend.Problem, out, lse backend.Buffer, in [6]backend.Buffer) (err error) {
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
	r, err := d.newResident(&pp, [6]*Buffer(bufs[:6]), bufs[6], bufs[7])
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	return r.Run(st)
}

// transformOf describes a float32 tensor of shape (b, h, s, d) in layout l
// at x for the transform kernels.
func transformOf(x *Buffer, b, h, s, d int, l backend.Layout) transformParams {
	bs, hs, rs := l.Strides(h, s, d)
	return transformParams{X: uint64(x.buf.p), BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs),
		B: int32(b), H: int32(h), S: int32(s), D: int32(d), Group: 1}
}

// Condition implements backend.Memory (kernels/quant.cuh: smooth_k,
// rotate): copies of q and k, transformed on the device bit for bit as
// sdpa's host code does.
func (b *Backend) Condition(p *backend.Problem, tq, tk, q, k, means, signs backend.Buffer, smooth bool, block int) error {
	bufs, err := ours(tq, tk, q, k, means, signs)
	if err != nil {
		return err
	}
	d, err := OpenDevice(0)
	if err != nil {
		return err
	}
	nq, nk, err := problemShape(p)
	if err != nil {
		return err
	}
	s := p.Shape
	nq, nk = 4*nq, 4*nk
	for i, want := range []int64{nq, nk, nq, nk, 8 * int64(s.B*s.Hkv*s.D), 4 * int64(s.B*s.Hkv*s.D)} {
		if bufs[i] == nil && (i == 4 && !smooth || i == 5 && signs == nil) {
			continue
		}
		if err := bufs[i].fits(d, want, fmt.Sprintf("Condition operand %d", i)); err != nil {
			return err
		}
	}
	if s.D > 1024 || signs != nil && (block <= 0 || block&(block-1) != 0 || s.D%block != 0) {
		return fmt.Errorf("%w: cuda: Condition of D=%d with Hadamard blocks of %d", backend.ErrUnsupported, s.D, block)
	}
	return d.do(func() error {
		if err := errors.Join(cu.MemcpyDtoDAsync(bufs[0].buf.p, bufs[2].buf.p, nq, d.stream),
			cu.MemcpyDtoDAsync(bufs[1].buf.p, bufs[3].buf.p, nk, d.stream)); err != nil {
			return err
		}
		if smooth {
			tp := transformOf(bufs[1], s.B, s.Hkv, s.Sk, s.D, p.Layout)
			tp.Means = uint64(bufs[4].buf.p)
			if err := launchStruct(d.quant.smoothK, s.B*s.Hkv, 1, 1, s.D, 0, d.stream, unsafe.Pointer(&tp)); err != nil {
				return err
			}
		}
		if signs == nil {
			return nil
		}
		norm := float32(1 / math.Sqrt(float64(block)))
		for _, x := range []struct {
			buf       *Buffer
			h, n, grp int
		}{{bufs[0], s.Hq, s.Sq, s.Group()}, {bufs[1], s.Hkv, s.Sk, 1}} {
			tp := transformOf(x.buf, s.B, x.h, x.n, s.D, p.Layout)
			tp.Signs, tp.Group, tp.N, tp.Norm = uint64(bufs[5].buf.p), int32(x.grp), int32(block), norm
			rows := s.B * x.h * x.n
			if err := launchStruct(d.quant.rotate, (rows+7)/8, 1, 1, 256, 8*4*s.D, d.stream, unsafe.Pointer(&tp)); err != nil {
				return err
			}
		}
		return nil
	})
}

// CorrectLSE implements backend.Memory (kernels/quant.cuh: correct_lse).
func (b *Backend) CorrectLSE(p *backend.Problem, lse, q, means backend.Buffer) error {
	bufs, err := ours(lse, q, means)
	if err != nil {
		return err
	}
	d, err := OpenDevice(0)
	if err != nil {
		return err
	}
	if _, _, err := problemShape(p); err != nil {
		return err
	}
	s := p.Shape
	for i, want := range []int64{4 * int64(s.B*s.Hq*s.Sq), 4 * int64(s.B*s.Hq*s.Sq*s.D), 8 * int64(s.B*s.Hkv*s.D)} {
		if err := bufs[i].fits(d, want, fmt.Sprintf("CorrectLSE operand %d", i)); err != nil {
			return err
		}
	}
	tp := transformOf(bufs[1], s.B, s.Hq, s.Sq, s.D, p.Layout)
	tp.X, tp.Q, tp.LSE, tp.Means, tp.Group, tp.Scale = 0, uint64(bufs[1].buf.p), uint64(bufs[0].buf.p), uint64(bufs[2].buf.p), int32(s.Group()), p.Scale
	rows := s.B * s.Hq * s.Sq
	return d.do(func() error {
		return launchStruct(d.quant.correctLSE, (rows+255)/256, 1, 1, 256, 0, d.stream, unsafe.Pointer(&tp))
	})
}

// Held implements backend.Memory: device 0's MemoryHeld (0 before it opens).
func (b *Backend) Held() int64 {
	devicesMu.Lock()
	d := devices[0]
	devicesMu.Unlock()
	if d == nil {
		return 0
	}
	return d.MemoryHeld()
}

// SetLimit implements backend.Memory: device 0's SetMemoryLimit.
func (b *Backend) SetLimit(n int64) error {
	d, err := OpenDevice(0)
	if err != nil {
		return err
	}
	return d.SetMemoryLimit(n)
}

var (
	_ backend.Memory = (*Backend)(nil)
	_ backend.Buffer = (*Buffer)(nil)
)
