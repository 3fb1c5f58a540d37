package sdpa

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/checked"
)

// Device is a backend together with the memory its tensors live in, opened
// by backend name, so that one program runs unchanged on a laptop ("cpu")
// and on a GPU host ("cuda"): upload inputs once, quantize them, run
// attention and key/value caches on the device, download the results.
//
// Where the tensors live: in the memory of the backend's device when the
// backend has one (backend.Memory: "cuda" keeps them in GPU memory, and
// Quantize and Attention run there, inputs quantized on the GPU bit for bit
// as on the host), otherwise in host memory ("cpu"). A KVCache on "cuda"
// keeps its pages in GPU memory: appends read keys and values there, check
// them for non-finite values there (before writing anything) and quantize
// them there, and its Attention reads queries and writes outputs in GPU
// memory. The API does not change when tensors move.
//
// A Device and its tensors are safe for concurrent use: calls that write a
// tensor (CopyFrom, an output of Attention, Free) must not overlap other
// calls that use the same tensor, as with any Go value.
type Device struct {
	name string
	// label names the device in errors: the backend's name, and "#n" for
	// the n-th device opened on it (n > 1), so that two are told apart.
	label string
	be    backend.Backend
	mem   backend.Memory // nil: tensors in host memory
	// host accounts for the tensors and caches of a device without
	// memory of its own (nil when mem is not).
	host *hostMem
	// rec is the Capture in progress on this device, written and read
	// only by the capturing goroutine (see recording).
	rec *capture
}

// opened counts the devices opened on each backend name (Device.label).
var opened struct {
	sync.Mutex
	n map[string]int
}

func deviceLabel(name string) string {
	opened.Lock()
	defer opened.Unlock()
	if opened.n == nil {
		opened.n = map[string]int{}
	}
	opened.n[name]++
	if n := opened.n[name]; n > 1 {
		return name + "#" + strconv.Itoa(n)
	}
	return name
}

// check returns an error for a nil device or one not made by Open.
func (d *Device) check() error {
	if d == nil || d.be == nil {
		return errorf(ErrInvalid, "a nil device, or one not made by Open")
	}
	return nil
}

// String returns the device's name in errors: its backend's, with "#n"
// for the n-th device opened on the same backend.
func (d *Device) String() string {
	if d == nil {
		return "<nil device>"
	}
	if d.label == "" {
		return d.name
	}
	return d.label
}

// Open returns the device of the backend registered as name (Backends lists
// them); "" opens the highest-priority backend that is available in this
// build. Errors wrap ErrUnknownBackend, or ErrUnsupported for a backend
// this build or machine cannot run (cuda without -tags cuda, or no GPU).
func Open(name string) (*Device, error) {
	if name == "" {
		var errs []error
		for _, n := range backend.Names() {
			d, err := Open(n)
			if err == nil {
				return d, nil
			}
			errs = append(errs, err)
		}
		return nil, fmt.Errorf("%w: no backend is available: %w", ErrUnsupported, errors.Join(errs...))
	}
	be, err := backend.Lookup(name)
	if err != nil {
		return nil, err
	}
	if a, ok := be.(backend.Availability); ok {
		if err := a.Available(); err != nil {
			if errors.Is(err, ErrUnsupported) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: backend %q: %w", ErrUnsupported, name, err)
		}
	}
	d := &Device{name: name, label: deviceLabel(name), be: be}
	if mem, ok := be.(backend.Memory); ok {
		d.mem = mem
	} else {
		d.host = newHostMem()
	}
	return d, nil
}

// MemoryHeld returns the bytes of memory the device holds: on a device
// with memory of its own ("cuda"), what its backend holds there (its
// tensors, its pool of idle buffers, its caches' pages); on a device that
// keeps tensors in host memory ("cpu"), its tensors' and caches' bytes. 0
// for a nil device.
func (d *Device) MemoryHeld() int64 {
	switch {
	case d.check() != nil:
		return 0
	case d.mem != nil:
		return d.mem.Held()
	}
	return d.host.held.Load()
}

