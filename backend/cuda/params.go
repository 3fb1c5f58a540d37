package cuda

import (
	"math"
	"reflect"

	"github.com/fp8attn/fp8attn/backend"
)

// params mirrors struct Params in kernels/common.cuh field for field; the
// kernels receive it by value (one __grid_constant__ parameter). Pointers
// are device addresses. Its layout is checked against the kernel's
// (fp8attn_params_layout) when the module loads, and against the PTX's copy
// of that array by a CPU test (offsets catch any change of a field's size or
// type; the order of two fields of one size is this comment's to keep).
type params struct {
	Q, K, V                                  uint64
	QScale, KScale, VScale                   uint64
	Out, LSE                                 uint64 // LSE may be 0
	QBatchStride, QHeadStride, QRowStride    int64
	KVBatchStride, KVHeadStride, KVRowStride int64
	OBatchStride, OHeadStride, ORowStride    int64
	B, Hq, Hkv, Sq, Sk, D, Group             int64
	Mask                                     int64
	// ScoreScale points to B·Hq floats: each query head's score factor in
	// the log2 domain (scoreScales).
	ScoreScale uint64
	// QImage, KImage and VImage are the Hopper kernel's packed tiles (set
	// once the pack kernels have run; 0 before, and for stages 1-8).
	QImage, KImage, VImage uint64
	// Window, Sinks and Softcap are the problem's attention variants
	// (backend.Variants), which stages 9 and 10 compute: the sliding
	// window (0 for none), the device address of Hq sink logits (0 for
	// none) and the cap (0 for none; the softcap entry points read it).
	Window  int64
	Sinks   uint64
	Softcap float32
	_       float32
	// SeqK, where not 0, is the device address of B int32 key counts, one
	// a batch entry (at most Sk, K's and V's key extent): stage 9 bounds
	// each entry's tiles and rows by its own (a paged prefill over
	// sequences of different lengths). An entry's codes past its count
	// must be finite through the key tile that holds its last key (the
	// gather writes zeros to the next prefillZeroKeys).
	SeqK uint64
}

// paramsLayout returns sizeof(params) followed by the offset of every field
// in declaration order: the form of the kernels' fp8attn_params_layout.
func paramsLayout() []int { return structLayout[params]() }

// structLayout returns sizeof(T) followed by the offset of every field.
func structLayout[T any]() []int {
	t := reflect.TypeFor[T]()
	out := []int{int(t.Size())}
	for i := range t.NumField() {
		out = append(out, int(t.Field(i).Offset))
	}
	return out
}

// deviceBuffers are the device addresses of one problem's tensors.
type deviceBuffers struct {
	Q, K, V, QScale, KScale, VScale, Out, LSE, ScoreScale uint64
	Sinks                                                 uint64 // 0 for none
}

// scoreScales returns, per (batch, query head), the factor the kernels
// multiply a code dot product by: backend.Problem.ScoreFactor (scale · Q
// descale · K descale in float64, the CPU backend's factor) times log2(e),
// rounded once to float32. Validate bounds it, so it is finite.
func scoreScales(p *backend.Problem) []float32 {
	out := make([]float32, p.B*p.Hq)
	for bh := range out {
		out[bh] = float32(p.ScoreFactor(bh) * math.Log2E)
	}
	return out
}

// newParams fills the parameter block for a validated problem whose tensors
// sit, densely packed in p.Layout, at the given device addresses: the
// kernels index every row through the batch, head and row strides.
func newParams(p *backend.Problem, buf deviceBuffers) params {
	s := p.Shape
	d := int64(s.D)
	qb, qh, qr := p.Layout.Strides(s.Hq, s.Sq, s.D)
	kb, kh, kr := p.Layout.Strides(s.Hkv, s.Sk, s.D)
	return params{
		Q: buf.Q, K: buf.K, V: buf.V, QScale: buf.QScale, KScale: buf.KScale, VScale: buf.VScale,
		Out: buf.Out, LSE: buf.LSE,
		QBatchStride: int64(qb), QHeadStride: int64(qh), QRowStride: int64(qr),
		KVBatchStride: int64(kb), KVHeadStride: int64(kh), KVRowStride: int64(kr),
		OBatchStride: int64(qb), OHeadStride: int64(qh), ORowStride: int64(qr),
		B: int64(s.B), Hq: int64(s.Hq), Hkv: int64(s.Hkv), Sq: int64(s.Sq), Sk: int64(s.Sk), D: d,
		Group: int64(s.Group()), Mask: int64(p.Mask),
		ScoreScale: buf.ScoreScale,
		Window:     int64(p.SlidingWindow), Sinks: buf.Sinks, Softcap: p.Softcap,
	}
}

