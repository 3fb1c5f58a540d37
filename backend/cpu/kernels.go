package cpu

import (
	"math"
	"unsafe"

	"github.com/fp8attn/fp8attn/fp8"
)

// The micro-kernels of the CPU backend, in pure Go. Each is the reference for
// the assembly versions that replace it (kernels_avx2_amd64.s,
// kernels_avx512_amd64.s). The assembly computes the same sums in the same
// order, but fuses each multiply-add into one rounding, so it equals these
// loops within the bound of that difference (rowMax: exactly; expSum: within
// the documented error of its vectorized exponential). TestKernels holds
// every kernel set to these loops.

// panel is the number of keys in one key block: the width of a transposed
// key panel and of a score row.
const panel = 64

// kernelSet is one implementation of the micro-kernels.
type kernelSet struct {
	// name: "go", "avx2", "avx512", "avx512bf16", "amx" or "amxfp8".
	name string
	// scores4 sets s[r*panel+j] = scale·(q row r · key j) for rows r < 4
	// and keys j < panel: four query rows against one key panel as the
	// set's transpose stored it (in the assembly sets transposed,
	// kt[i*panel+j] = key j's element i: scores4Go).
	scores4 func(s, q, kt []float32, d int, scale float32)
	// scoresKeys4, if not nil, is scores4 for the keys [lo, hi) of the
	// panel (0 <= lo < hi <= panel) and others of the panel beside them
	// (the assembly sets' keys: keyVectors8, keyBlocks), row r's scores at
	// s[r*stride:] (stride >= panel); s's other columns keep what they
	// held.
	scoresKeys4 func(s, q, kt []float32, d int, scale float32, lo, hi, stride int)
	// pv4 sets acc[r*d+c] = alpha[r]·acc[r*d+c] + Σ_{j<n} p[r*panel+j]·v[j*d+c]
	// for rows r < 4 and c < d: four output rows rescaled and then
	// accumulated over n value rows.
	pv4 func(acc, p, v []float32, d, n int, alpha *[4]float32)
	// pv4Strided, if not nil, is pv4 with row r's weights at p[r*stride:]
	// (stride >= 1) and n not bounded by a panel: pv4 is pv4Strided with
	// stride panel.
	pv4Strided func(acc, p, v []float32, d, n, stride int, alpha *[4]float32)
	// pv1 is pv4 for one row: acc[c] = alpha·acc[c] + Σ_{j<n} p[j]·v[j*d+c].
	pv1 func(acc, p, v []float32, d, n int, alpha float32)
	// rowMax returns the largest element of s (-Inf for none), or NaN if
	// s holds a NaN.
	rowMax func(s []float32) float32
	// expSum sets s[j] = e^(s[j]-m) (2^(s[j]-m) in a base2 set) and
	// returns the sum of the new s. It requires s[j] <= m or NaN (the
	// softmax domain, m the row maximum).
	expSum func(s []float32, m float32) float32
	// softcap, if not nil, softcaps a row of scores in one pass: bit for
	// bit softcapGo with the set's expSum (softcapRow's m2 and ck).
	softcap func(row []float32, m2, ck float32)
	// scoresSoftmax4, if not nil (base2 sets only), is scores4 followed
	// by the base-2 online-softmax step on the four full score rows (panel
	// scores each) at once, the scale folded into the exponentials: with
	// x the rows' dot products and c = scale > 0, for each row r, with
	// mNew = max(m[r], c·rowMax(x row r)) (for c > 0, the rounded product
	// of the largest dot product is the largest rounded product), alpha[r]
	// = 2^(m[r]-mNew) where l[r] != 0 or m[r] is NaN (else 1); row r =
	// 2^(c·x - mNew), c·x - mNew rounded once (fma32); l[r] = l[r]·alpha[r]
	// + its sum; m[r] = mNew. It rescales lazily: where every row's
	// c·rowMax is below m[r] + lazyTau (so never for m[r] = -Inf or NaN), m
	// stays, alpha is 1 and l[r] = l[r] + the row's sum (weights then reach
	// 2^lazyTau at most). alpha[4:8] is scratch. A NaN score, or an old
	// maximum that is NaN, makes l[r] NaN (and with it the row's output
	// and log-sum-exp), as it does in the step it replaces; m[r], alpha[r]
	// and the row's weights need not then be NaN too, and the other rows
	// may take either rescale (their weights, m and l agree all the same).
	// attendRows does the same with scores4, rowMax and expSum when it is
	// nil, and for a scale that is not positive (natural's kernels).
	scoresSoftmax4 func(s, q, kt []float32, d int, scale float32, m, l []float32, alpha *[8]float32)
	// scoresSoftmaxBounded4, if not nil (base2 sets only), is
	// scoresSoftmax4 on rows that see part of the panel, and on softcapped
	// scores (rowBounds): softmax4BoundedGo on the dot products. Row r's
	// keys outside [b.lo[r], b.hi[r]) get weight 0 exactly and leave its m
	// and l as they are; a row with no key must have a finite m or a NaN
	// one (an m of -Inf would make it NaN), which attendRows sees to.
	scoresSoftmaxBounded4 func(s, q, kt []float32, d int, scale float32, m, l []float32, alpha *[8]float32, b *rowBounds)
	// stepsBounded4, if not nil, is steps4 with each group's step
	// scoresSoftmaxBounded4's under its rowBounds (b: one a group, or one
	// for all) and its P·V over the keys [p0, p0+pn) of its bounds
	// (stepsBounded4 in reference_test.go). Where a row's keys are not all
	// of [p0, p0+pn), the others weigh 0 and their values must be finite.
	stepsBounded4 func(s, q, kt, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead, b []rowBounds)
	// steps4, if not nil, is the full steps of groups groups of four rows
	// against one full key panel (kt, and v its panel value rows): what
	// the Go function steps4 computes with scoresSoftmax4 and pv4 (q, acc,
	// m and l hold the groups' rows in turn), in one call. While it runs it
	// may prefetch pf's memory, spread over the groups.
	steps4 func(s, q, kt, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead)
	// pairs, if not nil, runs steps4 and stepsBounded4 with the dot
	// products on bfloat16 pairs (pairKernels), for query rows and key
	// panels whose elements bfloat16 holds exactly: those of an FP8
	// problem.
	pairs *pairKernels
	// allFinite reports whether no element of x is ±Inf or NaN
	// (allFiniteGo).
	allFinite func(x []float32) bool
	// scaleRows sets dst[r*stride+c] = f[r]·src[r*d+c] for rows r < len(f)
	// and c < d: the rows' outputs from their accumulators, in one call.
	scaleRows func(dst []float32, stride int, src []float32, d int, f []float32)
	// transpose builds a key panel from the n <= panel key rows of k (row
	// length d), keys n <= j < panel zero: transposed (kt[i*panel+j] =
	// k[j*d+i], transposePanel), or, where rowPanels is set, as rows.
	transpose func(kt, k []float32, d, n int)
	rowPanels bool
	// amx, if not nil, runs blocks of 16 full rows against full key panels
	// on AMX tiles (amx.go).
	amx *amxOps
	// amxExactOnly limits amx to problems whose operands are exact in
	// bfloat16 (FP8, call.amxExact); the others run the vector kernels.
	amxExactOnly bool
	// base2 says the set's softmax is in base 2: expSum and scoresSoftmax4
	// exponentiate by exp2_32's algorithm, whose vector form takes fewer
	// instructions than exp32's. attendRows then passes the kernels
	// scale·log2e, so that the scores, m and l are those of base e times
	// log2e, and takes the log-sum-exp as m·ln2 + ln l. A scale whose
	// base-2 form overflows float32, or is not positive, runs on natural
	// instead.
	base2   bool
	natural *kernelSet
}