// SetMemoryLimit bounds the memory the device holds (MemoryHeld): an
// allocation that would pass n fails with ErrOutOfMemory, before anything
// is allocated. On a device with memory of its own ("cuda") the backend
// first releases idle pooled memory, and n <= 0 removes the bound. On a
// device in host memory ("cpu") the bound's default is the machine's
// physical memory (on Linux the smaller of /proc/meminfo's MemTotal and the
// cgroup's memory.max, on darwin sysctl hw.memsize, elsewhere 4 GiB), and
// n <= 0 restores that default: past it the Go runtime would end the
// process instead of returning an error. The bound counts tensors and
// caches, not a call's scratch memory.
func (d *Device) SetMemoryLimit(n int64) error {
	if err := d.check(); err != nil {
		return err
	}
	if d.mem != nil {
		return d.mem.SetLimit(n)
	}
	d.host.setLimit(n)
	return nil
}

// Name returns the backend name the device was opened with.
func (d *Device) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// DeviceTensor is a tensor in a device's memory: float32 ([B][H][S][D] in
// its layout) or E4M3 codes with one dequantization scale per (batch,
// head), as QuantizedTensor.
type DeviceTensor struct {
	dev *Device
	mu  sync.Mutex // guards freed against concurrent Free
	f   *Tensor
	q   *QuantizedTensor
	m   *memTensor // in the backend's memory (Device.mem)
	// cleanup frees m if the tensor is dropped without Free.
	cleanup runtime.Cleanup
	// freed: the tensor was freed and may not be used.
	freed bool
	// pins counts the live graphs that use the tensor (Free fails while it
	// is not 0); under mu.
	pins int
	// bytes is what the tensor counts in its device's host memory account
	// (Device.host), released by Free or, for a tensor dropped without
	// Free, by cleanup.
	bytes int64
}

// Dims returns the tensor's shape [B][H][S][D] (zeros for a freed tensor
// or one not made by a Device).
func (t *DeviceTensor) Dims() (b, h, s, d int) {
	switch {
	case t == nil:
	case t.q != nil:
		return t.q.B, t.q.H, t.q.S, t.q.D
	case t.f != nil:
		return t.f.B, t.f.H, t.f.S, t.f.D
	case t.m != nil:
		return t.m.b, t.m.h, t.m.s, t.m.d
	}
	return 0, 0, 0, 0
}

// Layout returns the tensor's memory order.
func (t *DeviceTensor) Layout() Layout {
	switch {
	case t == nil:
	case t.q != nil:
		return t.q.Layout
	case t.f != nil:
		return t.f.Layout
	case t.m != nil:
		return t.m.layout
	}
	return BHSD
}

// Precision returns FP32 for a float32 tensor, FP8E4M3 for a quantized one.
func (t *DeviceTensor) Precision() Precision {
	if t != nil && (t.q != nil || t.m != nil && t.m.fp8()) {
		return FP8E4M3
	}
	return FP32
}

// use checks that t is a live tensor of device d.
func (t *DeviceTensor) use(d *Device, what string) error {
	if t == nil {
		return errorf(ErrInvalid, "%s is nil", what)
	}
	if t.dev == nil || t.f == nil && t.q == nil && t.m == nil && !t.freed {
		return errorf(ErrInvalid, "%s was not made by a Device", what)
	}
	if d.check() != nil {
		return errorf(ErrInvalid, "%s is used with a cache or device not made by Open", what)
	}
	if t.dev != d {
		return errorf(ErrInvalid, "%s belongs to device %v, not %v", what, t.dev, d)
	}
	t.mu.Lock()
	freed := t.freed
	t.mu.Unlock()
	if freed {
		return errorf(ErrInvalid, "%s, a tensor of device %v, was freed", what, d)
	}
	return nil
}

// hostTensor returns a DeviceTensor of d holding f or q in host memory,
// counting bytes in d's account until Free or, if it is dropped, until the
// garbage collector finds it unreachable. The caller reserved bytes.
func (d *Device) hostTensor(f *Tensor, q *QuantizedTensor, bytes int64) *DeviceTensor {
	t := &DeviceTensor{dev: d, f: f, q: q, bytes: bytes}
	t.cleanup = runtime.AddCleanup(t, func(h *hostMem) { h.release(bytes) }, d.host)
	return t
}

// noHostCopy refuses a copy between host and device memory inside a
// Capture (on every device, as a graph on "cuda" replays device work only).
func (d *Device) noHostCopy(what string) error {
	if d.inCapture() {
		return errorf(ErrUnsupported, "%s inside a graph capture on %v (a graph replays device work only: move host data before Capture or between replays)", what, d)
	}
	return nil
}

