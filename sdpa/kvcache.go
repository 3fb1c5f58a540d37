package sdpa

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// ErrCacheFull is returned (wrapped) by KVCache.Append when the cache's
// pool has too few free pages for the new tokens; nothing is written.
var ErrCacheFull = errors.New("kv cache is full")

// KVCacheConfig sizes a key/value cache.
type KVCacheConfig struct {
	// KVHeads and HeadDim: each token has KVHeads key and value rows of
	// HeadDim elements.
	KVHeads, HeadDim int
	// PageSize is the number of tokens per page; 0 means DefaultPageSize.
	// The cpu device takes multiples of 64, the cuda device multiples of
	// 32.
	PageSize int
	// MaxTokens is the capacity, shared by all sequences, rounded up to
	// whole pages. Each sequence uses whole pages, so the tokens that fit
	// are fewer by up to PageSize-1 per sequence.
	MaxTokens int
	// MaxSeqLen bounds one sequence's tokens (Append fails with
	// ErrCacheFull past it); 0 means the whole capacity. A KVCache.Attention
	// captured in a Graph plans its launch for sequences this long and
	// keeps a block table of MaxSeqLen/PageSize pages a sequence in device
	// memory, so a serving program sets it to its model's context length.
	MaxSeqLen int
}

// DefaultPageSize is the page size of a KVCacheConfig that leaves it 0.
const DefaultPageSize = 64

// SeqID names a sequence of a KVCache.
type SeqID int64

// KVCache is an FP8 E4M3 key/value cache on a device, holding many
// sequences of different lengths in fixed-size pages (as paged-attention
// servers do): AddSequence starts one, Append quantizes new tokens' keys and
// values into its pages once, Attention runs new queries against what the
// sequences hold, Fork starts a sequence that shares another's pages
// (prefix sharing, beam search), Truncate cuts one back (a rejected draft),
// and Drop returns a sequence's pages for reuse (continuous batching).
// Appending a token costs the same at any cache length.
//
// Scales: each page has its own power-of-two scale per KV head for keys and
// for values, set by the first token and grown (re-encoding that one page,
// exactly for values in E4M3's normal range) when a later token would not
// fit; no value is ever saturated, and non-finite values are refused
// ("Scale policy" at backend.PagedKV). Queries stay float32: scores are float32
// queries times decoded E4M3 keys, as FlashInfer's FP8-KV path does with
// 16-bit queries.
//
// A KVCache is safe for concurrent use: Attention calls run concurrently
// with each other; AddSequence, Append, Fork, Truncate, Drop and Close
// wait for them.
type KVCache struct {
	dev *Device
	mu  sync.RWMutex
	kv  backend.PagedKV
	cfg backend.PagedConfig
	// maxSeqLen bounds a sequence (KVCacheConfig.MaxSeqLen, resolved).
	maxSeqLen int
	// graphs counts the live Graphs that read the cache (Close fails
	// while it is not 0).
	graphs int
	// live are the captured calls of live Graphs whose lengths and block
	// tables are in device memory: Append and Truncate write there what
	// they change (syncGraphs), so that a replay copies nothing.
	live []*graphCacheCall
	// mark numbers the mutations: a sequence's mark is the last that
	// changed it.
	mark uint64
	free []int32 // free pages, a stack
	// refs counts the sequences that hold each page (0: free). A page
	// held by more than one (Fork) is never written: a sequence about to
	// write into one gets a copy first.
	refs []int32
	seqs map[SeqID]*kvSeq
	next SeqID
	// Append's scratch, under mu: each new token's page and slot.
	page, slot []int32
	cow        []int32 // Append: the copy each sequence writes into instead of a shared last page (-1: none)
	seqBuf     []*kvSeq
	app        backend.PagedAppend
	calls      freelist.List[cacheCall]
	// bytes is what the cache counts in its device's host memory account
	// (Device.host), released by Close or by cleanup.
	bytes   int64
	cleanup runtime.Cleanup
}

type kvSeq struct {
	pages []int32
	n     int
	// mark is the mutation (KVCache.mark) that last changed the sequence,
	// and [from, to) the block-table entries it changed.
	mark     uint64
	from, to int
	dropped  bool // Drop removed it (a graph that names it cannot replay)
}

