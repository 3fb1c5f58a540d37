package backend

import (
	"fmt"
	"math"

	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/checked"
)

// PageHeadroom is the value the first amax of a page is mapped below (a
// power of two at most this far below E4M3's largest finite value 448, so a
// page has room for values up to 448/PageHeadroom = 7 to 14 times larger than
// its first token's before it must be re-quantized).
const PageHeadroom = 64

// PageScale returns the dequantization scale a page gets for values of
// largest magnitude amax > 0: the smallest power of two s with amax <=
// s·PageHeadroom (at least the smallest float32).
func PageScale(amax float32) float32 {
	frac, exp := math.Frexp(float64(amax) / PageHeadroom)
	if frac == 0.5 {
		exp--
	}
	return float32(math.Ldexp(1, max(exp, -149)))
}

// PagedConfig describes a paged cache's storage.
type PagedConfig struct {
	// KVHeads and HeadDim: each token has KVHeads key rows and value rows
	// of HeadDim elements.
	KVHeads, HeadDim int
	// PageSize is the number of tokens in a page; Pages the number of pages
	// in the pool (the cache's capacity is Pages·PageSize tokens, shared by
	// all sequences).
	PageSize, Pages int
}

// Validate checks the configuration's sizes (positive, no overflow of the
// storage size). Errors wrap ErrInvalid.
func (c PagedConfig) Validate() error {
	if c.KVHeads <= 0 || c.HeadDim <= 0 || c.PageSize <= 0 || c.Pages <= 0 {
		return fmt.Errorf("%w: paged cache sizes must be positive, got KVHeads=%d HeadDim=%d PageSize=%d Pages=%d",
			ErrInvalid, c.KVHeads, c.HeadDim, c.PageSize, c.Pages)
	}
	if _, ok := checked.Mul(c.Pages, c.PageSize, c.KVHeads, c.HeadDim); !ok || c.Pages > math.MaxInt32 {
		return fmt.Errorf("%w: paged cache of %d pages of %d tokens × %d heads × %d overflows", ErrInvalid, c.Pages, c.PageSize, c.KVHeads, c.HeadDim)
	}
	return nil
}

// PagedBackend is implemented by backends that hold paged FP8 key/value
// caches.
type PagedBackend interface {
	// NewPagedKV allocates the storage of a cache (all pages, zeroed), or
	// returns an error wrapping ErrUnsupported for a configuration the
	// backend cannot hold (a page size its kernels do not take).
	NewPagedKV(c PagedConfig) (PagedKV, error)
}

// PagedKV is the storage of one paged cache. A paged key/value cache holds the keys and values of many sequences as
// FP8 E4M3 codes in fixed-size pages, as paged-attention servers do: a
// sequence owns a list of pages (its block table), grows by appending tokens
// into its last page, and returns its pages to the pool when it is dropped.
// Sequences may share full pages (a fork: prefix sharing, beam search); a
// shared page is never written, so the caller gives a sequence its own copy
// (CopyPage) before an append would write into one. The bookkeeping (which
// pages a sequence holds, how many sequences hold a page, how long a
// sequence is) is the caller's (package sdpa); the storage, its memory
// layout and the arithmetic belong to the backend, through PagedKV.
//
// Scale policy. Every (page, KV head) has its own dequantization scale for K
// and for V, a power of two chosen when the page receives its first token
// with a nonzero value: the smallest power of two s with amax ≤ s·PageHeadroom
// (so that later tokens up to 448/PageHeadroom times larger still fit). A
// token that would not fit (its amax above s·448) makes the backend
// re-quantize that page and head with the larger power of two: since both
// scales are powers of two, re-encoding a code is exact unless the value falls
// to the subnormal range, so growing a page's range costs one pass over one
// page (PageSize·D codes), never a silent saturation, and no work that grows
// with the cache length. Values are never saturated: appending a non-finite
// value is an error and writes nothing.
//
// PagedKV's methods are not safe for
// concurrent use with each other, except Attention with Attention (the
// caller serializes appends against attention).
type PagedKV interface {
	// Config returns the storage's configuration.
	Config() PagedConfig
	// Append quantizes a.K and a.V into the slots a names (see PagedAppend).
	// It checks everything before it writes anything.
	Append(a *PagedAppend) error
	// Attention computes p.Out (and p.LSE) for new queries against the
	// cached keys and values. p has passed Validate against Config.
	Attention(p *PagedProblem) error
	// CopyPage makes page dst hold what page src holds: every KV head's
	// key and value codes and their scales. It is how a sequence that
	// shares src with another gets a page of its own before either
	// writes to it (sdpa's KVCache.Fork and copy-on-write): src is not
	// changed. Pages out of range, or dst == src, are ErrInvalid.
	CopyPage(dst, src int) error
	// Bytes returns the memory the storage holds.
	Bytes() int64
	// Close releases the storage; the cache is unusable after it.
	Close() error
}