// Upload copies t into a new float32 device tensor of t's shape and layout.
func (d *Device) Upload(t *Tensor) (*DeviceTensor, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%w: uploading a nil tensor", ErrInvalid)
	}
	if err := t.check("t"); err != nil {
		return nil, err
	}
	if err := d.noHostCopy("Upload"); err != nil {
		return nil, err
	}
	if d.mem != nil {
		return d.memUpload(t, nil)
	}
	n := 4 * int64(len(t.Data)) // (len fits an int: no overflow in int64)
	if err := d.host.reserve(n, "Upload"); err != nil {
		return nil, err
	}
	c := &Tensor{Data: append([]float32(nil), t.Data...), B: t.B, H: t.H, S: t.S, D: t.D, Layout: t.Layout}
	return d.hostTensor(c, nil, n), nil
}

// UploadQuantized copies t into a new FP8 device tensor.
func (d *Device) UploadQuantized(t *QuantizedTensor) (*DeviceTensor, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%w: uploading a nil tensor", ErrInvalid)
	}
	if err := t.check("t"); err != nil {
		return nil, err
	}
	if err := d.noHostCopy("UploadQuantized"); err != nil {
		return nil, err
	}
	if d.mem != nil {
		return d.memUpload(nil, t)
	}
	n := int64(len(t.Data)) + 4*int64(len(t.Scales))
	if err := d.host.reserve(n, "UploadQuantized"); err != nil {
		return nil, err
	}
	c := *t
	c.Data = append(c.Data[:0:0], t.Data...)
	c.Scales = append([]float32(nil), t.Scales...)
	return d.hostTensor(nil, &c, n), nil
}

// NewTensor returns a float32 device tensor of zeros, [b][h][s][dim] in
// layout l (an output for Attention). A tensor larger than the device can
// hold (SetMemoryLimit) is ErrOutOfMemory, before anything is allocated.
func (d *Device) NewTensor(b, h, s, dim int, l Layout) (*DeviceTensor, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	n, ok := checked.Mul(b, h, s, dim)
	bytes, ok2 := checked.Mul(n, 4)
	if !ok || !ok2 || b <= 0 || h <= 0 || s <= 0 || dim <= 0 {
		return nil, fmt.Errorf("%w: device tensor [%d][%d][%d][%d]: sizes must be positive and their bytes fit an int", ErrInvalid, b, h, s, dim)
	}
	if l != BHSD && l != BSHD {
		return nil, fmt.Errorf("%w: unknown layout %d", ErrInvalid, int(l))
	}
	if d.mem != nil {
		m, err := d.newMem(b, h, s, dim, l, false)
		if err != nil {
			return nil, err
		}
		if err := m.data.Zero(); err != nil {
			return nil, errors.Join(err, m.free())
		}
		return d.wrapMem(m), nil
	}
	what := fmt.Sprintf("NewTensor [%d][%d][%d][%d]", b, h, s, dim)
	if err := d.host.reserve(int64(bytes), what); err != nil {
		return nil, err
	}
	return d.hostTensor(&Tensor{Data: make([]float32, n), B: b, H: h, S: s, D: dim, Layout: l}, nil, int64(bytes)), nil
}

// CopyFrom overwrites a float32 device tensor with src, which must have its
// shape and layout. It allocates nothing.
func (t *DeviceTensor) CopyFrom(src *Tensor) error {
	if t == nil || src == nil {
		return fmt.Errorf("%w: CopyFrom with a nil tensor", ErrInvalid)
	}
	if err := t.use(t.dev, "the destination"); err != nil {
		return err
	}
	if err := src.check("src"); err != nil {
		return err
	}
	if err := t.dev.noHostCopy("CopyFrom"); err != nil {
		return err
	}
	if t.Precision() != FP32 {
		return fmt.Errorf("%w: CopyFrom into an FP8 tensor (upload float32 and Quantize)", ErrInvalid)
	}
	b, h, s, d := t.Dims()
	if src.B != b || src.H != h || src.S != s || src.D != d || src.Layout != t.Layout() {
		return fmt.Errorf("%w: src is [%d][%d][%d][%d] %v, the tensor [%d][%d][%d][%d] %v", ErrInvalid,
			src.B, src.H, src.S, src.D, src.Layout, b, h, s, d, t.Layout())
	}
	if t.m != nil {
		return t.m.data.Write(bytesOf(src.Data))
	}
	copy(t.f.Data, src.Data)
	return nil
}