// cacheCall is one Attention call's scratch.
type cacheCall struct {
	p       backend.PagedProblem
	lens    []int32
	table   []int32
	qStarts []int32
	seqs    []*kvSeq
}

// NewKVCache allocates a cache on the device. Devices whose backend has no
// paged cache report ErrUnsupported; a cache larger than the device can
// hold (Device.SetMemoryLimit) is ErrOutOfMemory, before anything is
// allocated.
func (d *Device) NewKVCache(c KVCacheConfig) (*KVCache, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	pb, ok := d.be.(backend.PagedBackend)
	if !ok {
		return nil, errorf(ErrUnsupported, "backend %q of device %v has no paged FP8 cache", d.name, d)
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.PageSize < 0 || c.MaxTokens <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 {
		return nil, fmt.Errorf("%w: cache of %d tokens of %d heads of dim %d in pages of %d", ErrInvalid, c.MaxTokens, c.KVHeads, c.HeadDim, c.PageSize)
	}
	pages := c.MaxTokens/c.PageSize + min(1, c.MaxTokens%c.PageSize)
	// Keys and values, one byte a code, and a K and a V scale a (page, head).
	codes, ok1 := checked.Mul(pages, c.PageSize, c.KVHeads, c.HeadDim, 2)
	scales, ok2 := checked.Mul(pages, c.KVHeads, 8)
	if !ok1 || !ok2 || codes > int(^uint(0)>>1)-scales {
		return nil, fmt.Errorf("%w: cache of %d pages of %d tokens × %d heads × %d: its bytes overflow an int", ErrInvalid, pages, c.PageSize, c.KVHeads, c.HeadDim)
	}
	if c.MaxSeqLen < 0 || c.MaxSeqLen > pages*c.PageSize {
		return nil, fmt.Errorf("%w: MaxSeqLen %d in a cache of %d tokens", ErrInvalid, c.MaxSeqLen, pages*c.PageSize)
	}
	if c.MaxSeqLen == 0 {
		c.MaxSeqLen = pages * c.PageSize
	}
	cfg := backend.PagedConfig{KVHeads: c.KVHeads, HeadDim: c.HeadDim, PageSize: c.PageSize, Pages: pages}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var bytes int64
	if d.host != nil {
		bytes = int64(codes + scales)
		if err := d.host.reserve(bytes, fmt.Sprintf("NewKVCache of %d pages of %d tokens × %d heads × %d", pages, c.PageSize, c.KVHeads, c.HeadDim)); err != nil {
			return nil, err
		}
	}
	kv, err := pb.NewPagedKV(cfg)
	if err != nil {
		if d.host != nil {
			d.host.release(bytes)
		}
		return nil, err
	}
	free := make([]int32, pages)
	for i := range free {
		free[i] = int32(pages - 1 - i) // page 0 on top
	}
	kc := &KVCache{dev: d, kv: kv, cfg: cfg, maxSeqLen: c.MaxSeqLen, free: free, refs: make([]int32, pages), seqs: map[SeqID]*kvSeq{}, bytes: bytes}
	if bytes > 0 {
		kc.cleanup = runtime.AddCleanup(kc, func(h *hostMem) { h.release(bytes) }, d.host)
	}
	return kc, nil
}

// KVCacheUsage describes a cache's occupancy.
type KVCacheUsage struct {
	// Sequences and Tokens: the live sequences and the tokens they hold.
	Sequences, Tokens int
	// Pages is the pool's size, FreePages the pages no sequence holds.
	Pages, FreePages int
	PageSize         int
	// Bytes is the memory the whole pool holds on its device.
	Bytes int64
	// TokensPerPageFilled is Tokens over the pages in use (PageSize when
	// every used page is full; lower means memory lost to partly filled
	// last pages; higher, pages that forked sequences share).
	TokensPerPageFilled float64
}

// Usage returns the cache's occupancy (zeros for a nil or closed cache).
func (c *KVCache) Usage() KVCacheUsage {
	if c == nil {
		return KVCacheUsage{}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.errClosed() != nil {
		return KVCacheUsage{}
	}
	u := KVCacheUsage{Sequences: len(c.seqs), Pages: c.cfg.Pages, FreePages: len(c.free), PageSize: c.cfg.PageSize}
	if c.kv != nil {
		u.Bytes = c.kv.Bytes()
	}
	for _, s := range c.seqs {
		u.Tokens += s.n
	}
	if used := u.Pages - u.FreePages; used > 0 {
		u.TokensPerPageFilled = float64(u.Tokens) / float64(used)
	}
	return u
}

func (c *KVCache) errClosed() error {
	if c.kv == nil {
		return errorf(ErrInvalid, "the kv cache of device %v is closed", c.dev)
	}
	return nil
}

// check returns an error for a nil cache or one not made by NewKVCache.
func (c *KVCache) check() error {
	if c == nil || c.dev == nil {
		return errorf(ErrInvalid, "a nil kv cache, or one not made by Device.NewKVCache")
	}
	return nil
}

// AddSequence starts an empty sequence and returns its ID.
func (c *KVCache) AddSequence() (SeqID, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.errClosed(); err != nil {
		return 0, err
	}
	id := c.next
	c.next++
	c.seqs[id] = &kvSeq{}
	return id, nil
}

// Len returns the number of tokens sequence id holds.
func (c *KVCache) Len(id SeqID) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.seqs[id]
	if !ok {
		return 0, fmt.Errorf("%w: no sequence %d in the cache", ErrInvalid, id)
	}
	return s.n, nil
}

// Drop removes sequence id and returns its pages to the pool.
func (c *KVCache) Drop(id SeqID) error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seqs[id]
	if !ok {
		return fmt.Errorf("%w: no sequence %d in the cache", ErrInvalid, id)
	}
	for i := len(s.pages) - 1; i >= 0; i-- {
		c.release(s.pages[i])
	}
	delete(c.seqs, id)
	s.dropped = true
	return nil
}

