package sdpa

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
)

// memTensor is a device tensor in the memory of a backend that has its own
// (backend.Memory: the GPU for "cuda"): float32 data, or E4M3 codes with
// one float32 scale per (batch, head).
type memTensor struct {
	data, scales backend.Buffer // scales: nil for float32
	b, h, s, d   int
	layout       Layout
}

func (m *memTensor) fp8() bool { return m.scales != nil }

func (m *memTensor) n() int { return m.b * m.h * m.s * m.d }

func (m *memTensor) free() error {
	err := m.data.Free()
	if m.scales != nil {
		err = errors.Join(err, m.scales.Free())
	}
	return err
}

// wrapMem returns a DeviceTensor holding m, whose device memory is freed
// when the tensor becomes unreachable if Free was not called (a safety net,
// as os.File has: device memory is scarcer than the Go heap, so Free is
// still the rule).
func (d *Device) wrapMem(m *memTensor) *DeviceTensor {
	t := &DeviceTensor{dev: d, m: m}
	t.cleanup = runtime.AddCleanup(t, func(m *memTensor) { m.free() }, m)
	return t
}

// bytesOf views plain numbers as their bytes (no copy).
func bytesOf[T ~uint8 | ~float32](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0])))
}

// newMem allocates a memTensor of the given shape on d's backend memory.
func (d *Device) newMem(b, h, s, dim int, l Layout, quantized bool) (*memTensor, error) {
	m := &memTensor{b: b, h: h, s: s, d: dim, layout: l}
	n := int64(b) * int64(h) * int64(s) * int64(dim)
	size := 4 * n
	if quantized {
		size = n
	}
	var err error
	if m.data, err = d.mem.Alloc(size); err != nil {
		return nil, err
	}
	if quantized {
		if m.scales, err = d.mem.Alloc(4 * int64(b*h)); err != nil {
			return nil, errors.Join(err, m.data.Free())
		}
	}
	return m, nil
}

// memUpload puts a float32 tensor (or, with codes, an FP8 one) in device
// memory.
func (d *Device) memUpload(t *Tensor, q *QuantizedTensor) (*DeviceTensor, error) {
	var m *memTensor
	var err error
	if q != nil {
		if m, err = d.newMem(q.B, q.H, q.S, q.D, q.Layout, true); err != nil {
			return nil, err
		}
		err = errors.Join(m.data.Write(bytesOf(q.Data)), m.scales.Write(bytesOf(q.Scales)))
	} else {
		if m, err = d.newMem(t.B, t.H, t.S, t.D, t.Layout, false); err != nil {
			return nil, err
		}
		err = m.data.Write(bytesOf(t.Data))
	}
	if err != nil {
		return nil, errors.Join(err, m.free())
	}
	return d.wrapMem(m), nil
}

// hostCopy returns t's values as a host tensor: its float32 data, or its
// codes dequantized. It allocates.
func (m *memTensor) hostCopy() (*Tensor, error) {
	out := &Tensor{Data: make([]float32, m.n()), B: m.b, H: m.h, S: m.s, D: m.d, Layout: m.layout}
	if !m.fp8() {
		return out, m.data.Read(bytesOf(out.Data))
	}
	q := &QuantizedTensor{Data: make([]fp8.E4M3, m.n()), Scales: make([]float32, m.b*m.h), B: m.b, H: m.h, S: m.s, D: m.d, Layout: m.layout}
	if err := errors.Join(m.data.Read(bytesOf(q.Data)), m.scales.Read(bytesOf(q.Scales))); err != nil {
		return nil, err
	}
	return out, q.dequantizeInto(out)
}