// Download copies the tensor's values (an FP8 tensor's dequantized) into
// dst, which must have its shape and layout. It allocates nothing.
func (t *DeviceTensor) Download(dst *Tensor) error {
	if t == nil || dst == nil {
		return fmt.Errorf("%w: Download with a nil tensor", ErrInvalid)
	}
	if err := t.use(t.dev, "the tensor"); err != nil {
		return err
	}
	if err := dst.check("dst"); err != nil {
		return err
	}
	if err := t.dev.noHostCopy("Download"); err != nil {
		return err
	}
	b, h, s, d := t.Dims()
	if dst.B != b || dst.H != h || dst.S != s || dst.D != d || dst.Layout != t.Layout() {
		return fmt.Errorf("%w: dst is [%d][%d][%d][%d] %v, the tensor [%d][%d][%d][%d] %v", ErrInvalid,
			dst.B, dst.H, dst.S, dst.D, dst.Layout, b, h, s, d, t.Layout())
	}
	switch {
	case t.f != nil:
		copy(dst.Data, t.f.Data)
		return nil
	case t.m != nil && !t.m.fp8():
		return t.m.data.Read(bytesOf(dst.Data))
	case t.m != nil:
		h, err := t.m.hostCopy()
		if err != nil {
			return err
		}
		copy(dst.Data, h.Data)
		return nil
	}
	return t.q.dequantizeInto(dst)
}