// rowBounds is what a bounded step (kernelSet.scoresSoftmaxBounded4) adds
// to scoresSoftmax4's: row r of the group sees keys [lo[r], hi[r]) of the
// panel (0 <= lo <= hi <= panel), and where ck != 0 the scores are
// softcapped first, as softcapRow does it with m2 = -2/c and ck = c·log2e
// (c the softcap). The assembly reads its fields at fixed offsets (lo 0,
// hi 16, m2 32, ck 36: BOUNDED4X64; c0 40, n 44, p0 48, pn 52).
type rowBounds struct {
	lo, hi [4]int32
	m2, ck float32
	// c0 and n: the key vectors of 16 [c0, c0+n) that hold every row's
	// keys, which the AVX-512 kernels' wrappers set.
	c0, n int32
	// p0 and pn: the keys [p0, p0+pn) whose values a group's P·V adds
	// (stepsBounded4; pn > 0).
	p0, pn int32
}

// rowBoundsSize is the bytes of a rowBounds, as the assembly steps over
// them (amxAttend64: four a panel); the array below fails to compile
// where it is not.
const rowBoundsSize = 56

var _ = [1]struct{}{}[unsafe.Sizeof(rowBounds{})-rowBoundsSize]

// pairKernels compute the query-key dot products of an FP8 problem on
// bfloat16 pairs (AVX512_BF16's VDPBF16PS, two multiply-adds a lane per
// instruction where a float32 FMA does one). Every E4M3 value, the code
// values the kernels compute on, is exactly a bfloat16 (3 mantissa bits of
// 7, exponents -9 to 8 of -133 to 127), and the product of two is exact in
// float32, so a dot product on pairs is the float32 dot product's sum in
// another order: each pair's odd product first, then its even one, each
// addition rounded. Nothing else changes: the scores are the same dot
// products within float32 summation error, the rest of the step is steps4's.
type pairKernels struct {
	// rows writes dst[t] = pairOf(src[2t], src[2t+1]): query rows as
	// pairs (pairRowsGo).
	rows func(dst []uint32, src []float32)
	// panel writes the pairs of a transposed key panel kt of d rows (d
	// even): dst[t*panel+j] = pairOf(kt[2t*panel+j], kt[(2t+1)*panel+j])
	// (pairPanelGo).
	panel func(dst []uint32, kt []float32, d int)
	// steps4 is kernelSet.steps4 with q16 the groups' query rows as pairs
	// (d/2 words a row) and kt16 the key panel as pairs, d a multiple of
	// 16: the dot products as scores4PairsGo sums them.
	steps4 func(s []float32, q16, kt16 []uint32, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead)
	// stepsBounded4, if not nil, is kernelSet.stepsBounded4 on pairs (q16
	// and kt16 as steps4 takes them, d a multiple of 16): each group's dot
	// products of the whole panel as scores4PairsGo sums them, then the
	// float32 bounded step's softcap, mask and softmax on them (the bits
	// of softmaxBounded4AVX512) and P·V on its keys [p0, p0+pn)
	// (stepsBounded4Pairs in pairs_amd64_test.go).
	stepsBounded4 func(s []float32, q16, kt16 []uint32, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead, b []rowBounds)
}