// memQuantize quantizes float32 memTensors into new FP8 ones, on the
// device, in one call (a call's Q, K and V: one pass each over all three).
func (d *Device) memQuantize(ms ...*memTensor) ([]*memTensor, error) {
	qs := make([]*memTensor, 0, len(ms))
	jobs := make([]backend.QuantizeJob, len(ms))
	free := func(err error) ([]*memTensor, error) {
		for _, q := range qs {
			err = errors.Join(err, q.free())
		}
		return nil, err
	}
	for i, m := range ms {
		q, err := d.newMem(m.b, m.h, m.s, m.d, m.layout, true)
		if err != nil {
			return free(err)
		}
		qs = append(qs, q)
		jobs[i] = backend.QuantizeJob{Codes: q.data, Scales: q.scales, Src: m.data, B: m.b, H: m.h, S: m.s, D: m.d, Layout: m.layout}
	}
	if err := d.mem.Quantize(jobs...); err != nil {
		return free(err)
	}
	return qs, nil
}

// memAttention is Attention on tensors in device memory: FP8 inputs as
// they are, float32 inputs quantized on the device first (opts.Precision
// FP8E4M3; FP32 is ErrUnsupported: the device's kernels take FP8), after
// the accuracy options (SmoothK, Hadamard) where asked, applied on the
// device bit for bit as on the host, and the LSE corrected there.
func (d *Device) memAttention(out, lse, q, k, v *memTensor, opts *Options) (err error) {
	o, err := d.options(opts)
	if err != nil {
		return err
	}
	var p backend.Problem
	if err := problem(&p, shapeOf(q.b, q.h, q.s, q.d), shapeOf(k.b, k.h, k.s, k.d), shapeOf(v.b, v.h, v.s, v.d), &o); err != nil {
		return err
	}
	if p.Variants.Any() { // before anything is allocated: the backend may have no kernel for them
		if err := d.be.Supports(&p); errors.Is(err, ErrUnsupported) {
			return err
		}
	}
	if k.layout != q.layout || v.layout != q.layout || out.layout != q.layout {
		return fmt.Errorf("%w: q, k, v and out are in layouts %v, %v, %v, %v; they must share one", ErrInvalid, q.layout, k.layout, v.layout, out.layout)
	}
	if out.fp8() || out.b != p.B || out.h != p.Hq || out.s != p.Sq || out.d != p.D {
		return fmt.Errorf("%w: out must be a float32 [%d][%d][%d][%d] tensor", ErrInvalid, p.B, p.Hq, p.Sq, p.D)
	}
	p.Layout = q.layout
	var lseBuf backend.Buffer
	if lse != nil {
		if lse.fp8() || lse.b != p.B || lse.h != p.Hq || lse.s != p.Sq || lse.d != 1 {
			return fmt.Errorf("%w: lse must be a float32 [%d][%d][%d][1] tensor", ErrInvalid, p.B, p.Hq, p.Sq)
		}
		lseBuf = lse.data
	}
	in := [3]*memTensor{q, k, v}
	var means backend.Buffer
	fused := false // quantized and attended in one backend call
	switch {
	case q.fp8() && k.fp8() && v.fp8():
		if o.transformsInputs() {
			return fmt.Errorf("%w: SmoothK, Hadamard and OutlierChannels transform float32 inputs before quantization; these are quantized", ErrInvalid)
		}
	case !q.fp8() && !k.fp8() && !v.fp8():
		if p.Precision != FP8E4M3 {
			return fmt.Errorf("%w: %s's kernels take FP8 inputs: ask for Precision FP8E4M3 (quantized on the device) or Quantize first", ErrUnsupported, d.name)
		}
		if o.OutlierChannels != 0 {
			return fmt.Errorf("%w: OutlierChannels on %s's device tensors (host tensors and the cpu device have it)", ErrUnsupported, d.name)
		}
		if o.SmoothK || o.Hadamard {
			var tq, tk *memTensor
			var m backend.Buffer
			if tq, tk, m, err = d.memCondition(&p, q, k, &o); err != nil {
				return err
			}
			defer func() { err = errors.Join(err, tq.free(), tk.free()) }()
			if m != nil {
				defer func() { err = errors.Join(err, m.Free()) }()
			}
			in[0], in[1], means = tq, tk, m
		}
		if qm, ok := d.mem.(backend.QuantizingMemory); ok { // one step where the backend fuses them
			err = qm.AttentionQuantizing(&p, out.data, lseBuf, in[0].data, in[1].data, in[2].data)
			if err == nil {
				fused = true
				break
			}
			if !errors.Is(err, ErrUnsupported) {
				return fmt.Errorf("sdpa: backend %s: %w", d.name, err)
			}
		}
		var qts []*memTensor
		if qts, err = d.memQuantize(in[0], in[1], in[2]); err != nil {
			return err
		}
		for i, qt := range qts {
			defer func() { err = errors.Join(err, qt.free()) }()
			in[i] = qt
		}
	default:
		return fmt.Errorf("%w: q, k and v must all be float32 or all FP8", ErrInvalid)
	}
	if !fused {
		err = d.mem.AttentionOn(&p, out.data, lseBuf, [6]backend.Buffer{in[0].data, in[1].data, in[2].data, in[0].scales, in[1].scales, in[2].scales})
	}
	if err == nil && lseBuf != nil && means != nil {
		err = d.mem.CorrectLSE(&p, lseBuf, q.data, means)
	}
	if err != nil {
		return fmt.Errorf("sdpa: backend %s: %w", d.name, err)
	}
	return nil
}