// pagedParams mirrors struct PagedParams in kernels/paged.cu, and
// appendParams struct AppendParams, as params does Params (checked against
// fp8attn_paged_params_layout and fp8attn_append_params_layout).
type pagedParams struct {
	K, V                                     uint64 // the pool's codes
	KScale, VScale                           uint64 // per (page, KV head)
	Q                                        uint64
	Out, LSE                                 uint64 // LSE may be 0
	PartOut, PartLSE                         uint64 // the splits' partial rows
	SeqLens, BlockTable                      uint64
	Counters                                 uint64 // the warp-specialized kernel's per-item split counters (zeroWords)
	BatchStride, HeadStride, RowStride       int64  // of Q and Out
	B, Hq, Hkv, Sq, D, PageSize, PagesPerSeq int32
	Mask                                     int32 // 0 none, 2 causal lower-right
	RowBlocks, Splits, TilesPerSplit         int32
	ScoreScale                               float32 // scale·log2(e), rounded once from float64
	WSSlots                                  int32   // the warp-specialized kernel's ring slots in use (wsSlots)
	Ticket                                   uint64  // the warp-specialized kernel's units drawn at run time: 0, or a zeroWords word
	Window                                   int32   // sliding window (0: none)
	Softcap, InvSoftcap                      float32 // softcap·log2(e) and its reciprocal (0, 0: none)
	Sinks                                    uint64  // [Hq] float32 sink logits on the device, or 0
	QStarts, VarBlocks                       uint64  // a varlen batch's query offsets and (sequence, row block) pairs, or 0
	QTotal                                   int32   // a varlen batch's query rows a head
}

type appendParams struct {
	K, V                               uint64
	KScale, VScale                     uint64
	SrcK, SrcV                         uint64
	Runs                               uint64 // [n][5] int32: batch entry, first token, tokens, page, first slot
	BatchStride, HeadStride, RowStride int64  // of SrcK and SrcV
	Hkv, D, PageSize, NRuns            int32
}

// prefillParams mirrors struct PrefillParams (kernels/paged/params.cuh,
// checked against fp8attn_prefill_params_layout): fp8attn_paged_prefill_inputs's
// cache, sequences, queries and output tensors.
type prefillParams struct {
	K, V                                  uint64 // the pool's codes
	KScale, VScale                        uint64 // per (page, KV head)
	SeqLens, BlockTable                   uint64
	OutK, OutV                            uint64 // [B][Hkv][Sk][D] codes with the strides below
	OutKScale, OutVScale                  uint64 // [B][Hkv]
	BatchStride, HeadStride, RowStride    int64  // of OutK and OutV, in codes
	Q, QCodes, QScales                    uint64 // float32 queries, their codes (same layout), [B][Hq] scales
	QBatchStride, QHeadStride, QRowStride int64  // of Q and QCodes, in elements
	Words                                 uint64 // zeroWords: 2 + 3·B·Hq
	B, Hkv, D, PageSize, PagesPerSeq      int32
	Hq, Sq, QRows, QChunks                int32  // rows a query chunk, chunks a head
	Tiles                                 int32  // 32-key tiles of the longest sequence (of its V image, VImage)
	Sk                                    int32  // keys of OutK and OutV a (sequence, head): the longest sequence's
	VImage                                uint64 // 0, or stage 9's V image, written in place of OutV
	VIRows, VITile                        int32  // the image's rows (its kernel's head dim) and keys a tile (a power of two)
}

// prefillZeroKeys is what fp8attn_paged_prefill_inputs rounds a shorter
// sequence's length up to when it writes zeros past its last key (the
// 256 of kernels/paged/prefill_inputs.cuh): a multiple of every stage-9
// key tile and at least the one-tile form's two tiles, so that every tile
// stage 9 loads of the sequence holds finite codes (TestPrefillZeroKeys).
const prefillZeroKeys = 256

// fusedQuantParams mirrors hopper::FusedQuantParams (kernels/hopper/quant_pack.cuh):
// stage 9's params with float32 inputs in Q, K and V, and the score-factor
// check (quant_pack9 and the fused attention entry).
type fusedQuantParams struct {
	P            params
	Bad          uint64
	Scale, Limit float64
}

// quantLongParams mirrors hopper::QuantLongParams
// (kernels/hopper/quant_pack.cuh): the fused parameters, the long form's
// scratch words (device.zeroWords: 2 + 2 a head) and the rows of its
// chunks.
type quantLongParams struct {
	F         fusedQuantParams
	Words     uint64
	ChunkRows int32
	_         int32
}

// tensorMap is the driver's CUtensorMap: 128 opaque bytes.
type tensorMap [128]byte

