//go:build !purego

package cpu

import (
	"math"

	"golang.org/x/sys/cpu"
)

// kernelSets lists the kernel sets this CPU runs, the default first.
var kernelSets = amd64KernelSets()

func amd64KernelSets() []*kernelSet {
	var sets []*kernelSet
	avx2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA
	avx512 := avx2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ // DQ: VREDUCEPS
	// The FP8 score products on bfloat16 pairs (avx512bf16) measured
	// faster than float32 FMAs on AMD's Zen 4 and slower on Intel's Emerald
	// Rapids (docs/design/cpu.md): the default on AMD, selectable elsewhere.
	bf16 := avx512 && cpu.X86.HasAVX512BF16
	amx := avx512 && hasAMX()
	// FP8 blocks on AMX tiles with exact operands (amxfp8) measured 1.2x
	// the avx512 set's FP8 speed and more on Emerald Rapids
	// (docs/design/cpu.md): the default where the tiles are granted; FP32
	// runs avx512 there.
	if amx {
		sets = append(sets, &amxFP8Kernels)
	}
	if bf16 && isAMD() {
		sets = append(sets, &avx512BF16Kernels)
	}
	if avx512 {
		sets = append(sets, &avx512Kernels)
	}
	if bf16 && !isAMD() {
		sets = append(sets, &avx512BF16Kernels)
	}
	// The AMX path for every problem is validated but measured slower than
	// AVX-512 for FP32 at one thread (docs/design/cpu.md): selectable as ISA
	// "amx", never the default.
	if amx {
		sets = append(sets, &amxKernels)
	}
	if avx2 {
		sets = append(sets, &avx2Kernels)
	}
	return append(sets, &goKernels)
}

// avx2Kernels: 8-wide AVX2 with FMA.
var avx2Kernels = kernelSet{
	name:        "avx2",
	scores4:     scores4AVX2,
	scoresKeys4: scoresKeys4AVX2,
	pv4:         pv4AVX2,
	pv4Strided:  pv4StridedAVX2,
	pv1:         pv1AVX2,
	rowMax:      rowMaxAVX2,
	expSum:      expSumAVX2,
	softcap:     softcapAVX2,
	scaleRows:   scaleRowsAVX2,
	allFinite:   allFiniteGo,
	transpose:   transposePanelAVX2,
}

// avx512Kernels: 16-wide AVX-512F, with masks for partial rows.
var avx512Kernels = kernelSet{
	name:                  "avx512",
	scores4:               scores4AVX512,
	pv4:                   pv4AVX512,
	pv1:                   pv1AVX512,
	rowMax:                rowMaxAVX512,
	expSum:                expSumAVX512,
	scoresSoftmax4:        scoresSoftmax4AVX512,
	steps4:                steps4AVX512,
	scoresSoftmaxBounded4: scoresSoftmaxBounded4AVX512,
	stepsBounded4:         stepsBounded4AVX512,
	scaleRows:             scaleRowsAVX512,
	allFinite:             allFiniteAVX512,
	transpose:             transposePanelAVX512,
	base2:                 true,
	natural:               &avx2Kernels,
}

// steps4AVX512 is kernelSet.steps4 in assembly where d is a multiple of 16
// (pv4x16AVX512 then covers every column).
func steps4AVX512(s, q, kt, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead) {
	if groups <= 0 {
		return
	}
	if d%16 != 0 {
		for g := range groups {
			r := 4 * g
			scoresSoftmax4AVX512(s, q[r*d:(r+4)*d], kt, d, scale, m[r:r+4], l[r:r+4], alpha)
			pv4AVX512(acc[r*d:(r+4)*d], s, v, d, panel, (*[4]float32)(alpha[:4]))
		}
		return
	}
	_, _, _, _, _ = s[4*panel-1], q[4*groups*d-1], kt[d*panel-1], v[panel*d-1], acc[4*groups*d-1]
	_, _ = m[4*groups-1], l[4*groups-1]
	steps4x64AVX512(&s[0], &q[0], &kt[0], d, scale, &m[0], &l[0], &alpha[0], &v[0], &acc[0], groups, prefetchPlan(pf, groups))
}