// release drops one sequence's hold on page pg, which returns to the pool
// when no sequence holds it.
func (c *KVCache) release(pg int32) {
	if c.refs[pg]--; c.refs[pg] == 0 {
		c.free = append(c.free, pg)
	}
}

// sharedTail reports whether s's next token goes into a page that another
// sequence also holds (a partly filled last page left shared by Truncate).
func (c *KVCache) sharedTail(s *kvSeq) bool {
	return s.n%c.cfg.PageSize != 0 && c.refs[s.pages[len(s.pages)-1]] > 1
}

// Truncate cuts sequence id back to its first n tokens (a rejected
// speculative draft, a rolled-back turn): Len becomes n, and the pages
// past the first n tokens return to the pool (those another sequence
// shares stay with it). 0 <= n <= Len; otherwise ErrInvalid.
func (c *KVCache) Truncate(id SeqID, n int) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.dev.inCapture() {
		return errorf(ErrUnsupported, "KVCache.Truncate inside a graph capture on %v (truncate between replays)", c.dev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.errClosed(); err != nil {
		return err
	}
	s, ok := c.seqs[id]
	if !ok {
		return fmt.Errorf("%w: no sequence %d in the cache", ErrInvalid, id)
	}
	if n < 0 || n > s.n {
		return fmt.Errorf("%w: truncating sequence %d of %d tokens to %d", ErrInvalid, id, s.n, n)
	}
	keep := (n + c.cfg.PageSize - 1) / c.cfg.PageSize
	for i := len(s.pages) - 1; i >= keep; i-- {
		c.release(s.pages[i])
	}
	c.mark++
	s.mark, s.from, s.to = c.mark, keep, len(s.pages)
	s.pages, s.n = s.pages[:keep], n
	c.syncGraphs()
	return nil
}

// Fork starts a new sequence holding what sequence id holds (prefix
// sharing, beam search) and returns its ID. The two share id's full pages,
// which neither writes again; the last, partly filled page is copied, so
// that appending to either never changes the other (a page the two still
// share after a Truncate is copied before either writes to it). A fork
// costs one page at most: with none free it is ErrCacheFull and nothing
// changes.
func (c *KVCache) Fork(id SeqID) (SeqID, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if c.dev.inCapture() {
		return 0, errorf(ErrUnsupported, "KVCache.Fork inside a graph capture on %v (fork between replays)", c.dev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.errClosed(); err != nil {
		return 0, err
	}
	s, ok := c.seqs[id]
	if !ok {
		return 0, fmt.Errorf("%w: no sequence %d in the cache", ErrInvalid, id)
	}
	ns := &kvSeq{pages: slices.Clone(s.pages), n: s.n}
	shared := ns.pages
	if s.n%c.cfg.PageSize != 0 {
		if len(c.free) == 0 {
			return 0, fmt.Errorf("%w: forking sequence %d needs a page, none of %d is free", ErrCacheFull, id, c.cfg.Pages)
		}
		last, pg := len(ns.pages)-1, c.free[len(c.free)-1]
		if err := c.kv.CopyPage(int(pg), int(ns.pages[last])); err != nil {
			return 0, err
		}
		c.free = c.free[:len(c.free)-1]
		ns.pages[last], c.refs[pg] = pg, 1
		shared = ns.pages[:last]
	}
	for _, pg := range shared {
		c.refs[pg]++
	}
	nid := c.next
	c.next++
	c.seqs[nid] = ns
	return nid, nil
}

// Close releases the cache's memory; every later call is an error, and so
// is closing a cache that a live Graph reads (Close the graph first).
func (c *KVCache) Close() error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.errClosed(); err != nil {
		return err
	}
	if c.graphs > 0 {
		return errorf(ErrInvalid, "closing a kv cache of device %v that %d live graph(s) read: Close them first", c.dev, c.graphs)
	}
	err := c.kv.Close()
	if errors.Is(err, ErrInvalid) { // the storage refused (a graph of the backend's still reads it)
		return err
	}
	if c.bytes > 0 {
		c.cleanup.Stop()
		c.dev.host.release(c.bytes)
		c.bytes = 0
	}
	c.kv, c.seqs, c.free, c.refs = nil, map[SeqID]*kvSeq{}, nil, nil
	return err
}

// lookup returns the distinct live sequences ids name, into dst.
func (c *KVCache) lookup(ids []SeqID, dst []*kvSeq) ([]*kvSeq, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no sequences", ErrInvalid)
	}
	dst = dst[:0]
	for i, id := range ids {
		s, ok := c.seqs[id]
		if !ok {
			return nil, errorf(ErrInvalid, "no sequence %d in the kv cache", id)
		}
		for _, prev := range ids[:i] {
			if prev == id {
				return nil, fmt.Errorf("%w: sequence %d named twice", ErrInvalid, id)
			}
		}
		dst = append(dst, s)
	}
	return dst, nil
}

// Append adds n new tokens to each of the sequences ids: k and v are float32
// device tensors [len(ids)][KVHeads][n][HeadDim] in either layout (BSHD:
// [len(ids)][n][KVHeads][HeadDim], a projection's output), row i of batch
// entry b going to sequence ids[b]. The rows are quantized into the
// sequences' pages (see the scale policy on KVCache). Everything is checked,
// and free pages counted, before anything is written: on error (a
// non-finite value, a full cache: ErrCacheFull) the cache is unchanged.
func (c *KVCache) Append(ids []SeqID, k, v *DeviceTensor) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.dev.inCapture() {
		return errorf(ErrUnsupported, "KVCache.Append inside a graph capture on %v (a graph replays device work only: append between replays)", c.dev)
	}
	if err := k.use(c.dev, "k"); err != nil {
		return err
	}
	if err := v.use(c.dev, "v"); err != nil {
		return err
	}
	if k.Precision() != FP32 || v.Precision() != FP32 {
		return fmt.Errorf("%w: append takes float32 keys and values (the cache quantizes them)", ErrInvalid)
	}
	if (k.m != nil) != (v.m != nil) {
		return fmt.Errorf("%w: k and v must both be in device memory or both in host memory", ErrInvalid)
	}
	kb, kh, kn, kd := k.Dims()
	vb, vh, vn, vd := v.Dims()
	if kb != vb || kh != vh || kn != vn || kd != vd || k.Layout() != v.Layout() {
		return fmt.Errorf("%w: k [%d][%d][%d][%d] %v and v [%d][%d][%d][%d] %v must match", ErrInvalid, kb, kh, kn, kd, k.Layout(), vb, vh, vn, vd, v.Layout())
	}
	if kb != len(ids) || kh != c.cfg.KVHeads || kd != c.cfg.HeadDim {
		return fmt.Errorf("%w: k and v are [%d][%d][%d][%d]; %d sequences of a cache of %d heads of dim %d need [%d][%d][n][%d]",
			ErrInvalid, kb, kh, kn, kd, len(ids), c.cfg.KVHeads, c.cfg.HeadDim, len(ids), c.cfg.KVHeads, c.cfg.HeadDim)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.errClosed(); err != nil {
		return err
	}
	seqs, err := c.lookup(ids, c.seqBuf)
	if err != nil {
		return err
	}
	c.seqBuf = seqs
	P := c.cfg.PageSize
	need := 0
	if kn > c.cfg.Pages*P { // (then no sum below overflows)
		return fmt.Errorf("%w: %d new tokens, the cache holds %d", ErrCacheFull, kn, c.cfg.Pages*P)
	}
	for i, s := range seqs {
		if s.n+kn > c.maxSeqLen {
			return fmt.Errorf("%w: sequence %d would hold %d tokens, MaxSeqLen is %d", ErrCacheFull, ids[i], s.n+kn, c.maxSeqLen)
		}
		need += (s.n+kn+P-1)/P - (s.n+P-1)/P
		if c.sharedTail(s) {
			need++
		}
	}
	if need > len(c.free) {
		return fmt.Errorf("%w: %d new pages needed, %d free of %d", ErrCacheFull, need, len(c.free), c.cfg.Pages)
	}
	c.page = freelist.Grow(c.page, kb*kn)
	c.slot = freelist.Grow(c.slot, kb*kn)
	c.cow = freelist.Grow(c.cow, kb)
	top := len(c.free) // pages are taken from free[:top] downwards
	for b, s := range seqs {
		c.cow[b] = -1
		if c.sharedTail(s) { // copy on write; the sequences keep the shared page until the append succeeds
			c.cow[b] = c.free[top-1]
			top--
			if err := c.kv.CopyPage(int(c.cow[b]), int(s.pages[len(s.pages)-1])); err != nil {
				return err
			}
		}
	}
	for b, s := range seqs {
		owned := len(s.pages)
		for t := range kn {
			pos := s.n + t
			pi := pos / P
			var pg int32
			switch {
			case pi == owned-1 && c.cow[b] >= 0:
				pg = c.cow[b]
			case pi < owned:
				pg = s.pages[pi]
			default: // a new page: the next free one, for this and the page's later tokens
				pg = c.free[top-1-(pi-owned)]
			}
			c.page[b*kn+t], c.slot[b*kn+t] = pg, int32(pos%P)
		}
		top -= (s.n+kn+P-1)/P - owned
	}
	c.app = backend.PagedAppend{B: kb, N: kn, Layout: k.Layout(), Page: c.page, Slot: c.slot}
	if k.m != nil { // in device memory: the storage reads (and checks) them there
		c.app.KBuf, c.app.VBuf = k.m.data, v.m.data
	} else {
		c.app.K, c.app.V = k.f.Data, v.f.Data
	}
	err = c.kv.Append(&c.app)
	c.app = backend.PagedAppend{}
	if err != nil {
		return err
	}
	top = len(c.free)
	c.mark++
	for b, s := range seqs {
		s.mark, s.from = c.mark, len(s.pages)
		if pg := c.cow[b]; pg >= 0 { // (the shared page is released below)
			last := len(s.pages) - 1
			s.pages[last], c.cow[b], c.refs[pg] = pg, s.pages[last], 1
			s.from = last
			top--
		}
	}
	for _, s := range seqs {
		add := (s.n+kn+P-1)/P - len(s.pages)
		for i := range add {
			pg := c.free[top-1-i]
			s.pages, c.refs[pg] = append(s.pages, pg), 1
		}
		top -= add
		s.n += kn
		s.to = len(s.pages)
	}
	c.free = c.free[:top]
	for _, pg := range c.cow[:kb] {
		if pg >= 0 {
			c.release(pg)
		}
	}
	c.syncGraphs()
	return nil
}

// Attention computes attention of new queries against the sequences ids:
// q is a float32 device tensor [len(ids)][Hq][Sq][HeadDim] (Hq a multiple
// of KVHeads, either layout), the queries of batch entry b being the last Sq
// positions of sequence ids[b] (append their keys and values first); out is
// float32 of q's shape and layout, lse nil or float32 [len(ids)][Hq][Sq][1]
// in layout BHSD.
// opts.Mask is NoMask (every query sees all of its sequence) or
// CausalLowerRight (query i sees positions up to its own, Len-Sq+i, as a
// chunk of new tokens or speculative drafts must); opts.Scale as for
// Attention; opts.Precision FP32 (the default) computes with the float32
// queries against the E4M3 cache, and FP8E4M3 lets the device run a chunk
// of many queries on its FP8 prefill kernel: the queries quantized to E4M3
// per (sequence, head) as Attention quantizes them, each sequence's keys
// and values brought to one scale per KV head (the largest of its pages'),
// FP8 attention's error and rules (a score factor beyond what float32
// holds is ErrInvalid, from the output's next read) at the prefill
// kernel's speed. The cuda device does so for a batch with enough query
// rows (B·Hq·Sq of 20 an SM or more, and Sq of 32 or more) and a head dim
// the kernel has, its
// sequences no shorter than Sq and of any lengths on Hopper GPUs (equally
// long ones on Ada), outside a Capture (a
// captured call computes as FP32, so a replay may differ from the same
// call made directly); elsewhere an FP8E4M3 call computes as FP32, and
// any other precision is ErrInvalid; SlidingWindow (which needs
// CausalLowerRight here), Softcap and
// Sinks as for Attention, a query's window position being its position in
// its sequence; SmoothK, Hadamard and OutlierChannels are not supported. A
// sequence with no tokens gives zeros and LSE -Inf; Sq beyond what a
// sequence with tokens holds is ErrInvalid (the queries would sit before
// its start). After the first call of a shape it allocates nothing on the
// cpu device.
func (c *KVCache) Attention(out, lse, q *DeviceTensor, ids []SeqID, opts *Options) error {
	return c.attend(out, lse, q, ids, nil, opts)
}

// attend is Attention, or AttentionVarlen where queries is not nil: it
// checks the tensors and stages those in host memory where the others are
// in device memory.
func (c *KVCache) attend(out, lse, q *DeviceTensor, ids []SeqID, queries []int, opts *Options) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := q.use(c.dev, "q"); err != nil {
		return err
	}
	if err := out.use(c.dev, "out"); err != nil {
		return err
	}
	if q.Precision() != FP32 || out.Precision() != FP32 {
		return fmt.Errorf("%w: q and out must be float32 tensors", ErrInvalid)
	}
	if q.m != nil || out.m != nil || lse != nil && lse.m != nil { // in device memory
		if lse != nil {
			if err := lse.use(c.dev, "lse"); err != nil {
				return err
			}
		}
		if q.m != nil && out.m != nil && (lse == nil || lse.m != nil) {
			return c.attention(out, lse, q, ids, queries, opts)
		}
		hq, _, err := staged(q)
		if err != nil {
			return err
		}
		hout, writeOut, err := staged(out)
		if err != nil {
			return err
		}
		hlse, writeLSE, err := staged(lse)
		if err != nil {
			return err
		}
		if err := c.attend(hout, hlse, hq, ids, queries, opts); err != nil {
			return err
		}
		return errors.Join(writeOut(), writeLSE())
	}
	return c.attention(out, lse, q, ids, queries, opts)
}