// memCondition applies the accuracy options to copies of q and k in device
// memory, bit for bit as conditioned does on the host; it returns the
// copies and, with SmoothK, the channel means (float64 [B][Hkv][D]).
func (d *Device) memCondition(p *backend.Problem, q, k *memTensor, o *Options) (tq, tk *memTensor, means backend.Buffer, err error) {
	if tq, err = d.newMem(q.b, q.h, q.s, q.d, q.layout, false); err != nil {
		return nil, nil, nil, err
	}
	if tk, err = d.newMem(k.b, k.h, k.s, k.d, k.layout, false); err != nil {
		return nil, nil, nil, errors.Join(err, tq.free())
	}
	var signs backend.Buffer
	fail := func(err error) (*memTensor, *memTensor, backend.Buffer, error) {
		err = errors.Join(err, tq.free(), tk.free())
		if means != nil {
			err = errors.Join(err, means.Free())
		}
		if signs != nil {
			err = errors.Join(err, signs.Free())
		}
		return nil, nil, nil, err
	}
	if o.SmoothK {
		if means, err = d.mem.Alloc(8 * int64(k.b*k.h*k.d)); err != nil {
			return fail(err)
		}
	}
	block := HadamardBlock(q.d)
	if o.Hadamard {
		host := make([]float32, k.b*k.h*k.d)
		for g := range k.b * k.h {
			hadamardSigns(host[g*k.d:(g+1)*k.d], g)
		}
		if signs, err = d.mem.Alloc(4 * int64(len(host))); err != nil {
			return fail(err)
		}
		if err := signs.Write(bytesOf(host)); err != nil {
			return fail(err)
		}
	}
	if err := d.mem.Condition(p, tq.data, tk.data, q.data, k.data, means, signs, o.SmoothK, block); err != nil {
		return fail(err)
	}
	if signs != nil {
		if err := signs.Free(); err != nil {
			return fail(err)
		}
	}
	return tq, tk, means, nil
}

// staged returns a host-memory stand-in for a tensor in device memory (its
// values copied to the host; nil stays nil), for the calls that do not yet
// take device buffers (KVCache's), and a function that writes a stand-in
// for an output back.
func staged(t *DeviceTensor) (*DeviceTensor, func() error, error) {
	if t == nil || t.m == nil {
		return t, func() error { return nil }, nil
	}
	h, err := t.m.hostCopy()
	if err != nil {
		return nil, nil, err
	}
	ht := &DeviceTensor{dev: t.dev, f: h}
	return ht, func() error { return t.m.data.Write(bytesOf(h.Data)) }, nil
}