// pairOf packs the bfloat16s of a and b, the low and the high half of the
// word: each float's high 16 bits, exact for E4M3 values (whose low 16 bits
// are zero); a NaN gets its quiet bit first, so that it stays a NaN.
func pairOf(a, b float32) uint32 {
	half := func(x float32) uint32 {
		u := math.Float32bits(x)
		if x != x {
			u |= 0x00400000
		}
		return u >> 16
	}
	return half(a) | half(b)<<16
}

// pairRowsGo is pairKernels.rows in Go.
func pairRowsGo(dst []uint32, src []float32) {
	for t := range dst {
		dst[t] = pairOf(src[2*t], src[2*t+1])
	}
}

// pairPanelGo is pairKernels.panel in Go.
func pairPanelGo(dst []uint32, kt []float32, d int) {
	for t := 0; t < d/2; t++ {
		for j := 0; j < panel; j++ {
			dst[t*panel+j] = pairOf(kt[2*t*panel+j], kt[(2*t+1)*panel+j])
		}
	}
}

// scores4PairsGo sets s[r*panel+j] to the dot product of query row r (q16,
// d/2 pairs a row) and key j of the pair panel kt16, unscaled, summed as
// VDPBF16PS sums it: pair by pair, the odd elements' product added first,
// each addition rounded (the products are exact for bfloat16 operands with
// at most 8 significant bits between them, as E4M3 values have).
func scores4PairsGo(s []float32, q16, kt16 []uint32, d int) {
	h := d / 2
	for r := range 4 {
		for j := range panel {
			var acc float32
			for t := range h {
				a, b := q16[r*h+t], kt16[t*panel+j]
				acc = fma32(fromBF16(uint16(a>>16)), fromBF16(uint16(b>>16)), acc)
				acc = fma32(fromBF16(uint16(a)), fromBF16(uint16(b)), acc)
			}
			s[r*panel+j] = acc
		}
	}
}