// PagedTableMaker is implemented by paged storages whose attention can
// read its sequence lengths and block table from device memory that the
// caller keeps current (PagedTables), so that a call captured into a graph
// (Capturer) replays with no host data: its launch reads the lengths and
// pages as they are when it runs, and the caller writes them only when a
// sequence changes. A storage of a backend with graphs must implement it:
// a captured call without Tables is ErrUnsupported there.
type PagedTableMaker interface {
	// NewTables returns device memory for the lengths of b sequences and
	// a block table of pagesPerSeq pages each, all zero until written.
	NewTables(b, pagesPerSeq int) (PagedTables, error)
}

// PagedTables holds the sequence lengths ([B] int32) and block table
// ([B][PagesPerSeq] int32) of attention calls in device memory (see
// PagedTableMaker and PagedProblem.Tables).
type PagedTables interface {
	// Write makes the lengths lens (B entries) and, for each span
	// [lo, hi) of spans (in increasing order, not overlapping), the
	// table's entries table[lo:hi] (table is the whole [B][PagesPerSeq]
	// table; entries outside the spans keep what they hold), copying to
	// the device only what differs from what was written before. The
	// first Write copies all of lens and table, whatever the spans. The
	// copies are ordered with the storage's calls and the graphs'
	// replays: a replay issued before Write reads the old values, one
	// issued after the new. The slices may be reused when Write returns.
	Write(lens, table []int32, spans [][2]int) error
	// Free releases the memory once the work issued so far has
	// completed. A second Free does nothing.
	Free() error
}

// PagedReader is implemented by paged storages that copy one (page, KV
// head) block out, for tests and inspection: its keys and values as E4M3
// codes, [PageSize][HeadDim] rows each (k and v must have that length), and
// their dequantization scales (0 for a block that has held only zeros). Two
// backends that quantize alike give the same codes and scales.
type PagedReader interface {
	ReadPage(page, head int, k, v []fp8.E4M3) (kScale, vScale float32, err error)
}

// PagedAppend is a batch of new tokens: for each of B sequences, N tokens,
// whose key and value rows are K and V, float32 [B][Hkv][N][D] in Layout
// (BSHD: [B][N][Hkv][D], a projection's output). Token t of sequence b goes
// to slot Slot[b*N+t] of page Page[b*N+t]. A token
// written to slot 0 starts its page: the page's old contents and scales are
// discarded (pages come back from dropped sequences).
type PagedAppend struct {
	B, N   int
	Layout Layout
	K, V   []float32
	// KBuf and VBuf, when KBuf is not nil, hold K and V in the device
	// memory of a Memory backend instead of the slices (which are then
	// nil). Only storages of such backends take them (others answer
	// ErrUnsupported); they check the values for NaN and ±Inf on the
	// device, before writing anything.
	KBuf, VBuf Buffer
	// Page and Slot have B·N entries.
	Page, Slot []int32
}

