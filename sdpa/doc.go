// Package sdpa computes scaled-dot-product attention,
//
//	out = softmax(scale · Q·Kᵀ + mask) · V,
//
// with PyTorch's scaled_dot_product_attention semantics, in float32 or with
// FP8 E4M3 inputs, on the pure-Go CPU backend (always available) or on an
// NVIDIA GPU (build with -tags cuda).
//
// # Calls on host memory
//
// Attention, AttentionLSE and AttentionQuantized allocate their results;
// AttentionInto and AttentionQuantizedInto write into caller-owned buffers
// and, on the CPU backend, allocate nothing after the first call of a shape
// (FP8 and the accuracy options included). AttentionVarlenInto takes
// sequences of different lengths packed one after another in BSHD, with
// cumulative offsets as FlashAttention's cu_seqlens; masks and FP8 scales
// apply per sequence.
//
// # Semantics
//
//   - Scale 0 means 1/sqrt(D); any finite scale is allowed.
//   - Tensors are [B][H][S][D] in BHSD (the zero Layout) or BSHD order (a
//     projection's [S][H·D] output as it is). Q, K, V and the output share
//     one layout, and results come in it.
//   - Sq may differ from Sk. Grouped-query and multi-query attention when
//     k.H divides q.H: query head h reads KV head h / (q.H/k.H), as
//     PyTorch's enable_gqa.
//   - CausalUpperLeft is PyTorch's is_causal=True (query i sees keys
//     j <= i); CausalLowerRight is PyTorch's causal_lower_right and
//     FlashAttention's alignment (j <= i + Sk - Sq). A row that sees no key
//     gives zeros and log-sum-exp -Inf.
//   - AttentionLSE also returns the natural log-sum-exp per [B][Hq][Sq].
//
// # Attention variants
//
// Three options, each zero by default, give the attention current models
// use; every call takes them (Attention, AttentionLSE, the Into, Quantized
// and varlen calls, per sequence, Device.Attention, KVCache.Attention):
//
//   - Options.SlidingWindow W > 0 (local attention): a query at position p
//     in the key sequence (i under CausalUpperLeft, i + Sk - Sq under
//     CausalLowerRight; in a KVCache, its position in its sequence) sees
//     the keys j with p - W < j <= p. It needs a causal mask. A row whose
//     window holds no key gives zeros and LSE -Inf.
//   - Options.Softcap c > 0: each score s = scale·q·k becomes c·tanh(s/c)
//     before the mask and the softmax.
//   - Options.Sinks (one logit per query head): e^sink_h joins the
//     denominator of every row of head h and carries no value, out_i =
//     Σ_j e^(s_ij)·v_j / (Σ_j e^(s_ij) + e^(sink_h)). The returned LSE is
//     over the keys only, log Σ_j e^(s_ij), so results over parts of the
//     keys, computed without the sink, merge by their LSEs as usual, and
//     the sink is added once at the end: out = out_keys / (1 +
//     e^(sink_h - LSE)).
//
// Malformed values (a window without a causal mask, a negative window or
// softcap, a NaN or infinite softcap or sink, sinks not one per query
// head, SmoothK with a softcap or sinks) are ErrInvalid. A backend without
// kernels for a variant answers ErrUnsupported: the cpu kernels and cache
// have all three (a window skips the key panels before it, a windowed
// decode reads only the pages inside its window), and so have the cuda
// backend's Hopper and Ada kernels (a window skips the key tiles before
// it) and its cache's decode kernels on every GPU; the Ampere prefill
// kernels have none, so on those GPUs Backend "" runs such calls on the
// cpu, and the cuda device answers ErrUnsupported.
//
// # NaN and infinities
//
// A NaN in Q row i makes that row NaN (if it sees any key). A NaN in K at
// key j makes NaN every row that sees key j. A NaN in V at key j, column d,
// makes column d NaN in every row that sees key j, and on the GPU kernels
// also in the other rows of the same block of query rows that load key j's
// tile (their weight for it is exactly 0, and 0·NaN is NaN, as in any dense
// P·V). Rows that see no key stay 0; other heads and columns are never
// touched. With a sliding window a row sees only the keys in its window: a
// NaN key before it leaves the row finite. ±Inf behaves as in float32 attention. The exact rule is in
// package sdpatest, which checks it element by element on every backend.
//
// # Errors
//
// Bad input returns an error wrapping ErrInvalid: nil tensors, data length
// against shape, non-positive sizes or sizes whose product overflows int,
// mismatched B or D, K and V of different shapes, q.H not a multiple of
// k.H, a NaN or infinite scale, an unknown mask, layout or precision, FP8
// scales that could make a score overflow float32. An unknown backend name
// gives ErrUnknownBackend, a call a backend has no kernel for
// ErrUnsupported, a device allocation past its bound ErrOutOfMemory, a full
// KVCache ErrCacheFull. Arguments are checked before anything is written;
// no output is returned with an error, and no exported function panics on
// any input (a probe test and fuzz targets over sizes near the int limits
// hold the package to it).
//
// # Concurrency
//
// Every function is safe to call from many goroutines at once. Inputs are
// only read during a call: do not change them while it runs. An output,
// returned or caller-owned, is written only by its call: do not hand one
// output to two calls running at once; device tensors follow the same
// rule (one writer at a time). The CPU backend serves concurrent calls on
// one shared set of helper goroutines. A KVCache is safe for concurrent
// use: Attention calls run together; AddSequence, Append, Fork, Truncate,
// Drop and Close wait for them.
//
// # FP8
//
// Precision FP8E4M3 quantizes Q, K and V to E4M3 with one amax scale per
// (batch, head) (scale = amax/448; NaN and ±Inf quantize to NaN) and
// computes as the GPU kernels do: exact E4M3 values, products accumulated in
// float32, the Q and K descales folded into the softmax scale (their product
// taken in float64) and the V descale into the output. A scale product so
// large that a score could exceed float32 is an error naming the values,
// not a NaN. On the cuda backends (named, or chosen by Backend ""), a call
// on float32 host slices brings its output back in float16 (half the
// bytes over the bus): each output is rounded to 11 significant bits at a
// power-of-two scale that keeps it in range, under 1/150 of the FP8 error
// bound (docs/ACCURACY.md); device tensors and quantized tensors keep
// float32 outputs. Already-quantized tensors (Quantize, NewQuantizedTensor) go
// through AttentionQuantized without re-quantization.
//
// Three options, exact in exact arithmetic, reduce the FP8 error on inputs
// with outlier channels (docs/ACCURACY.md has the measurements):
// Options.SmoothK subtracts each head's mean key before quantization (the
// returned LSE is corrected), Options.Hadamard rotates Q and K by a
// random-sign block Walsh-Hadamard matrix, and Options.OutlierChannels
// carries the n channels with the largest |Q|·|K| in two E4M3 terms (the
// head dim grows to D+3n rounded up to 16).
//
// # Backends
//
// Options.Backend names the backend: "" (the best registered backend that
// supports the call), "cpu" (and its kernel sets "cpu/avx512", "cpu/avx2",
// "cpu/go", ...), "cuda" (the best kernel for the GPU at hand), "cuda/sm90"
// (the Hopper kernel), "cuda/sm89" (the Ada kernel), "cuda/sm80" (the
// Ampere kernels) and "reference" (float64, slow). Backends lists what this
// build registered. Without -tags cuda, "cuda" returns an error that says
// to rebuild with the tag, and "" falls back to the CPU.
//
// # Devices
//
// Open returns a Device ("cpu", "cuda", or "" for the best available). A
// Device holds tensors (Upload, UploadQuantized, NewTensor, CopyFrom,
// Download, Free), quantizes them (Quantize) and runs Attention on them.
// On "cuda" the tensors live in GPU memory: Quantize runs on the GPU, bit
// for bit as on the host, and float32 inputs with Precision FP8E4M3 are
// quantized there per call (after SmoothK and Hadamard where asked). The
// GPU kernels take FP8 only: FP32 precision on GPU tensors is
// ErrUnsupported. On both devices MemoryHeld reports the memory the device
// holds (tensors, cache pages; on "cuda" also its pool of idle buffers) and
// SetMemoryLimit bounds it: an allocation past the bound fails with
// ErrOutOfMemory before anything is allocated (on "cuda" idle pooled memory
// is released first). The "cpu" device's default bound is the machine's
// physical memory (the cgroup's limit where smaller), so an impossible
// NewTensor or NewKVCache is an error, not the end of the process.
//
// # The FP8 KV cache
//
// Device.NewKVCache makes a paged cache of E4M3 keys and values for
// inference: many sequences of different lengths in pages of
// KVCacheConfig.PageSize tokens (64 by default). Append and Attention take
// a batch of sequences (one call per decode step for all of them), with
// float32 queries against E4M3 keys and values. Appending costs the same at
// any length. Each (page, KV head) has its own power-of-two scale, grown
// (one page re-encoded, exactly for normal values) when a token would not
// fit: nothing saturates, and non-finite values are refused with an error
// before anything is written. Drop returns a sequence's pages to the pool;
// Truncate cuts a sequence back to its first n tokens (pages past them
// return to the pool); Fork starts a sequence sharing another's full pages,
// reference-counted and never rewritten while shared (the partly filled
// last page is copied, and a page still shared after a Truncate is copied
// before either sequence writes to it), so that appending to either never
// changes the other.
// A decode step allocates nothing after warm-up. On "cuda" the pages live
// in GPU memory, Append quantizes there bit for bit as the cpu cache does,
// and Attention returns without waiting for the GPU (an error surfaces at
// the next read). A chunk of many new queries (chunked prefill, a prompt
// after a cached prefix) with Precision FP8E4M3 runs there on the FP8
// prefill kernel instead of the cache's own: the queries quantized, each
// sequence's keys and values brought to one scale per KV head, FP8
// attention's error at the prefill kernel's speed (outside a Capture; a
// batch of sequences no shorter than the chunk, of any lengths on Hopper
// GPUs, equally long on Ada). AttentionVarlen takes a step of
// continuous batching as one call: each sequence's own number of new
// queries (a chunk of a prompt beside single decode tokens), packed in
// order into one tensor, with no padding (on "cuda" one launch of the
// split-KV kernel, and one of its merge where the keys are split).
//
// # Graphs
//
// Device.Capture records the device calls of a function (Attention,
// Quantize, KVCache.Attention on device tensors) into a Graph that Replay
// runs again on the tensors' contents at that time. A captured
// KVCache.Attention reads its sequences' lengths and pages at each replay,
// so one capture serves every later decode step of sequences up to
// KVCacheConfig.MaxSeqLen. Both devices keep the same rules, so a program
// written against "cpu" behaves alike on "cuda": calls that move host data
// or a cache's pages (Upload, UploadQuantized, CopyFrom, Download,
// KVCache.Append, Fork and Truncate) and Replay or Close of a graph fail
// inside a capture (ErrUnsupported), a nested Capture is ErrInvalid, and
// freeing a tensor or closing a cache that a live graph uses is
// ErrInvalid. On "cuda" a Graph is a CUDA graph: nothing runs at
// capture, and other goroutines' calls wait for the capture to end; a
// captured KVCache.Attention reads its lengths and block table from device
// memory that KVCache.Append and Truncate write when they change a
// sequence it names, so a replay is one graph launch and copies nothing
// from the host. On
// "cpu" the captured device calls are recorded and replayed; other
// goroutines' calls run during a capture and are not recorded.
package sdpa