// stepsBounded4AVX512 is kernelSet.stepsBounded4 in assembly where d is a
// multiple of 16, else group by group.
func stepsBounded4AVX512(s, q, kt, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead, b []rowBounds) {
	if groups <= 0 {
		return
	}
	stride, keys := boundedRun(b, groups)
	for i := range b {
		keyVectors(&b[i])
	}
	if d%16 != 0 {
		for g := range groups {
			r, bg := 4*g, &b[0]
			if stride != 0 {
				bg = &b[g]
			}
			scoresSoftmaxBounded4AVX512(s, q[r*d:(r+4)*d], kt, d, scale, m[r:r+4], l[r:r+4], alpha, bg)
			pv4AVX512(acc[r*d:(r+4)*d], s[bg.p0:], v[int(bg.p0)*d:], d, int(bg.pn), (*[4]float32)(alpha[:4]))
		}
		return
	}
	_, _, _, _, _ = s[4*panel-1], q[4*groups*d-1], kt[d*panel-1], v[keys*d-1], acc[4*groups*d-1]
	_, _ = m[4*groups-1], l[4*groups-1]
	stepsBounded4x64AVX512(&s[0], &q[0], &kt[0], d, scale, &m[0], &l[0], &alpha[0], &v[0], &acc[0], groups, prefetchPlan(pf, groups), &b[0], stride)
}

// avx512BF16Kernels is avx512Kernels with the FP8 score products on
// bfloat16 pairs (pairKernels: AVX512_BF16's VDPBF16PS), for CPUs that have
// AVX512_BF16 (Intel from Cooper Lake and Sapphire Rapids, AMD from Zen 4).
var avx512BF16Kernels = withPairs()

func withPairs() kernelSet {
	ks := avx512Kernels
	ks.name = "avx512bf16"
	ks.pairs = &pairKernels{rows: pairRowsAVX512Checked, panel: pairPanelAVX512Checked, steps4: steps4PairsAVX512,
		stepsBounded4: stepsBounded4PairsAVX512}
	return ks
}

// cpuVendor returns CPUID leaf 0's vendor string registers.
//
//go:noescape
func cpuVendor() (ebx, edx, ecx uint32)

// isAMD reports whether the CPU's vendor string is "AuthenticAMD".
func isAMD() bool {
	b, d, c := cpuVendor()
	return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163 // "Auth" "enti" "cAMD"
}

// steps4PairsAVX512 is pairKernels.steps4 (d a multiple of 16).
func steps4PairsAVX512(s []float32, q16, kt16 []uint32, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead) {
	if groups <= 0 {
		return
	}
	if d%16 != 0 {
		panic("cpu: steps4Pairs with d not a multiple of 16")
	}
	_, _, _, _, _ = s[4*panel-1], q16[2*groups*d-1], kt16[d/2*panel-1], v[panel*d-1], acc[4*groups*d-1]
	_, _ = m[4*groups-1], l[4*groups-1]
	steps4x64PairsAVX512(&s[0], &q16[0], &kt16[0], d, scale, &m[0], &l[0], &alpha[0], &v[0], &acc[0], groups, prefetchPlan(pf, groups))
}

// boundedRun checks the rowBounds of a bounded run of groups groups (one
// for all, or one a group) and returns the bytes between two groups'
// (0 or rowBoundsSize) and the keys [0, keys) whose values their P·V
// reads; it panics where a group's P·V keys leave the panel.
func boundedRun(b []rowBounds, groups int) (stride, keys int) {
	stride = rowBoundsSize
	if len(b) == 1 {
		stride = 0
	} else {
		_ = b[groups-1]
	}
	keys = 1
	for i := range b {
		if p0, pn := b[i].p0, b[i].pn; p0 < 0 || pn <= 0 || p0+pn > panel {
			panic("cpu: bounded steps with keys outside the panel")
		}
		keys = max(keys, int(b[i].p0+b[i].pn))
	}
	return stride, keys
}

// stepsBounded4PairsAVX512 is pairKernels.stepsBounded4 (d a multiple of
// 16).
func stepsBounded4PairsAVX512(s []float32, q16, kt16 []uint32, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, pf ahead, b []rowBounds) {
	if groups <= 0 {
		return
	}
	if d%16 != 0 {
		panic("cpu: stepsBounded4Pairs with d not a multiple of 16")
	}
	stride, keys := boundedRun(b, groups)
	_, _, _, _, _ = s[4*panel-1], q16[2*groups*d-1], kt16[d/2*panel-1], v[keys*d-1], acc[4*groups*d-1]
	_, _ = m[4*groups-1], l[4*groups-1]
	stepsBounded4x64PairsAVX512(&s[0], &q16[0], &kt16[0], d, scale, &m[0], &l[0], &alpha[0], &v[0], &acc[0], groups, prefetchPlan(pf, groups), &b[0], stride)
}

