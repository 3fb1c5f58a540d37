//go:build !purego

package cpu

// kernelSets lists the kernel sets this CPU runs, the default first: on
// arm64 the NEON set (Advanced SIMD, which every arm64 CPU has), then the
// portable Go kernels.
var kernelSets = []*kernelSet{&neonKernels, &goKernels}

// neonKernels: 4-wide NEON with fused multiply-adds (kernels_arm64.s), the
// softmax in base e (exp32's algorithm: NEON has no VSCALEFPS, so base 2,
// with exp2_32's rounding to subnormals, would take as many instructions),
// keys in transposed panels. The columns past the last whole vector in pv4
// and pv1, and a row's elements past the last whole vector in rowMax,
// expSum and softcap, run the Go loops.
var neonKernels = kernelSet{
	name:        "neon",
	scores4:     scores4NEON,
	scoresKeys4: scoresKeys4NEON,
	pv4:         pv4NEON,
	pv4Strided:  pv4StridedNEON,
	pv1:         pv1NEON,
	rowMax:      rowMaxNEON,
	expSum:      expSumNEON,
	softcap:     softcapNEON,
	scaleRows:   scaleRowsNEON,
	allFinite:   allFiniteGo,
	transpose:   transposePanelNEON,
}

// fmaPeak runs n iterations of the NEON set's peak-rate loop of fused
// multiply-adds (fmaPeakNEON) for isa "neon" and returns the flops it did,
// or 0 for any other name.
func fmaPeak(isa string, n int) float64 {
	if isa != "neon" {
		return 0
	}
	fmaPeakNEON(n)
	return float64(n) * 24 * 4 * 2
}

// transposePanelNEON is transposePanelGo with the whole blocks of 4 keys ×
// 4 dims in one assembly call (transpose4x4NEON), then the dims after the
// last whole block and the keys after the last whole block in Go.
func transposePanelNEON(kt, k []float32, d, n int) {
	kt, k = kt[:d*panel], k[:n*d]
	n4, d4 := n&^3, d&^3
	if n4 > 0 && d4 > 0 {
		_, _ = k[(n4-1)*d+d4-1], kt[(d4-1)*panel+n4-1]
		transpose4x4NEON(&kt[0], &k[0], d, n4/4, d4/4)
	}
	for i := d4; i < d; i++ {
		for j := range n4 {
			kt[i*panel+j] = k[j*d+i]
		}
	}
	transposePanelGo(kt, k[n4*d:], d, n, n4)
}

// scaleRowsNEON is kernelSet.scaleRows in one assembly call.
func scaleRowsNEON(dst []float32, stride int, src []float32, d int, f []float32) {
	rows := len(f)
	if rows == 0 || d <= 0 {
		return
	}
	_, _ = dst[(rows-1)*stride+d-1], src[rows*d-1]
	scaleRows4NEON(&dst[0], stride, &src[0], d, &f[0], rows)
}

// The wrappers check every slice bound the assembly relies on, so that a
// wrong call panics in Go instead of reading or writing out of bounds.

func scores4NEON(s, q, kt []float32, d int, scale float32) {
	_, _, _ = s[4*panel-1], q[4*d-1], kt[d*panel-1]
	scores4x64NEON(&s[0], &q[0], &kt[0], d, scale, panel/16, panel)
}

// scoresKeys4NEON is kernelSet.scoresKeys4: scores4NEON on the blocks of 16
// keys that hold the keys [lo, hi), the other columns of s untouched.
func scoresKeys4NEON(s, q, kt []float32, d int, scale float32, lo, hi, stride int) {
	if lo < 0 || hi <= lo || hi > panel || stride < panel {
		panic("cpu: scoresKeys4 with keys outside the panel")
	}
	_, _, _ = s[3*stride+panel-1], q[4*d-1], kt[d*panel-1]
	k0, blocks := keyBlocks(lo, hi)
	scores4x64NEON(&s[k0], &q[0], &kt[k0], d, scale, blocks, stride)
}

