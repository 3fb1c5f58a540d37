//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/checked"
)

// tensorShape is a [B][H][S][D] tensor's shape and memory order.
type tensorShape struct {
	B, H, S, D int
	Layout     backend.Layout
}

// elements returns the element count, or an error for a bad shape.
func (s tensorShape) elements() (int64, error) {
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
func (d *device) Quantize(codes, scales, src *buffer, s tensorShape) error {
	return d.QuantizeAll([]quantizeTensor{{codes, scales, src, s}})
}

// quantizeTensor is one tensor for QuantizeAll.
type quantizeTensor struct {
	Codes, Scales, Src *buffer
	Shape              tensorShape
}

// QuantizeAll is Quantize for several tensors, up to three of one head dim
// per launch of each phase (a call's Q, K and V in two launches).
func (d *device) QuantizeAll(ts []quantizeTensor) error {
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
func quantTensorOf(src, codes, scales *buffer, s tensorShape) quantTensor {
	bs, hs, rs := s.Layout.Strides(s.H, s.S, s.D)
	return quantTensor{Src: uint64(src.buf.p), Codes: uint64(codes.buf.p), Scales: uint64(scales.buf.p),
		BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs), B: int32(s.B), H: int32(s.H), S: int32(s.S), D: int32(s.D)}
}

// quantize launches the amax and encode kernels over qp's tensors (one
// launch each for all of them), heads split into chunks of about 16 KB of
// floats a block. qp is Go memory the driver copies at launch; quantize
// fills its scratch and chunk fields. The tensors share one head dim. The
// caller is inside do.
func (d *device) quantize(qp *quantParams) error { return d.quantizePhases(qp, true) }

// quantizePhases is quantize, the amax phase left out when amax is false
// (a test sets the head's amax word itself).
func (d *device) quantizePhases(qp *quantParams, amax bool) error {
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

// Quantize implements backend.Memory: device.QuantizeAll on device 0.
func (b *kernelBackend) Quantize(jobs ...backend.QuantizeJob) error {
	d, err := openDevice(0)
	if err != nil {
		return err
	}
	ts := make([]quantizeTensor, len(jobs))
	for i, j := range jobs {
		bufs, err := ours(j.Codes, j.Scales, j.Src)
		if err != nil {
			return err
		}
		ts[i] = quantizeTensor{bufs[0], bufs[1], bufs[2], tensorShape{j.B, j.H, j.S, j.D, j.Layout}}
	}
	return d.QuantizeAll(ts)
}

// transformOf describes a float32 tensor of shape (b, h, s, d) in layout l
// at x for the transform kernels.
func transformOf(x *buffer, b, h, s, d int, l backend.Layout) transformParams {
	bs, hs, rs := l.Strides(h, s, d)
	return transformParams{X: uint64(x.buf.p), BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs),
		B: int32(b), H: int32(h), S: int32(s), D: int32(d), Group: 1}
}

// Condition implements backend.Memory (kernels/quant.cuh: smooth_k,
// rotate): copies of q and k, transformed on the device bit for bit as
// sdpa's host code does.
func (b *kernelBackend) Condition(p *backend.Problem, tq, tk, q, k, means, signs backend.Buffer, smooth bool, block int) error {
	bufs, err := ours(tq, tk, q, k, means, signs)
	if err != nil {
		return err
	}
	d, err := openDevice(0)
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
			buf       *buffer
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
func (b *kernelBackend) CorrectLSE(p *backend.Problem, lse, q, means backend.Buffer) error {
	bufs, err := ours(lse, q, means)
	if err != nil {
		return err
	}
	d, err := openDevice(0)
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