// attention is attend on checked tensors that are all in host memory or
// all in the device's (then passed to the storage as buffers).
func (c *KVCache) attention(out, lse, q *DeviceTensor, ids []SeqID, queries []int, opts *Options) error {
	b, hq, sq, d := q.Dims()
	if ob, oh, os, od := out.Dims(); ob != b || oh != hq || os != sq || od != d || out.Layout() != q.Layout() {
		return fmt.Errorf("%w: out [%d][%d][%d][%d] %v must match q [%d][%d][%d][%d] %v", ErrInvalid, ob, oh, os, od, out.Layout(), b, hq, sq, d, q.Layout())
	}
	var lseData []float32
	if lse != nil {
		if err := lse.use(c.dev, "lse"); err != nil {
			return err
		}
		if err := checkLSE(lse, q); err != nil {
			return err
		}
		if lse.f != nil {
			lseData = lse.f.Data
		}
	}
	o, err := c.dev.options(opts)
	if err != nil {
		return err
	}
	if o.transformsInputs() {
		return fmt.Errorf("%w: SmoothK, Hadamard and OutlierChannels on a kv cache", ErrUnsupported)
	}
	scale, err := resolveScale(o.Scale, d)
	if err != nil {
		return err
	}
	rows := sq // query rows a head, from q
	if queries != nil {
		if b != 1 {
			return fmt.Errorf("%w: a varlen q packs its sequences' queries into one batch entry, got %d", ErrInvalid, b)
		}
		if len(queries) != len(ids) {
			return fmt.Errorf("%w: %d query counts for %d sequences", ErrInvalid, len(queries), len(ids))
		}
		total, most := 0, 0 // (a negative count is the backend's to refuse)
		for _, n := range queries {
			total, most = total+n, max(most, n)
		}
		if total != rows || total > math.MaxInt32 {
			return fmt.Errorf("%w: the query counts add up to %d, q has %d rows", ErrInvalid, total, rows)
		}
		b, sq = len(ids), most
	}
	if b != len(ids) {
		return fmt.Errorf("%w: q has %d batch entries for %d sequences", ErrInvalid, b, len(ids))
	}
	variants := o.variants()
	if err := variants.Check(hq, o.Mask); err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.errClosed(); err != nil {
		return err
	}
	cc := c.calls.Get()
	defer c.calls.Put(cc)
	seqs, err := c.lookup(ids, cc.seqs)
	if err != nil {
		return err
	}
	cc.seqs = seqs
	for i, s := range seqs {
		n := sq
		if queries != nil {
			n = queries[i]
		}
		if s.n > 0 && s.n < n {
			return errorf(ErrInvalid, "%d queries are the last positions of sequence %d, which holds %d tokens (append the queries' keys and values first)", n, ids[i], s.n)
		}
	}
	// Inside a Capture the call gets lengths and a table of its own, as
	// wide as MaxSeqLen needs, in device memory that the cache keeps
	// current as the sequences change (syncGraphs); the backend plans the
	// launch for MaxSeqLen.
	rec := c.dev.recording()
	var gc *graphCacheCall
	var lens, table []int32
	per := 1
	if rec != nil && queries != nil {
		return fmt.Errorf("%w: a varlen kv-cache attention inside a Capture", ErrUnsupported)
	}
	if rec != nil && c.dev.mem != nil {
		if q.m == nil || out.m == nil || lse != nil && lse.m == nil {
			return fmt.Errorf("%w: a captured kv-cache attention takes tensors in device memory", ErrUnsupported)
		}
		tm, ok := c.kv.(backend.PagedTableMaker)
		if !ok {
			return errorf(ErrUnsupported, "the kv cache of device %v cannot keep its block tables in device memory for a graph", c.dev)
		}
		per = (c.maxSeqLen + c.cfg.PageSize - 1) / c.cfg.PageSize
		tables, err := tm.NewTables(b, per)
		if err != nil {
			return err
		}
		gc = &graphCacheCall{cache: c, ids: slices.Clone(ids), seqs: slices.Clone(seqs), lens: make([]int32, b), table: make([]int32, b*per), per: per, sq: sq, tables: tables}
		lens, table = gc.lens, gc.table
	} else {
		for _, s := range seqs {
			per = max(per, len(s.pages))
		}
		cc.lens = freelist.Grow(cc.lens, b)
		cc.table = freelist.Grow(cc.table, b*per)
		lens, table = cc.lens, cc.table
	}
	fillTable(seqs, lens, table, per)
	cc.p = backend.PagedProblem{
		B: b, Hq: hq, Hkv: c.cfg.KVHeads, Sq: sq, D: d, Scale: scale, Mask: o.Mask, Layout: q.Layout(),
		SeqLens: lens, BlockTable: table, PagesPerSeq: per, Variants: variants, Precision: o.Precision,
	}
	if queries != nil {
		cc.qStarts = freelist.Grow(cc.qStarts, b+1)
		cc.qStarts[0] = 0
		for i, n := range queries {
			cc.qStarts[i+1] = cc.qStarts[i] + int32(n)
		}
		cc.p.QStarts = cc.qStarts
	}
	if gc != nil {
		cc.p.MaxSeqLen, cc.p.Tables = c.maxSeqLen, gc.tables
	}
	if q.m != nil {
		cc.p.QBuf, cc.p.OutBuf = q.m.data, out.m.data
		if lse != nil {
			cc.p.LSEBuf = lse.m.data
		}
	} else {
		cc.p.Q, cc.p.Out, cc.p.LSE = q.f.Data, out.f.Data, lseData
	}
	err = c.kv.Attention(&cc.p)
	cc.p = backend.PagedProblem{}
	switch {
	case err != nil:
		if gc != nil {
			err = errors.Join(err, gc.tables.Free())
		}
	case gc != nil:
		rec.caches = append(rec.caches, gc)
		rec.keep = append(rec.keep, out, q)
		if lse != nil {
			rec.keep = append(rec.keep, lse)
		}
	case rec != nil: // a device without graphs: a replay runs the call again
		rec.recordCache(c, out, lse, q, ids, seqs, sq, o)
	}
	return err
}