// pv4NEON runs the assembly on the columns that fill whole vectors and Go
// on the rest (d not a multiple of 4), as pv4Go computes them.
func pv4NEON(acc, p, v []float32, d, n int, alpha *[4]float32) {
	pv4Split(acc, p, v, d, n, panel, alpha, 4, pv4x4NEON)
}

// pv4StridedNEON is pv4NEON with p's rows stride floats apart.
func pv4StridedNEON(acc, p, v []float32, d, n, stride int, alpha *[4]float32) {
	pv4Split(acc, p, v, d, n, stride, alpha, 4, pv4x4NEON)
}

// pv1NEON is pv4NEON for one row.
func pv1NEON(acc, p, v []float32, d, n int, alpha float32) {
	pv1Split(acc, p, v, d, n, alpha, 4, pv1x4NEON)
}

// rowMaxNEON takes the maximum of whole vectors in assembly and of the
// remaining elements in Go.
func rowMaxNEON(s []float32) float32 {
	n4 := len(s) &^ 3
	m := rowMaxGo(s[n4:])
	if n4 > 0 {
		m = max(m, max4NEON(&s[0], n4))
	}
	return m
}

// expSumNEON exponentiates whole vectors in assembly and the remaining
// elements through exp32.
func expSumNEON(s []float32, m float32) float32 {
	n4 := len(s) &^ 3
	sum := expSumGo(s[n4:], m)
	if n4 > 0 {
		sum += expSum4NEON(&s[0], n4, m)
	}
	return sum
}

// softcapNEON softcaps whole vectors in assembly and the remaining elements
// as softcapRow's loops do (softcapTail: expSumNEON takes expSumGo on fewer
// than 4 elements, so the numbers are expSumNEON's).
func softcapNEON(s []float32, m2, ck float32) {
	n4 := len(s) &^ 3
	if n4 > 0 {
		softcap4NEON(&s[0], n4, m2, ck)
	}
	softcapTail(s[n4:], m2, ck) // expSumNEON takes expSumGo there too
}

// Assembly (kernels_arm64.s). Each equals the Go loop named in its comment
// on the arguments the wrappers above pass.

// scores4x64NEON is scores4Go on the first 16·blocks keys of s and kt
// (blocks in [1, 4]), the columns after them untouched, s's rows stride
// floats apart.
//
//go:noescape
func scores4x64NEON(s, q, kt *float32, d int, scale float32, blocks, stride int)

// pv4x4NEON is pv4StridedGo on columns [0, cols), cols a multiple of 4;
// the rows of acc and v are d apart, of p stride apart.
//
//go:noescape
func pv4x4NEON(acc, p, v *float32, d, n, cols, stride int, alpha *[4]float32)

// pv1x4NEON is pv1Go on columns [0, cols), cols a multiple of 4.
//
//go:noescape
func pv1x4NEON(acc, p, v *float32, d, n, cols int, alpha float32)

// max4NEON is rowMaxGo on s[:n], n a positive multiple of 4.
//
//go:noescape
func max4NEON(s *float32, n int) float32

// expSum4NEON is expSumGo on s[:n], n a positive multiple of 4, with the
// exponential computed four lanes at a time by the algorithm of exp32 (one
// factor 2^k suffices on the domain x <= 0) and multiply-adds fused, and
// the sum taken in four lanes and then across them.
//
//go:noescape
func expSum4NEON(s *float32, n int, m float32) float32

// softcap4NEON is softcapRow with the neon set on s[:n], n a positive
// multiple of 4: each score's exponential by expSum4NEON's steps and its
// softcapped value by softcapOf's operations, in one pass.
//
//go:noescape
func softcap4NEON(s *float32, n int, m2, ck float32)

// transpose4x4NEON is transposePanelGo's blocks of 4 keys × 4 dims for the
// first 4·keyBlocks keys and 4·dimBlocks dims, in one call.
//
//go:noescape
func transpose4x4NEON(kt, k *float32, d, keyBlocks, dimBlocks int)

// scaleRows4NEON is scaleRowsGo on rows > 0 rows of d > 0 columns (strides
// in floats).
//
//go:noescape
func scaleRows4NEON(dst *float32, stride int, src *float32, d int, f *float32, rows int)

//go:noescape
func fmaPeakNEON(n int)