// pairRowsAVX512Checked is pairKernels.rows: the assembly on whole vectors
// of 16 floats, Go on the rest.
func pairRowsAVX512Checked(dst []uint32, src []float32) {
	if len(dst) == 0 {
		return
	}
	_ = src[2*len(dst)-1]
	n := len(dst) &^ 7
	if n > 0 {
		pairRowsAVX512(&dst[0], &src[0], n)
	}
	pairRowsGo(dst[n:], src[2*n:])
}

// pairPanelAVX512Checked is pairKernels.panel.
func pairPanelAVX512Checked(dst []uint32, kt []float32, d int) {
	if d < 2 {
		return
	}
	_, _ = dst[d/2*panel-1], kt[d&^1*panel-1]
	pairPanelAVX512(&dst[0], &kt[0], d/2)
}

func scoresSoftmax4AVX512(s, q, kt []float32, d int, scale float32, m, l []float32, alpha *[8]float32) {
	_, _, _, _, _ = s[4*panel-1], q[4*d-1], kt[d*panel-1], m[3], l[3]
	scoresSoftmax4x64AVX512(&s[0], &q[0], &kt[0], d, scale, &m[0], &l[0], &alpha[0])
}

func scoresSoftmaxBounded4AVX512(s, q, kt []float32, d int, scale float32, m, l []float32, alpha *[8]float32, b *rowBounds) {
	_, _, _, _, _ = s[4*panel-1], q[4*d-1], kt[d*panel-1], m[3], l[3]
	keyVectors(b)
	scoresSoftmaxBounded4x64AVX512(&s[0], &q[0], &kt[0], d, scale, &m[0], &l[0], &alpha[0], b)
}

// keyVectors sets b's c0 and n: the key vectors of 16 that hold every
// row's keys (at least one).
func keyVectors(b *rowBounds) {
	lo, hi := b.lo[0], b.hi[0]
	for r := 1; r < 4; r++ {
		lo, hi = min(lo, b.lo[r]), max(hi, b.hi[r])
	}
	c0 := min(lo/16, 3)
	b.c0, b.n = c0, max(c0+1, min((hi+15)/16, 4))-c0
}

// The wrappers check every slice bound the assembly relies on, so that a
// wrong call panics in Go instead of reading or writing out of bounds.

func scores4AVX2(s, q, kt []float32, d int, scale float32) {
	_, _, _ = s[4*panel-1], q[4*d-1], kt[d*panel-1]
	scores4x64AVX2(&s[0], &q[0], &kt[0], d, scale, panel/16, panel)
}

// scoresKeys4AVX2 is kernelSet.scoresKeys4: scores4AVX2 on the key vectors
// that hold the keys [lo, hi) (keyVectors8), the other columns of s
// untouched.
func scoresKeys4AVX2(s, q, kt []float32, d int, scale float32, lo, hi, stride int) {
	if lo < 0 || hi <= lo || hi > panel || stride < panel {
		panic("cpu: scoresKeys4 with keys outside the panel")
	}
	_, _, _ = s[3*stride+panel-1], q[4*d-1], kt[d*panel-1]
	k0, n := keyVectors8(lo, hi)
	blocks := n / 2
	if n%2 == 1 {
		blocks = (n - 3) / 2
		k := k0 + 16*blocks
		scores4x24AVX2(&s[k], &q[0], &kt[k], d, scale, stride)
	}
	if blocks > 0 {
		scores4x64AVX2(&s[k0], &q[0], &kt[k0], d, scale, blocks, stride)
	}
}

func scores4AVX512(s, q, kt []float32, d int, scale float32) {
	_, _, _ = s[4*panel-1], q[4*d-1], kt[d*panel-1]
	scores4x64AVX512(&s[0], &q[0], &kt[0], d, scale)
}

// pv4AVX2 runs the assembly on the columns that fill whole vectors and Go
// on the rest (d not a multiple of 8).
func pv4AVX2(acc, p, v []float32, d, n int, alpha *[4]float32) {
	pv4Split(acc, p, v, d, n, panel, alpha, 8, pv4x8AVX2)
}

func pv4StridedAVX2(acc, p, v []float32, d, n, stride int, alpha *[4]float32) {
	pv4Split(acc, p, v, d, n, stride, alpha, 8, pv4x8AVX2)
}

func pv4AVX512(acc, p, v []float32, d, n int, alpha *[4]float32) {
	pv4Split(acc, p, v, d, n, panel, alpha, 16, pv4x16PanelAVX512)
}