// tensorParams mirrors struct TensorParams in kernels/hopper/tensors.cuh
// (checked against fp8attn_tensor_params_layout): the tensor maps of Q, K
// and V, the fused form's parameters, then the key split's parts (PartO,
// PartW; Splits 0 where the launch is not split). The C struct is 64-byte
// aligned, so its size is rounded up to 64: tensorLaunch holds it with the
// tail the driver copies.
type tensorParams struct {
	Q, K, V      tensorMap
	F            fusedQuantParams
	PartO, PartW uint64
	Splits       int64
	// The paged form's (pagedTiles; K then maps the cache's K pool): the
	// V pool, both pools' scales, the call's block table, its pages a
	// sequence and the pool's KV heads; and the float32 queries its
	// consumers encode (Q's map unread). The packed form's: its blocks'
	// items and the sequences' first packed rows (packedItems).
	VPages, KPageScale, VPageScale, BlockTable uint64
	PagesPerSeq, PageKVHeads                   int64
	QRows, Items, QStarts                      uint64
}

// tensorLaunch is the memory a tensor-form launch passes: tensorParams and
// room for the C struct's rounding (the driver copies sizeof(TensorParams)
// bytes from it).
type tensorLaunch struct {
	P tensorParams
	_ [64]byte
}

// tensorLayout is fp8attn_tensor_params_layout's form: sizeof, rounded up
// to the struct's 64-byte alignment, then the offsets of q, k, v and f.
func tensorLayout() []int {
	l := structLayout[tensorParams]()
	l[0] = (l[0] + 63) / 64 * 64
	return l
}

// quantLongLayout is quantLongParams' layout as
// fp8attn_quantlong_params_layout exports it: its size and the offsets of
// its named fields (the trailing padding has no C name).
func quantLongLayout() []int {
	l := structLayout[quantLongParams]()
	return l[:len(l)-1]
}

// checkParams mirrors struct CheckParams in kernels/paged.cu.
type checkParams struct {
	K, V uint64 // float32, N elements each
	Bad  uint64 // int32 flag
	N    int64
}

// quantTensor and quantParams mirror QuantTensor and QuantParams in
// kernels/quant.cuh, and scoreParams struct ScoreParams (checked against
// fp8attn_quant_params_layout, quantLayout's form, and
// fp8attn_score_params_layout).
type quantTensor struct {
	Src, Codes, Scales                 uint64
	BatchStride, HeadStride, RowStride int64 // elements
	B, H, S, D                         int32
}

type quantParams struct {
	T          [3]quantTensor
	Amax, Done uint64 // device scratch: a word each per head of all tensors
	N, Rows    int32
	IotaBase   uint32
}

// quantLayout is the form of fp8attn_quant_params_layout: sizeof and the
// offsets of T[0], T[1], Amax, Done, N, Rows, IotaBase, then the same for
// quantTensor.
func quantLayout() []int {
	p, t := structLayout[quantParams](), structLayout[quantTensor]()
	tsize := t[0]
	return append([]int{p[0], p[1], p[1] + tsize, p[2], p[3], p[4], p[5], p[6]}, t...)
}

type scoreParams struct {
	QScale, KScale, ScoreScale, Bad uint64
	Scale, Limit                    float64
	B, Hq, Hkv                      int32
}

// transformParams mirrors struct TransformParams in kernels/quant.cuh
// (checked against fp8attn_transform_params_layout).
type transformParams struct {
	X, Q, LSE, Means, Signs            uint64
	BatchStride, HeadStride, RowStride int64 // elements
	B, H, S, D, Group, N               int32
	Norm, Scale                        float32
}

// halfParams mirrors struct HalfParams in kernels/half.cuh (checked
// against fp8attn_half_params_layout).
type halfParams struct {
	X, Y   uint64 // float32 in, float16 out
	N      int64
	Factor float32
}

// layoutCheck names an int array a module exports (a parameter block's
// sizeof and offsets) and what the Go mirror says it must hold.
type layoutCheck struct {
	name string
	want []int
}

// quantLayouts, hopperLayouts and pagedLayouts are the parameter blocks of
// the quantization kernels and fp8attn_out_half (attention module), of quant_pack9 (the Hopper
// module) and of the paged module, checked
// at load (device.checkLayouts) and against the committed PTX by CPU tests.
var (
	quantLayouts = []layoutCheck{
		{"fp8attn_quant_params_layout", quantLayout()},
		{"fp8attn_score_params_layout", structLayout[scoreParams]()},
		{"fp8attn_transform_params_layout", structLayout[transformParams]()},
		{"fp8attn_half_params_layout", structLayout[halfParams]()},
	}
	hopperLayouts = []layoutCheck{
		{"fp8attn_fused_params_layout", structLayout[fusedQuantParams]()},
		{"fp8attn_tensor_params_layout", tensorLayout()},
		{"fp8attn_quantlong_params_layout", quantLongLayout()},
	}
	pagedLayouts = []layoutCheck{
		{"fp8attn_paged_params_layout", structLayout[pagedParams]()},
		{"fp8attn_append_params_layout", structLayout[appendParams]()},
		{"fp8attn_check_params_layout", structLayout[checkParams]()},
		{"fp8attn_prefill_params_layout", structLayout[prefillParams]()},
	}
)
