package backend

// Buffer is memory of a backend's device: sdpa's DeviceTensors keep their
// data in one when the backend implements Memory. Work on a buffer is
// ordered with all other work of its device.
type Buffer interface {
	// Len is the buffer's size in bytes.
	Len() int64
	// Write copies src to the start of the buffer; src may be reused when
	// Write returns.
	Write(src []byte) error
	// Read copies the start of the buffer into dst, after all work issued
	// on the device so far, and reports that work's failure.
	Read(dst []byte) error
	// Zero sets every byte to 0.
	Zero() error
	// Free releases the buffer; a second Free does nothing.
	Free() error
}

// Memory is implemented by backends whose tensors live in memory of their
// own device between calls (cuda: GPU memory), so that a program uploads
// inputs once, quantizes and runs attention there, and downloads only what
// it asks for. sdpa.Device uses it; backends without it keep device
// tensors in host memory.
type Memory interface {
	// Alloc returns a buffer of n > 0 bytes, contents undefined.
	Alloc(n int64) (Buffer, error)
	// Quantize quantizes each job's Src, float32 [B][H][S][D] in its
	// layout, into E4M3 Codes (one byte an element, same layout) and one
	// dequantization scale per (batch, head) (Scales, float32 [B][H]), bit
	// for bit as fp8.QuantizeE4M3 does per head (amax/448 scales,
	// non-finite values to NaN codes). Jobs of one head dim run together
	// (a call's Q, K and V: one pass each over all three).
	Quantize(jobs ...QuantizeJob) error
	// AttentionOn runs FP8 attention of p's shape, scale, mask and layout
	// (p's data fields are ignored) on inputs in device buffers: in holds
	// the codes of Q, K, V and their per-(batch, head) scales, as Quantize
	// leaves them; out receives the float32 output and lse, if not nil,
	// the float32 log-sum-exp [B][Hq][Sq]. It may return before the device
	// is done: a score factor that Validate would refuse (MaxScoreFactor),
	// found on the device, is an error wrapping ErrInvalid from out's next
	// Read.
	AttentionOn(p *Problem, out, lse Buffer, in [6]Buffer) error
	// Condition writes into tq and tk (float32, q's and k's shapes) the
	// float32 q and k of p's shape and layout transformed as sdpa's
	// accuracy options transform them on the host, bit for bit: with
	// smooth, k's per-(batch, KV head) channel means (float64 sums in key
	// order) subtracted and stored in means (float64 [B][Hkv][D]); with
	// signs not nil (float32 [B][Hkv][D], the Hadamard signs), every row of
	// both times its KV head's signs, then the normalized Walsh-Hadamard
	// transform of each block of hadamardBlock.
	Condition(p *Problem, tq, tk, q, k, means, signs Buffer, smooth bool, hadamardBlock int) error
	// CorrectLSE adds back to lse ([B][Hq][Sq]) what smoothing took from
	// each row's log-sum-exp, p.Scale·(q·mean), as sdpa does on the host;
	// q is the untransformed float32 query.
	CorrectLSE(p *Problem, lse, q, means Buffer) error
	// Held returns the bytes of device memory the backend holds: its
	// buffers, its pool of idle ones, its caches' pages.
	Held() int64
	// SetLimit bounds Held: an allocation that would pass the bound first
	// releases idle pooled memory, then fails with ErrOutOfMemory. n <= 0
	// removes the bound. Memory in use is never taken back.
	SetLimit(n int64) error
}

// QuantizeJob is one tensor for Memory.Quantize.
type QuantizeJob struct {
	Codes, Scales, Src Buffer
	B, H, S, D         int
	Layout             Layout
}

// QuantizingMemory is implemented by a Memory backend that can quantize
// float32 inputs and run FP8 attention on them as one step.
// AttentionQuantizing gives, bit for bit, what Quantize of q, k and v (float32
// buffers of p's shape and layout) followed by AttentionOn on the codes
// gives, output and LSE, without writing the codes anywhere the caller
// sees; for a problem it does not fuse it answers ErrUnsupported, having
// done nothing, and the caller makes the two calls.
type QuantizingMemory interface {
	AttentionQuantizing(p *Problem, out, lse, q, k, v Buffer) error
}