// Free releases the tensor's memory; using it afterwards is an error.
// Freeing twice is an error, and so is freeing a tensor that a live Graph
// uses (Close the graph first). A tensor in a device's own memory ("cuda")
// that is dropped without Free has its memory freed when the garbage
// collector finds it unreachable, later and unpredictably: call Free.
func (t *DeviceTensor) Free() error {
	if t == nil {
		return fmt.Errorf("%w: freeing a nil tensor", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dev == nil || t.f == nil && t.q == nil && t.m == nil && !t.freed {
		return fmt.Errorf("%w: freeing a tensor not made by a Device", ErrInvalid)
	}
	if t.freed {
		return errorf(ErrInvalid, "a tensor of device %v freed twice", t.dev)
	}
	if t.pins > 0 {
		return errorf(ErrInvalid, "freeing a tensor of device %v that %d live graph(s) use: Close them first", t.dev, t.pins)
	}
	var err error
	if t.m != nil {
		// The data first: a graph that uses the tensor pins its buffers
		// (ErrInvalid), and then the tensor stays as it was.
		if err := t.m.data.Free(); err != nil {
			return err
		}
		t.cleanup.Stop()
		if t.m.scales != nil {
			err = t.m.scales.Free()
		}
	}
	if t.bytes > 0 {
		t.cleanup.Stop()
		t.dev.host.release(t.bytes)
		t.bytes = 0
	}
	t.freed, t.f, t.q, t.m = true, nil, nil, nil
	return err
}

// Quantize returns a new FP8 device tensor holding t (float32) quantized
// with one amax scale per (batch, head), as Quantize does on the host.
func (d *Device) Quantize(t *DeviceTensor) (*DeviceTensor, error) {
	if err := t.use(d, "t"); err != nil {
		return nil, err
	}
	if t.Precision() != FP32 {
		return nil, fmt.Errorf("%w: the tensor is already FP8", ErrInvalid)
	}
	if t.m != nil {
		m, err := d.memQuantize(t.m)
		if err != nil {
			return nil, err
		}
		qt := d.wrapMem(m[0])
		d.keep(t, qt)
		return qt, nil
	}
	n := int64(len(t.f.Data)) + 4*int64(t.f.B*t.f.H)
	if err := d.host.reserve(n, "Quantize"); err != nil {
		return nil, err
	}
	q, err := Quantize(t.f)
	if err != nil {
		d.host.release(n)
		return nil, err
	}
	qt := d.hostTensor(nil, q, n)
	if rec := d.recording(); rec != nil { // a replay quantizes into qt again
		src := t.f
		rec.record(func() error { quantizeInto(q, src); return nil }, t, qt)
	}
	return qt, nil
}

// checkLSE reports an error unless lse can take the log-sum-exps of q's
// rows: a float32 [B][q.H][q.S][1] tensor in layout BHSD (the rows in
// q's head-major order, as Attention's lse slice holds them).
func checkLSE(lse, q *DeviceTensor) error {
	qb, qh, qs, _ := q.Dims()
	b, h, s, one := lse.Dims()
	if lse.Precision() != FP32 || one != 1 || b != qb || h != qh || s != qs || lse.Layout() != BHSD {
		return fmt.Errorf("%w: lse must be a float32 [%d][%d][%d][1] tensor in layout BHSD", ErrInvalid, qb, qh, qs)
	}
	return nil
}

// Attention computes attention on device tensors into out (float32,
// [B][q.H][q.S][D] in q's layout) and, if lse is not nil, the log-sum-exp
// into lse (float32, [B][q.H][q.S][1] in layout BHSD). q, k and v are all float32
// (opts.Precision says whether the call quantizes them) or all FP8 (the
// FP8 path, no re-quantization). opts.Backend must be "" or the device's.
// After the first call of a shape it allocates nothing on the cpu device.
// On a device with its own memory ("cuda") it returns without waiting for
// the device; a problem only the device can see (a score factor that would
// overflow float32, from scales quantized there) is then an error wrapping
// ErrInvalid from out's next Download.
func (d *Device) Attention(out, lse, q, k, v *DeviceTensor, opts *Options) error {
	for _, c := range []struct {
		t    *DeviceTensor
		name string
	}{{out, "out"}, {q, "q"}, {k, "k"}, {v, "v"}} {
		if err := c.t.use(d, c.name); err != nil {
			return err
		}
	}
	if out.Precision() != FP32 {
		return fmt.Errorf("%w: out must be a float32 tensor", ErrInvalid)
	}
	if lse != nil {
		if err := lse.use(d, "lse"); err != nil {
			return err
		}
		if err := checkLSE(lse, q); err != nil {
			return err
		}
	}
	if out.m != nil {
		var lm *memTensor
		if lse != nil {
			lm = lse.m
		}
		if q.m == nil || k.m == nil || v.m == nil || lse != nil && lm == nil {
			return fmt.Errorf("%w: q, k, v and lse must be tensors of the device", ErrInvalid)
		}
		if err := d.memAttention(out.m, lm, q.m, k.m, v.m, opts); err != nil {
			return err
		}
		d.keep(out, lse, q, k, v)
		return nil
	}
	var lseData []float32
	if lse != nil { // (its shape, layout and precision checked above)
		if lse.f == nil {
			return fmt.Errorf("%w: lse must be in host memory, as out is", ErrInvalid)
		}
		lseData = lse.f.Data
	}
	o, err := d.options(opts)
	if err != nil {
		return err
	}
	if rec := d.recording(); rec != nil {
		return rec.hostAttention(out, lse, q, k, v, lseData, o)
	}
	return hostAttention(out, lseData, q, k, v, &o)
}

// hostAttention is Attention on checked tensors in host memory.
func hostAttention(out *DeviceTensor, lse []float32, q, k, v *DeviceTensor, o *Options) error {
	switch {
	case q.f != nil && k.f != nil && v.f != nil:
		return AttentionInto(out.f, lse, q.f, k.f, v.f, o)
	case q.q != nil && k.q != nil && v.q != nil:
		return AttentionQuantizedInto(out.f, lse, q.q, k.q, v.q, o)
	}
	return fmt.Errorf("%w: q, k and v are %v, %v, %v; they must all be float32 or all FP8", ErrInvalid, q.Precision(), k.Precision(), v.Precision())
}

// hostAttention runs an Attention inside a capture on a host-memory device
// and records it for Replay.
func (rec *capture) hostAttention(out, lse, q, k, v *DeviceTensor, lseData []float32, o Options) error {
	if err := hostAttention(out, lseData, q, k, v, &o); err != nil {
		return err
	}
	// The replay holds the tensors' data, which stays the graph's if a
	// tensor is freed later inside the capture (as on a device with graphs).
	d := out.dev
	ho, hq, hk, hv := &DeviceTensor{dev: d, f: out.f}, &DeviceTensor{dev: d, f: q.f, q: q.q}, &DeviceTensor{dev: d, f: k.f, q: k.q}, &DeviceTensor{dev: d, f: v.f, q: v.q}
	rec.record(func() error { return hostAttention(ho, lseData, hq, hk, hv, &o) }, out, lse, q, k, v)
	return nil
}

// options returns opts (or the defaults) with the device's backend.
func (d *Device) options(opts *Options) (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Backend != "" && o.Backend != d.name {
		return o, errorf(ErrInvalid, "options name backend %q on device %v", o.Backend, d)
	}
	o.Backend = d.name
	return o, nil
}