// ahead is memory that the work after a steps4 call reads first, which the
// call prefetches into the core's caches while it computes, so that those
// reads do not wait on memory between two calls: read is brought into L2,
// write into L1 for writing (it is about to be written whole). It changes
// no result. attendRows prefetches the inputs of a block's next key panel
// where no worker has built it yet, and during the last panel the next
// block's first inputs (panelInputs, blockEnd).
type ahead struct {
	read  [3]span
	write [2]span
}

// span is a range of memory to prefetch: bytes bytes from p.
type span struct {
	p     unsafe.Pointer
	bytes int
}

// floatSpan is x's memory as a span.
func floatSpan(x []float32) span {
	if len(x) == 0 {
		return span{}
	}
	return span{unsafe.Pointer(&x[0]), 4 * len(x)}
}

// codeSpan is x's memory as a span.
func codeSpan(x []fp8.E4M3) span {
	if len(x) == 0 {
		return span{}
	}
	return span{unsafe.Pointer(&x[0]), len(x)}
}

// lazyTau is how far (in base 2) a row maximum may rise above the running
// maximum m before a base2 set's scoresSoftmax4 moves m and rescales: as
// FlashAttention-4 does, most steps of a long row then skip the rescale
// factors and P·V's rescale of the accumulators. Weights are then at most
// 2^lazyTau, which leaves float32's relative precision as it is. The
// assembly holds the same value (softmax_amd64.h, lazyTau<>).
const lazyTau = 8

// goKernels are the portable kernels, always built.
var goKernels = kernelSet{
	name:        "go",
	scores4:     scores4Rows,
	scoresKeys4: scoresKeys4Rows,
	pv4:         pv4Go,
	pv4Strided:  pv4StridedGo,
	pv1:         pv1Go,
	rowMax:      rowMaxGo,
	expSum:      expSumGo,
	scaleRows:   scaleRowsGo,
	allFinite:   allFiniteGo,
	transpose:   rowPanel,
	rowPanels:   true,
}

// allFiniteGo is kernelSet.allFinite in Go: x-x is 0 for finite x, NaN
// for ±Inf and NaN.
func allFiniteGo(x []float32) bool {
	for _, v := range x {
		if v-v != 0 {
			return false
		}
	}
	return true
}

// scaleRowsGo is kernelSet.scaleRows in Go.
func scaleRowsGo(dst []float32, stride int, src []float32, d int, f []float32) {
	for r, fr := range f {
		o, a := dst[r*stride:r*stride+d], src[r*d:(r+1)*d]
		for c, x := range a {
			o[c] = x * fr
		}
	}
}

// rowPanel is the Go set's panel: the n key rows as they are, then zero
// rows up to panel keys. Scalar code reads rows faster than columns.
func rowPanel(kp, k []float32, d, n int) {
	kp = kp[:d*panel]
	copy(kp, k[:n*d])
	clear(kp[n*d:])
}

// scores4Rows is scores4 on a row panel (rowPanel): two query rows against
// four keys at a time, eight dot products sharing every load.
func scores4Rows(s, q, kp []float32, d int, scale float32) {
	scoresKeys4Rows(s, q, kp, d, scale, 0, panel, panel)
}

// keyBlocks returns the keys the neon set's scoresKeys4 computes for
// the keys [lo, hi) of a panel, the fewest blocks of 16 from a multiple of
// 8 that hold them, inside the panel: keys [k0, k0+16·blocks).
func keyBlocks(lo, hi int) (k0, blocks int) {
	k0 = lo &^ 7
	blocks = (hi - k0 + 15) / 16
	return min(k0, panel-16*blocks), blocks
}