// pv4x16PanelAVX512 is pv4x16AVX512 in pv4Split's form, whose p rows are
// a panel apart.
func pv4x16PanelAVX512(acc, p, v *float32, d, n, cols, stride int, alpha *[4]float32) {
	if stride != panel {
		panic("cpu: pv4x16AVX512 with rows of p not a panel apart")
	}
	pv4x16AVX512(acc, p, v, d, n, cols, alpha)
}

func pv1AVX2(acc, p, v []float32, d, n int, alpha float32) {
	pv1Split(acc, p, v, d, n, alpha, 8, pv1x8AVX2)
}

func pv1AVX512(acc, p, v []float32, d, n int, alpha float32) {
	pv1Split(acc, p, v, d, n, alpha, 16, pv1x16AVX512)
}

// rowMaxAVX2 takes the maximum of whole vectors in assembly and of the
// remaining elements in Go.
func rowMaxAVX2(s []float32) float32 {
	n8 := len(s) &^ 7
	m := rowMaxGo(s[n8:])
	if n8 > 0 {
		vm, nan := max8AVX2(&s[0], n8)
		if nan {
			return vm // NaN
		}
		m = max(m, vm)
	}
	return m
}

// expSumAVX2 exponentiates whole vectors in assembly and the remaining
// elements through exp32.
func expSumAVX2(s []float32, m float32) float32 {
	n8 := len(s) &^ 7
	sum := expSumGo(s[n8:], m)
	if n8 > 0 {
		sum += expSum8AVX2(&s[0], n8, m)
	}
	return sum
}

// softcapAVX2 softcaps whole vectors in assembly and the remaining elements
// as softcapRow's loops do (softcapTail: expSumAVX2 takes expSumGo on fewer
// than 8 elements, so the numbers are expSumAVX2's).
func softcapAVX2(s []float32, m2, ck float32) {
	n8 := len(s) &^ 7
	if n8 > 0 {
		softcap8AVX2(&s[0], n8, m2, ck)
	}
	softcapTail(s[n8:], m2, ck) // expSumAVX2 takes expSumGo there too
}

func rowMaxAVX512(s []float32) float32 {
	if len(s) == 0 {
		return float32(math.Inf(-1))
	}
	return max16AVX512(&s[0], len(s))
}

func expSumAVX512(s []float32, m float32) float32 {
	if len(s) == 0 {
		return 0
	}
	return expSum16AVX512(&s[0], len(s), m)
}

// Assembly (kernels_avx2_amd64.s, kernels_avx512_amd64.s). Each equals the Go loop named in its comment
// on the arguments the wrappers above pass.

// scores4x64AVX2 is scores4Go on the first 16·blocks keys of s and kt
// (blocks in [1, 4]), the columns after them untouched, s's rows stride
// floats apart.
//
//go:noescape
func scores4x64AVX2(s, q, kt *float32, d int, scale float32, blocks, stride int)

// scores4x24AVX2 is scores4Go on the first 24 keys of s and kt, the
// columns after them untouched, s's rows stride floats apart.
//
//go:noescape
func scores4x24AVX2(s, q, kt *float32, d int, scale float32, stride int)

// scaleRows8AVX2 is scaleRowsGo on rows rows of d columns (rows, d > 0),
// dst's rows stride floats apart.
//
//go:noescape
func scaleRows8AVX2(dst *float32, stride int, src *float32, d int, f *float32, rows int)

// scores4x64AVX512 is scores4Go.
//
//go:noescape
func scores4x64AVX512(s, q, kt *float32, d int, scale float32)

// pv4x8AVX2 is pv4StridedGo on columns [0, cols), cols a multiple of 8;
// the rows of acc and v are d apart, of p stride apart.
//
//go:noescape
func pv4x8AVX2(acc, p, v *float32, d, n, cols, stride int, alpha *[4]float32)

// pv4x16AVX512 is pv4Go on columns [0, cols), cols a multiple of 16; the
// rows of acc and v are d apart, of p panel apart.
//
//go:noescape
func pv4x16AVX512(acc, p, v *float32, d, n, cols int, alpha *[4]float32)

// pv1x8AVX2 and pv1x16AVX512 are pv1Go on columns [0, cols).
//
//go:noescape
func pv1x8AVX2(acc, p, v *float32, d, n, cols int, alpha float32)

//go:noescape
func pv1x16AVX512(acc, p, v *float32, d, n, cols int, alpha float32)