// Validate checks a against the cache configuration c: sizes, that every
// page and slot is in range, that no slot is named twice among a page's
// worth of neighbouring tokens (a sequence's run), and that K and V
// are finite (a non-finite value in a cache would poison every later call
// that reads it; values in device buffers are checked by the storage, on
// the device). Errors wrap ErrInvalid.
func (a *PagedAppend) Validate(c PagedConfig) error {
	if a == nil {
		return fmt.Errorf("%w: a nil append", ErrInvalid)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if a.B <= 0 || a.N <= 0 {
		return fmt.Errorf("%w: append of B=%d sequences of N=%d tokens", ErrInvalid, a.B, a.N)
	}
	if a.Layout != BHSD && a.Layout != BSHD {
		return fmt.Errorf("%w: unknown layout %d", ErrInvalid, int(a.Layout))
	}
	tokens, ok := checked.Mul(a.B, a.N)
	n, ok2 := checked.Mul(tokens, c.KVHeads, c.HeadDim)
	if !ok || !ok2 {
		return fmt.Errorf("%w: append of %d×%d tokens overflows", ErrInvalid, a.B, a.N)
	}
	if a.KBuf != nil {
		if a.K != nil || a.V != nil || a.VBuf == nil || a.KBuf.Len() < 4*int64(n) || a.VBuf.Len() < 4*int64(n) {
			return fmt.Errorf("%w: device buffers for K and V must replace the slices and hold %d elements", ErrInvalid, n)
		}
	} else if len(a.K) != n || len(a.V) != n {
		return fmt.Errorf("%w: K has %d and V %d elements, %d tokens × %d heads × %d need %d", ErrInvalid, len(a.K), len(a.V), tokens, c.KVHeads, c.HeadDim, n)
	}
	if len(a.Page) != tokens || len(a.Slot) != tokens {
		return fmt.Errorf("%w: %d pages and %d slots for %d tokens", ErrInvalid, len(a.Page), len(a.Slot), tokens)
	}
	for t := range tokens {
		if a.Page[t] < 0 || int(a.Page[t]) >= c.Pages || a.Slot[t] < 0 || int(a.Slot[t]) >= c.PageSize {
			return fmt.Errorf("%w: token %d goes to page %d slot %d (pool of %d pages of %d)", ErrInvalid, t, a.Page[t], a.Slot[t], c.Pages, c.PageSize)
		}
		for u := t + 1; u < tokens && u < t+c.PageSize; u++ { // a sequence's tokens are adjacent
			if a.Page[u] == a.Page[t] && a.Slot[u] == a.Slot[t] {
				return fmt.Errorf("%w: tokens %d and %d both go to page %d slot %d", ErrInvalid, t, u, a.Page[t], a.Slot[t])
			}
		}
	}
	for i, x := range [][]float32{a.K, a.V} {
		for j, e := range x {
			if math.IsNaN(float64(e)) || math.IsInf(float64(e), 0) {
				return fmt.Errorf("%w: %s element %d is %v; the cache holds finite values only", ErrInvalid, [...]string{"K", "V"}[i], j, e)
			}
		}
	}
	return nil
}

// PagedProblem is attention of new queries against a paged cache: B
// sequences, each with Sq new queries (Q, [B][Hq][Sq][D] in Layout), each
// seeing the first SeqLens[b] tokens of its cache, stored in the pages
// BlockTable[b*PagesPerSeq : ...] in order. Query i of sequence b is at
// position SeqLens[b]-Sq+i: with CausalLowerRight it sees keys
// 0..SeqLens[b]-Sq+i (the alignment of a chunk of new tokens already
// appended to the cache); with NoMask all SeqLens[b]. Out is [B][Hq][Sq][D]
// in Layout; LSE, if not nil, [B][Hq][Sq]. With QStarts the sequences have
// their own numbers of queries, packed into one tensor (a varlen batch).
type PagedProblem struct {
	B, Hq, Hkv, Sq, D int
	Scale             float32
	Mask              Mask
	Layout            Layout
	Q                 []float32
	SeqLens           []int32
	BlockTable        []int32
	PagesPerSeq       int
	Out, LSE          []float32
	// Variants as for Problem: a query's window position is its position
	// in its sequence (SeqLens[b]-Sq+i), and a window needs
	// CausalLowerRight.
	Variants
	// Precision FP32 (the zero value) computes with the float32 queries
	// as they are. FP8E4M3 lets a backend run the call as FP8 attention
	// where it has a faster kernel for it: the queries quantized to E4M3
	// with one scale per (sequence, query head), as Memory.Quantize does,
	// and each sequence's keys and values re-encoded at one scale per KV
	// head, the largest of its pages' (a page at a smaller scale rounded
	// as an append rounds a block whose scale grows). The error is then
	// FP8 attention's on the cache's values; a backend without such a
	// kernel computes as for FP32.
	Precision Precision
	// QBuf, OutBuf and LSEBuf, when QBuf is not nil, hold Q, Out and LSE
	// (LSEBuf may be nil: no LSE) in the device memory of a Memory backend
	// instead of the slices Q, Out and LSE (which are then nil): float32,
	// the same layouts. Only storages of such backends take them (others
	// answer ErrUnsupported); the call may return before the device is
	// done (an error then surfaces at the next read of a buffer).
	QBuf, OutBuf, LSEBuf Buffer
	// MaxSeqLen, when positive, is the longest any sequence may be when the
	// call runs, which may be later than the call: a call captured into a
	// graph (Capturer) reads the lengths and block table (Tables) again at
	// every replay, so its launch is planned for sequences up to MaxSeqLen tokens (at most
	// PagesPerSeq pages), not for the lengths at capture.
	MaxSeqLen int
	// QStarts, when not nil, makes the batch varlen (a mixed step of
	// continuous batching: chunks of prompts beside single decode tokens):
	// B+1 offsets, QStarts[0] = 0 and non-decreasing, sequence b having
	// the QStarts[b+1]-QStarts[b] queries (none allowed) in rows
	// QStarts[b].. of one packed batch: Q and Out are [1][Hq][T][D] in
	// Layout, T = QStarts[B], and LSE [1][Hq][T]; Sq is then the largest
	// count, and query i of sequence b is at position
	// SeqLens[b]-Queries(b)+i.
	QStarts []int32
	// Tables, when not nil, holds SeqLens and BlockTable in device memory
	// (made by the storage's NewTables for B sequences of PagesPerSeq
	// pages), and the call reads them there when it runs: SeqLens and
	// BlockTable are what it holds at the call, for checks and planning.
	// A call captured into a graph reads them there at every replay.
	Tables PagedTables
}

// Shape returns the problem's shape with Sk the longest sequence (zeros
// for a nil problem).
func (p *PagedProblem) Shape() Shape {
	if p == nil {
		return Shape{}
	}
	sk := 0
	for _, n := range p.SeqLens {
		sk = max(sk, int(n))
	}
	return Shape{B: p.B, Hq: p.Hq, Hkv: p.Hkv, Sq: p.Sq, Sk: sk, D: p.D}
}

// Queries returns the number of new queries of sequence b: Sq, or its
// count in a varlen batch (0 for a b outside the batch: below 0, or past
// both B and the lengths of a uniform batch, past the offsets of a varlen
// one).
func (p *PagedProblem) Queries(b int) int {
	switch {
	case p == nil || b < 0:
		return 0
	case p.QStarts != nil:
		if b+1 >= len(p.QStarts) {
			return 0
		}
		return int(p.QStarts[b+1] - p.QStarts[b])
	case b >= p.B && b >= len(p.SeqLens):
		return 0
	}
	return p.Sq
}

// Rows returns the query rows of each head of Q: B·Sq, or the packed
// batch's T (0 for a nil problem, or a varlen one without offsets).
func (p *PagedProblem) Rows() int {
	switch {
	case p == nil:
		return 0
	case p.QStarts != nil:
		if len(p.QStarts) == 0 {
			return 0
		}
		return int(p.QStarts[len(p.QStarts)-1])
	}
	return p.B * p.Sq
}

// seqRows says where sequence b's queries lie: in batch entry entry of
// Q, Out and LSE, from row first of entry's rows a head (b, 0 and Sq; in a
// varlen batch 0, QStarts[b] and T); ok is false for a b outside the
// batch.
func (p *PagedProblem) seqRows(b int) (entry, first, rows int, ok bool) {
	switch {
	case p == nil || b < 0 || b >= p.B:
		return 0, 0, 0, false
	case p.QStarts != nil:
		if b+1 >= len(p.QStarts) {
			return 0, 0, 0, false
		}
		return 0, int(p.QStarts[b]), p.Rows(), true
	}
	return b, 0, p.Sq, true
}

// QOffset returns the offset in Q (and Out) of query i of sequence b in
// query head h, for a problem Validate accepts (-1 for a b outside the
// batch).
func (p *PagedProblem) QOffset(b, h, i int) int {
	entry, first, rows, ok := p.seqRows(b)
	if !ok {
		return -1
	}
	return p.Layout.Offset(entry, h, first+i, p.Hq, rows, p.D)
}

// LSEIndex returns the index in LSE of query i of sequence b in query
// head h, for a problem Validate accepts (-1 for a b outside the batch).
func (p *PagedProblem) LSEIndex(b, h, i int) int {
	entry, first, rows, ok := p.seqRows(b)
	if !ok {
		return -1
	}
	return (entry*p.Hq+h)*rows + first + i
}

// VisibleKeys returns the number of cached keys query i of sequence b sees
// (0 for a sequence the problem does not have).
func (p *PagedProblem) VisibleKeys(b, i int) int {
	if p == nil || b < 0 || b >= len(p.SeqLens) {
		return 0
	}
	n := int(p.SeqLens[b])
	if p.Mask == CausalLowerRight {
		return max(0, min(n, n-p.Queries(b)+i+1))
	}
	return n
}

// Validate checks p against the cache configuration c. Errors wrap
// ErrInvalid.
func (p *PagedProblem) Validate(c PagedConfig) error {
	if p == nil {
		return fmt.Errorf("%w: a nil paged problem", ErrInvalid)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if p.B <= 0 || p.Hq <= 0 || p.Sq <= 0 || p.PagesPerSeq <= 0 {
		return fmt.Errorf("%w: paged attention sizes must be positive, got B=%d Hq=%d Sq=%d PagesPerSeq=%d", ErrInvalid, p.B, p.Hq, p.Sq, p.PagesPerSeq)
	}
	if p.Hkv != c.KVHeads || p.D != c.HeadDim {
		return fmt.Errorf("%w: problem has %d KV heads of dim %d, the cache %d of dim %d", ErrInvalid, p.Hkv, p.D, c.KVHeads, c.HeadDim)
	}
	if p.Hq%p.Hkv != 0 {
		return fmt.Errorf("%w: query heads (%d) must be a multiple of key/value heads (%d)", ErrInvalid, p.Hq, p.Hkv)
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) {
		return fmt.Errorf("%w: scale is %v", ErrInvalid, p.Scale)
	}
	if p.Mask != NoMask && p.Mask != CausalLowerRight {
		return fmt.Errorf("%w: a cache takes NoMask or CausalLowerRight, not %v", ErrInvalid, p.Mask)
	}
	if p.Layout != BHSD && p.Layout != BSHD {
		return fmt.Errorf("%w: unknown layout %d", ErrInvalid, int(p.Layout))
	}
	if p.Precision != FP32 && p.Precision != FP8E4M3 {
		return fmt.Errorf("%w: unknown precision %d", ErrInvalid, int(p.Precision))
	}
	if err := p.Variants.Check(p.Hq, p.Mask); err != nil {
		return err
	}
	if err := p.checkQStarts(); err != nil {
		return err
	}
	nq, ok := checked.Mul(p.Rows(), p.Hq, p.D)
	nl, okl := checked.Mul(p.Rows(), p.Hq)
	nt, ok2 := checked.Mul(p.B, p.PagesPerSeq)
	if _, okb := checked.Mul(p.B, p.Hq, p.Sq, p.D); !ok || !okl || !ok2 || !okb {
		return fmt.Errorf("%w: paged problem B=%d Hq=%d Sq=%d D=%d PagesPerSeq=%d overflows", ErrInvalid, p.B, p.Hq, p.Sq, p.D, p.PagesPerSeq)
	}
	if p.QBuf != nil {
		if p.Q != nil || p.Out != nil || p.LSE != nil || p.OutBuf == nil || p.QBuf.Len() < 4*int64(nq) || p.OutBuf.Len() < 4*int64(nq) ||
			p.LSEBuf != nil && p.LSEBuf.Len() < 4*int64(nl) {
			return fmt.Errorf("%w: device buffers for Q, Out and LSE must replace the slices and hold %d elements (LSE %d)", ErrInvalid, nq, nl)
		}
	} else {
		if len(p.Q) != nq || len(p.Out) != nq {
			return fmt.Errorf("%w: Q has %d and Out %d elements, shape needs %d", ErrInvalid, len(p.Q), len(p.Out), nq)
		}
		if p.LSE != nil && len(p.LSE) != nl {
			return fmt.Errorf("%w: LSE has %d elements, shape needs %d", ErrInvalid, len(p.LSE), nl)
		}
	}
	if p.MaxSeqLen < 0 || int64(p.MaxSeqLen) > int64(p.PagesPerSeq)*int64(c.PageSize) {
		return fmt.Errorf("%w: MaxSeqLen %d with %d pages of %d tokens a sequence", ErrInvalid, p.MaxSeqLen, p.PagesPerSeq, c.PageSize)
	}
	if len(p.SeqLens) != p.B || len(p.BlockTable) != nt {
		return fmt.Errorf("%w: %d sequence lengths and %d block-table entries for %d sequences of %d pages", ErrInvalid, len(p.SeqLens), len(p.BlockTable), p.B, p.PagesPerSeq)
	}
	for b, n := range p.SeqLens {
		if n < 0 || int64(n) > int64(p.PagesPerSeq)*int64(c.PageSize) || p.MaxSeqLen > 0 && int(n) > p.MaxSeqLen {
			return fmt.Errorf("%w: sequence %d has %d tokens, its %d pages hold %d (MaxSeqLen %d)", ErrInvalid, b, n, p.PagesPerSeq, p.PagesPerSeq*c.PageSize, p.MaxSeqLen)
		}
		used := (int(n) + c.PageSize - 1) / c.PageSize
		for _, pg := range p.BlockTable[b*p.PagesPerSeq : b*p.PagesPerSeq+used] {
			if pg < 0 || int(pg) >= c.Pages {
				return fmt.Errorf("%w: sequence %d names page %d of a pool of %d", ErrInvalid, b, pg, c.Pages)
			}
		}
	}
	return nil
}

// checkQStarts checks a varlen batch's offsets (none: nothing to check):
// B+1 of them from 0, non-decreasing, the largest count Sq.
func (p *PagedProblem) checkQStarts() error {
	if p.QStarts == nil {
		return nil
	}
	if len(p.QStarts) != p.B+1 || p.QStarts[0] != 0 {
		return fmt.Errorf("%w: a varlen batch of %d sequences takes %d query offsets from 0, got %d", ErrInvalid, p.B, p.B+1, len(p.QStarts))
	}
	most := 0
	for b := range p.B {
		n := int(p.QStarts[b+1]) - int(p.QStarts[b])
		if n < 0 {
			return fmt.Errorf("%w: query offsets %d then %d (sequence %d)", ErrInvalid, p.QStarts[b], p.QStarts[b+1], b)
		}
		most = max(most, n)
	}
	if most != p.Sq {
		return fmt.Errorf("%w: a varlen batch's Sq must be its largest count, %d, got %d", ErrInvalid, most, p.Sq)
	}
	return nil
}

// CheckCopyPage checks CopyPage's arguments against c. Errors wrap
// ErrInvalid.
func (c PagedConfig) CheckCopyPage(dst, src int) error {
	if dst < 0 || dst >= c.Pages || src < 0 || src >= c.Pages || dst == src {
		return fmt.Errorf("%w: CopyPage(%d, %d) in a pool of %d pages", ErrInvalid, dst, src, c.Pages)
	}
	return nil
}