// keyVectors8 returns the keys the avx2 set's scoresKeys4 computes for the
// keys [lo, hi) of a panel: the fewest vectors of 8 keys from the multiple
// of 8 at or below lo that hold them, but at least two (one block of 16,
// inside the panel): keys [k0, k0+8·n), n >= 2. The kernels take them as
// blocks of 16 keys, the last one 24 wide where n is odd, so that every
// block keeps the eight or more accumulators the FMA units need.
func keyVectors8(lo, hi int) (k0, n int) {
	k0 = lo &^ 7
	n = (hi - k0 + 7) / 8
	if n < 2 {
		return min(k0, panel-16), 2
	}
	return k0, n
}

// scoresKeys4Rows is the Go set's scoresKeys4: scores4Rows on the keys
// [lo, hi) rounded out to fours.
func scoresKeys4Rows(s, q, kp []float32, d int, scale float32, lo, hi, stride int) {
	if lo < 0 || hi <= lo || hi > panel || stride < panel {
		panic("cpu: scoresKeys4 with keys outside the panel")
	}
	s, q, kp = s[:3*stride+panel], q[:4*d], kp[:d*panel]
	for r := 0; r < 4; r += 2 {
		q0, q1 := q[r*d:(r+1)*d], q[(r+1)*d:(r+2)*d]
		s0, s1 := s[r*stride:r*stride+panel], s[(r+1)*stride:(r+1)*stride+panel]
		for j := lo &^ 3; j < hi; j += 4 {
			k0, k1, k2, k3 := kp[j*d:(j+1)*d], kp[(j+1)*d:(j+2)*d], kp[(j+2)*d:(j+3)*d], kp[(j+3)*d:(j+4)*d]
			var a00, a01, a02, a03, a10, a11, a12, a13 float32
			for i, x0 := range q0 {
				x1 := q1[i]
				y0, y1, y2, y3 := k0[i], k1[i], k2[i], k3[i]
				a00 += x0 * y0
				a01 += x0 * y1
				a02 += x0 * y2
				a03 += x0 * y3
				a10 += x1 * y0
				a11 += x1 * y1
				a12 += x1 * y2
				a13 += x1 * y3
			}
			s0[j], s0[j+1], s0[j+2], s0[j+3] = a00*scale, a01*scale, a02*scale, a03*scale
			s1[j], s1[j+1], s1[j+2], s1[j+3] = a10*scale, a11*scale, a12*scale, a13*scale
		}
	}
}

// pv4Go is pv4 in Go.
func pv4Go(acc, p, v []float32, d, n int, alpha *[4]float32) {
	pv4StridedGo(acc, p, v, d, n, panel, alpha)
}

// pv4StridedGo is pv4Strided in Go: two rows at a time share each value
// load, and four keys at a time share each accumulator load and store.
func pv4StridedGo(acc, p, v []float32, d, n, stride int, alpha *[4]float32) {
	acc, p, v = acc[:4*d], p[:3*stride+n], v[:n*d]
	for r := 0; r < 4; r += 2 {
		a0, a1 := acc[r*d:(r+1)*d], acc[(r+1)*d:(r+2)*d]
		w0, w1 := p[r*stride:r*stride+n], p[(r+1)*stride:(r+1)*stride+n]
		al0, al1 := alpha[r], alpha[r+1]
		for c := range a0 {
			a0[c] *= al0
			a1[c] *= al1
		}
		j := 0
		for ; j+4 <= n; j += 4 {
			x0, x1, x2, x3 := w0[j], w0[j+1], w0[j+2], w0[j+3]
			y0, y1, y2, y3 := w1[j], w1[j+1], w1[j+2], w1[j+3]
			v0, v1, v2, v3 := v[j*d:(j+1)*d], v[(j+1)*d:(j+2)*d], v[(j+2)*d:(j+3)*d], v[(j+3)*d:(j+4)*d]
			for c, e0 := range v0 {
				e1, e2, e3 := v1[c], v2[c], v3[c]
				a0[c] += x0*e0 + x1*e1 + x2*e2 + x3*e3
				a1[c] += y0*e0 + y1*e1 + y2*e2 + y3*e3
			}
		}
		for ; j < n; j++ {
			x, y, vj := w0[j], w1[j], v[j*d:(j+1)*d]
			for c, vc := range vj {
				a0[c] += x * vc
				a1[c] += y * vc
			}
		}
	}
}