// max8AVX2 is rowMaxGo on s[:n], n a positive multiple of 8, except that it
// reports a NaN through nan (m is then NaN too).
//
//go:noescape
func max8AVX2(s *float32, n int) (m float32, nan bool)

// expSum8AVX2 is expSumGo on s[:n], n a positive multiple of 8, with the
// exponential computed 8 lanes at a time by the algorithm of exp32 (one
// factor 2^k suffices on the domain x <= 0) and multiply-adds fused, and the
// sum taken in 8 lanes and then across them.
//
//go:noescape
func expSum8AVX2(s *float32, n int, m float32) float32

// softcap8AVX2 is softcapRow with the avx2 set on s[:n], n a positive
// multiple of 8: each score's exponential by expSum8AVX2's steps and its
// softcapped value by softcapOf's operations, in one pass.
//
//go:noescape
func softcap8AVX2(s *float32, n int, m2, ck float32)

// max16AVX512 is rowMaxGo on s[:n], n > 0.
//
//go:noescape
func max16AVX512(s *float32, n int) float32

// expSum16AVX512 is expSum2Go on s[:n], n > 0, 16 lanes at a time (EXP16,
// exp2_32's algorithm), the sum taken in 16 lanes and then across them.
//
//go:noescape
func expSum16AVX512(s *float32, n int, m float32) float32

// scoresSoftmax4x64AVX512 is kernelSet.scoresSoftmax4: the products of
// scores4x64AVX512, which stay in registers unscaled, then the base-2
// softmax step with the scale folded into the exponentials' arguments
// (softmax4Go); a NaN score makes its row's sum NaN without necessarily its
// maximum.
//
//go:noescape
func scoresSoftmax4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32)

// scoresSoftmaxBounded4x64AVX512 is kernelSet.scoresSoftmaxBounded4: the
// products of scores4x64AVX512, softcapped where b.ck != 0 and masked to
// each row's bounds in registers, then scoresSoftmax4x64AVX512's step
// (softmax4BoundedGo).
//
//go:noescape
func scoresSoftmaxBounded4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32, b *rowBounds)

// steps4x64AVX512 is, for each of groups groups of four rows, the
// scoresSoftmax4x64AVX512 and pv4x16AVX512 calls of steps4AVX512's loop on
// d a positive multiple of 16, in one call, with prefetches (prefetchPlan).
//
//go:noescape
func steps4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr)

// stepsBounded4x64AVX512 is stepsBounded4AVX512's loop on d a positive
// multiple of 16, in one call: steps4x64AVX512 with each group's products
// masked and softcapped as scoresSoftmaxBounded4x64AVX512 does them (b
// advancing by bstride bytes a group), and its P·V on its keys [p0,
// p0+pn).
//
//go:noescape
func stepsBounded4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr, b *rowBounds, bstride int)

// steps4x64PairsAVX512 is steps4x64AVX512 with the dot products on
// bfloat16 pairs (pairKernels.steps4).
//
//go:noescape
func steps4x64PairsAVX512(s *float32, q, kt *uint32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr)

// stepsBounded4x64PairsAVX512 is stepsBounded4x64AVX512 with the dot
// products of the whole panel on bfloat16 pairs (pairKernels.stepsBounded4).
//
//go:noescape
func stepsBounded4x64PairsAVX512(s *float32, q, kt *uint32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr, b *rowBounds, bstride int)

// pairRowsAVX512 is pairRowsGo on n pairs, n a positive multiple of 8.
//
//go:noescape
func pairRowsAVX512(dst *uint32, src *float32, n int)

// pairPanelAVX512 is pairPanelGo on a panel of 2·pairs rows, pairs > 0.
//
//go:noescape
func pairPanelAVX512(dst *uint32, kt *float32, pairs int)

// prefetchPlan is steps4x64AVX512's prefetch operand for pf over groups
// groups (PREFETCH5): for each of pf's spans, reads then writes, its
// address and the whole cache lines of it that one group prefetches, so
// that the groups together cover its whole lines from its start (a
// remainder of fewer lines than groups is left out).
func prefetchPlan(pf ahead, groups int) *[10]uintptr {
	var plan [10]uintptr
	for i, x := range [5]span{pf.read[0], pf.read[1], pf.read[2], pf.write[0], pf.write[1]} {
		if n := x.bytes / 64 / groups; n > 0 {
			plan[2*i], plan[2*i+1] = uintptr(x.p), uintptr(n)
		}
	}
	return &plan
}