// recordCache records a KVCache.Attention inside a capture on a device
// without graphs, for Replay to run again with the sequences as they are
// then: the call's sequences seqs (ids'), sq queries each, which Replay
// checks before it runs any call.
func (rec *capture) recordCache(c *KVCache, out, lse, q *DeviceTensor, ids []SeqID, seqs []*kvSeq, sq int, o Options) {
	ids = slices.Clone(ids)
	rec.caches = append(rec.caches, &graphCacheCall{cache: c, ids: ids, seqs: slices.Clone(seqs), sq: sq})
	// Stand-ins holding the tensors' data, which stays the graph's if a
	// tensor is freed later inside the capture (as on a device with graphs).
	stand := func(t *DeviceTensor) *DeviceTensor {
		if t == nil {
			return nil
		}
		return &DeviceTensor{dev: t.dev, f: t.f}
	}
	ho, hl, hq := stand(out), stand(lse), stand(q)
	rec.record(func() error { return c.Attention(ho, hl, hq, ids, &o) }, out, lse, q)
}

// fillTable writes each sequence's length into lens and its pages into its
// row of table (per entries a row, zeros past its pages; a dropped
// sequence's row is zeros and its length 0).
func fillTable(seqs []*kvSeq, lens, table []int32, per int) {
	for i, s := range seqs {
		row := table[i*per : (i+1)*per]
		if s.dropped {
			lens[i] = 0
			clear(row)
			continue
		}
		lens[i] = int32(s.n)
		clear(row[copy(row, s.pages):])
	}
}

// syncGraphs writes into the device tables of the live graphs' calls what
// the last mutation (c.mark) changed: the lengths, and each changed
// sequence's block-table entries [from, to). A write that fails leaves
// the call stale: its next replay writes everything first. The caller
// holds c.mu.
func (c *KVCache) syncGraphs() {
	for _, gc := range c.live {
		changed := false
		gc.spans = gc.spans[:0]
		for i, s := range gc.seqs {
			if s.mark != c.mark || s.dropped {
				continue
			}
			changed = true
			gc.lens[i] = int32(s.n)
			row := gc.table[i*gc.per : (i+1)*gc.per]
			for j := s.from; j < s.to; j++ {
				row[j] = 0
				if j < len(s.pages) {
					row[j] = s.pages[j]
				}
			}
			if s.from < s.to {
				gc.spans = append(gc.spans, [2]int{i*gc.per + s.from, i*gc.per + s.to})
			}
		}
		if changed && !gc.stale {
			gc.stale = gc.tables.Write(gc.lens, gc.table, gc.spans) != nil
		}
	}
}