// pv1Go is pv1 in Go.
func pv1Go(acc, p, v []float32, d, n int, alpha float32) {
	acc, p, v = acc[:d], p[:n], v[:n*d]
	for c := range acc {
		acc[c] *= alpha
	}
	for j, x := range p {
		for c, vc := range v[j*d : (j+1)*d] {
			acc[c] += x * vc
		}
	}
}

// rowMaxGo is rowMax in Go (the max builtin propagates NaN).
func rowMaxGo(s []float32) float32 {
	m := float32(math.Inf(-1))
	for _, x := range s {
		m = max(m, x)
	}
	return m
}

// expSumGo is expSum in Go, through exp32.
func expSumGo(s []float32, m float32) float32 {
	var sum float32
	for j, x := range s {
		e := exp32(x - m)
		s[j] = e
		sum += e
	}
	return sum
}

// expSum2Go is expSum in Go for the base-2 sets, through exp2_32.
func expSum2Go(s []float32, m float32) float32 {
	var sum float32
	for j, x := range s {
		e := exp2_32(x - m)
		s[j] = e
		sum += e
	}
	return sum
}

// transposePanelGo sets kt[i*panel+j] = k[(j-j0)*d+i] for keys j0 <= j < n
// (k holds the rows of keys j0..n-1, of length d) and zeroes the columns
// n <= j < panel.
func transposePanelGo(kt, k []float32, d, n, j0 int) {
	kt, k = kt[:d*panel], k[:(n-j0)*d]
	// Four keys at a time: four row reads, then four adjacent writes per i.
	j := j0
	for ; j+4 <= n; j += 4 {
		r := (j - j0) * d
		k0, k1, k2, k3 := k[r:r+d], k[r+d:r+2*d], k[r+2*d:r+3*d], k[r+3*d:r+4*d]
		for i, x := range k0 {
			t := kt[i*panel+j : i*panel+j+4]
			t[0], t[1], t[2], t[3] = x, k1[i], k2[i], k3[i]
		}
	}
	for ; j < n; j++ {
		for i, x := range k[(j-j0)*d : (j-j0+1)*d] {
			kt[i*panel+j] = x
		}
	}
	if n < panel {
		for i := range d {
			clear(kt[i*panel+n : (i+1)*panel])
		}
	}
}

// exp32 returns e^x in float32 arithmetic: x = n·ln2 + r with |r| <= ln2/2
// (ln2 split in two parts, Cody-Waite), e^r by a degree-6 Taylor polynomial
// (truncation error below 2^-26 on that interval), times 2^n through the
// exponent bits. Its error is at most 4 float32 ulps (3 measured) on normal results
// (TestExp32 measures it on a dense sample of [-87.3, 88.7]); exp32(-Inf) = 0,
// exp32(NaN) = NaN, and results below the normal range flush to 0.
func exp32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	if !(x < 88.72283) { // also NaN
		if x != x {
			return x
		}
		return float32(math.Inf(1))
	}
	if x < -87.33654 { // result below the smallest normal float32
		return 0
	}
	// n = x·log2e rounded to nearest (halves away from zero), by
	// truncation: cheaper than math.Floor, and |x·log2e| < 129 fits.
	t := x * log2e
	if t < 0 {
		t -= 0.5
	} else {
		t += 0.5
	}
	n := float32(int32(t))
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	// 2^n in two factors: n spans [-126, 128], one factor would not.
	n1 := int32(n) >> 1
	n2 := int32(n) - n1
	return p * math.Float32frombits(uint32(n1+127)<<23) * math.Float32frombits(uint32(n2+127)<<23)
}