// transpose8x8AVX2 is one 8x8 block of transposePanelGo: dst[i*ldDst+j] =
// src[j*ldSrc+i] for i, j < 8.
//
//go:noescape
func transpose8x8AVX2(dst *float32, ldDst int, src *float32, ldSrc int)

// scaleRows16AVX512 is scaleRowsGo on rows > 0 rows (strides in floats).
//
//go:noescape
func scaleRows16AVX512(dst *float32, stride int, src *float32, d int, f *float32, rows int)

// finite16AVX512 is allFiniteGo on x[:n], n a positive multiple of 16.
//
//go:noescape
func finite16AVX512(x *float32, n int) bool

// allFiniteAVX512 is kernelSet.allFinite: whole vectors of 16 in assembly,
// the rest in Go.
func allFiniteAVX512(x []float32) bool {
	n := len(x) &^ 15
	if n > 0 && !finite16AVX512(&x[0], n) {
		return false
	}
	return allFiniteGo(x[n:])
}

// scaleRowsAVX2 is kernelSet.scaleRows in one assembly call.
func scaleRowsAVX2(dst []float32, stride int, src []float32, d int, f []float32) {
	rows := len(f)
	if rows == 0 || d <= 0 {
		return
	}
	_, _ = dst[(rows-1)*stride+d-1], src[rows*d-1]
	scaleRows8AVX2(&dst[0], stride, &src[0], d, &f[0], rows)
}

// scaleRowsAVX512 is kernelSet.scaleRows in one assembly call.
func scaleRowsAVX512(dst []float32, stride int, src []float32, d int, f []float32) {
	rows := len(f)
	if rows == 0 || d <= 0 {
		return
	}
	_, _ = dst[(rows-1)*stride+d-1], src[rows*d-1]
	scaleRows16AVX512(&dst[0], stride, &src[0], d, &f[0], rows)
}

// transpose16AVX512 is transposePanelGo's blocks of 16 keys × 16 dims for
// the first 16·keyBlocks keys and 16·dimBlocks dims, in one call.
//
//go:noescape
func transpose16AVX512(kt, k *float32, d, keyBlocks, dimBlocks int)

// transposePanelAVX512 is transposePanelGo with the whole 16×16 blocks in
// one assembly call (transpose16AVX512), then the dims after the last
// whole block of 16 and the keys after the last whole block in Go.
func transposePanelAVX512(kt, k []float32, d, n int) {
	kt, k = kt[:d*panel], k[:n*d]
	n16, d16 := n&^15, d&^15
	if n16 > 0 && d16 > 0 {
		_, _ = k[(n16-1)*d+d16-1], kt[(d16-1)*panel+n16-1]
		transpose16AVX512(&kt[0], &k[0], d, n16/16, d16/16)
	}
	for i := d16; i < d; i++ {
		for j := range n16 {
			kt[i*panel+j] = k[j*d+i]
		}
	}
	transposePanelGo(kt, k[n16*d:], d, n, n16)
}

// transposePanelAVX2 is transposePanelGo with the whole 8x8 blocks in
// assembly.
func transposePanelAVX2(kt, k []float32, d, n int) {
	kt, k = kt[:d*panel], k[:n*d]
	n8, d8 := n&^7, d&^7
	for j := 0; j < n8; j += 8 {
		for i := 0; i < d8; i += 8 {
			_, _ = k[(j+7)*d+i+7], kt[(i+7)*panel+j+7]
			transpose8x8AVX2(&kt[i*panel+j], panel, &k[j*d+i], d)
		}
		for i := d8; i < d; i++ {
			for jj := j; jj < j+8; jj++ {
				kt[i*panel+jj] = k[jj*d+i]
			}
		}
	}
	transposePanelGo(kt[:], k[n8*d:], d, n, n8)
}

//go:noescape
func fmaPeakAVX512(n int)

//go:noescape
func fmaPeakAVX2(n int)

// fmaPeak runs n iterations of the named set's peak-rate loop of fused
// multiply-adds (fmaPeakAVX512, fmaPeakAVX2) and returns the flops it
// did, or 0 where this build has no such loop.
func fmaPeak(isa string, n int) float64 {
	switch {
	case isa == "avx512" && cpu.X86.HasAVX512F:
		fmaPeakAVX512(n)
		return float64(n) * 24 * 16 * 2
	case isa == "avx2" && cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		fmaPeakAVX2(n)
		return float64(n) * 12 * 8 * 2
	}
	return 0
}