// exp2_32 returns 2^x in float32 arithmetic, the algorithm of the base-2
// kernel sets' vector exponential (EXP16 in softmax_amd64.h, whose
// VREDUCEPS and VSCALEFPS do its first and last steps): f = x - floor(x) in
// [0, 1), 2^f = 1 + f·(c1 + f·(c2 + f·(c3 + f·(c4 + f·c5)))) with
// coefficients fitted for relative error on [0, 1) (8.3e-8 before float32
// rounding; the fit is in the logs of commit a384169), multiply-adds fused,
// times 2^floor(x), rounded once. TestExp2_32 measures its error against
// math.Exp2 on [-126, 128); below that, results are 2^f·2^floor(x) rounded
// to float32's subnormals (or 0), as VSCALEFPS rounds them; exp2_32(-Inf) =
// 0, exp2_32(NaN) = NaN.
func exp2_32(x float32) float32 {
	if !(x < 128) { // also NaN
		if x != x {
			return x
		}
		return float32(math.Inf(1))
	}
	if x < -160 { // also -Inf: 2^f·2^floor(x) < 2^-150 rounds to 0
		return 0
	}
	n := float32(math.Floor(float64(x)))
	f := x - n
	p := fma32(f, exp2C5, exp2C4)
	p = fma32(p, f, exp2C3)
	p = fma32(p, f, exp2C2)
	p = fma32(p, f, exp2C1)
	p = fma32(p, f, 1)
	if n < -126 {
		// Exact in float64, then rounded once to a float32 subnormal.
		return float32(float64(p) * math.Ldexp(1, int(n)))
	}
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// The coefficients of exp2_32's polynomial, as float32 (softmax_amd64.h
// holds the same bits).
const (
	exp2C1 = float32(0.6931512951850891)    // 0x3f31725d
	exp2C2 = float32(0.24016444385051727)   // 0x3e75edab
	exp2C3 = float32(0.055799927562475204)  // 0x3d648e77
	exp2C4 = float32(0.009017008356750011)  // 0x3c13bc13
	exp2C5 = float32(0.0018671402940526605) // 0x3af4bad5
)

// fma32 returns a·b+c rounded once to float32, as the assembly's fused
// multiply-adds do. The product is exact in float64; the sum is rounded to
// float64 to odd (Boldo and Melquiond: the neighbour with an odd last bit
// where the sum is inexact, its error found by TwoSum), after which
// rounding to float32, 29 bits shorter, gives the correctly rounded result.
func fma32(a, b, c float32) float32 {
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	t := s - p
	e := (p - (s - t)) + (q - t)
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// log32 returns ln x in float32 arithmetic, for the log-sum-exp of a row:
// x = 2^k·(1+f) with 1+f in [√2/2, √2), ln(1+f) = 2s + 2s³/3 + ... with
// s = f/(2+f) by FreeBSD's logf polynomial, plus k·ln2 in two parts. Its
// error is within 1 float32 ulp (TestLog32 measures it); zero, negative,
// subnormal, infinite and NaN inputs go through math.Log.
func log32(x float32) float32 {
	const (
		ln2hi = 6.9313812256e-01 // 0x3f317180
		ln2lo = 9.0580006145e-06 // 0x3717f7d1
		lg1   = 0.66666662693    // 0xaaaaaa.0p-24
		lg2   = 0.40000972152    // 0xccce13.0p-25
		lg3   = 0.28498786688    // 0x91e9ee.0p-25
		lg4   = 0.24279078841    // 0xf89e26.0p-26
	)
	ix := math.Float32bits(x)
	if ix-0x00800000 >= 0x7f800000-0x00800000 { // not a positive normal number
		return float32(math.Log(float64(x)))
	}
	k := int32(ix>>23) - 127
	ix &= 0x007fffff
	i := (ix + 0x95f64<<3) & 0x800000 // the mantissa is at least √2: halve it
	f := math.Float32frombits(ix|(i^0x3f800000)) - 1
	k += int32(i >> 23)
	s := f / (2 + f)
	dk := float32(k)
	z := s * s
	w := z * z
	r := z*(lg1+w*lg3) + w*(lg2+w*lg4)
	hfsq := 0.5 * f * f
	return dk*ln2hi - ((hfsq - (s*(hfsq+r) + dk*ln2lo)) - f)
}
