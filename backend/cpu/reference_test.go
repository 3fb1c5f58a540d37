package cpu

import "math"

// The Go loops that only the tests use: references for the assembly kernels
// whose production counterparts take another form (the Go kernel set keeps
// row panels; the fused softmax has no Go counterpart in production).

// softmax4Go is kernelSet.scoresSoftmax4's softmax step in Go on four rows
// of dot products x (panel each) and a scale c > 0: the base-2 sets' step
// (kernelSet.base2), with their lazy rescale (lazyTau), c·x - m rounded
// once (fma32) and exp2_32: the reference for the fused assembly. The
// weights replace x.
func softmax4Go(x []float32, c float32, m, l []float32, alpha *[8]float32) {
	var rm [4]float32
	lazy := true
	for r := range 4 {
		rm[r] = rowMaxGo(x[r*panel:(r+1)*panel]) * c
		lazy = lazy && rm[r] < m[r]+lazyTau
	}
	for r := range 4 {
		row := x[r*panel : (r+1)*panel]
		alpha[r] = 1
		if !lazy {
			mNew := max(m[r], rm[r])
			if l[r] != 0 || m[r] != m[r] {
				alpha[r] = exp2_32(m[r] - mNew)
			}
			l[r] *= alpha[r]
			m[r] = mNew
		}
		var sum float32
		for j, xj := range row {
			e := exp2_32(fma32(xj, c, -m[r]))
			row[j] = e
			sum += e
		}
		l[r] += sum
	}
}

// softmax4BoundedGo is kernelSet.scoresSoftmaxBounded4's step in Go on
// four rows of dot products x (panel each), the reference for the
// assembly: where b.ck != 0, each score c·x (rounded) softcapped as
// softcapRow does it, through the set's own exponential (ks.expSum of
// |c·x|·m2, then softcapOf), and the scale then 1; each row's keys outside
// [b.lo[r], b.hi[r]) set to -Inf; then softmax4Go.
func softmax4BoundedGo(ks *kernelSet, x []float32, c float32, m, l []float32, alpha *[8]float32, b *rowBounds) {
	x = x[:4*panel]
	if b.ck != 0 {
		var e [4 * panel]float32
		for j, xj := range x {
			x[j] = xj * c
			e[j] = abs32(x[j]) * b.m2
		}
		ks.expSum(e[:], 0)
		for j, t := range x {
			x[j] = softcapOf(t, e[j], b.ck)
		}
		c = 1
	}
	for r := range 4 {
		for j := range panel {
			if j < int(b.lo[r]) || j >= int(b.hi[r]) {
				x[r*panel+j] = float32(math.Inf(-1))
			}
		}
	}
	softmax4Go(x, c, m, l, alpha)
}

// refExp returns the Go exponential and expSum of a kernel set's base:
// exp2_32 and expSum2Go where base2, else exp32 and expSumGo.
func refExp(base2 bool) (func(float32) float32, func([]float32, float32) float32) {
	if base2 {
		return exp2_32, expSum2Go
	}
	return exp32, expSumGo
}

// scores4Go is scores4 in Go on a transposed panel, the reference for the
// assembly kernels, blocked 2 rows × 4 keys so that each q and kt load
// feeds several multiply-adds.
func scores4Go(s, q, kt []float32, d int, scale float32) {
	s, q, kt = s[:4*panel], q[:4*d], kt[:d*panel]
	for r := 0; r < 4; r += 2 {
		q0, q1 := q[r*d:(r+1)*d], q[(r+1)*d:(r+2)*d]
		for j := 0; j < panel; j += 4 {
			var a00, a01, a02, a03, a10, a11, a12, a13 float32
			for i, x0 := range q0 {
				x1 := q1[i]
				k := kt[i*panel+j : i*panel+j+4]
				a00 += x0 * k[0]
				a01 += x0 * k[1]
				a02 += x0 * k[2]
				a03 += x0 * k[3]
				a10 += x1 * k[0]
				a11 += x1 * k[1]
				a12 += x1 * k[2]
				a13 += x1 * k[3]
			}
			s0, s1 := s[r*panel+j:r*panel+j+4], s[(r+1)*panel+j:(r+1)*panel+j+4]
			s0[0], s0[1], s0[2], s0[3] = a00*scale, a01*scale, a02*scale, a03*scale
			s1[0], s1[1], s1[2], s1[3] = a10*scale, a11*scale, a12*scale, a13*scale
		}
	}
}

// transposePanel is transposePanelGo over all n keys.
func transposePanel(kt, k []float32, d, n int) { transposePanelGo(kt, k, d, n, 0) }

// steps4 runs groups full steps of four rows against one full key panel
// with ks's scoresSoftmax4 and pv4: the reference for kernelSet.steps4.
func steps4(ks *kernelSet, s, q, kt, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int) {
	for g := range groups {
		r := 4 * g
		ks.scoresSoftmax4(s, q[r*d:(r+4)*d], kt, d, scale, m[r:r+4], l[r:r+4], alpha)
		ks.pv4(acc[r*d:(r+4)*d], s, v, d, panel, (*[4]float32)(alpha[:4]))
	}
}

// stepsBounded4 runs groups steps of four rows against one full key panel
// with ks's scoresSoftmaxBounded4 (under b[g], or b[0] for every group)
// and pv4 on the group's keys [p0, p0+pn): the reference for
// kernelSet.stepsBounded4.
func stepsBounded4(ks *kernelSet, s, q, kt, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, b []rowBounds) {
	for g := range groups {
		r, bg := 4*g, &b[0]
		if len(b) > 1 {
			bg = &b[g]
		}
		ks.scoresSoftmaxBounded4(s, q[r*d:(r+4)*d], kt, d, scale, m[r:r+4], l[r:r+4], alpha, bg)
		ks.pv4(acc[r*d:(r+4)*d], s[bg.p0:], v[int(bg.p0)*d:], d, int(bg.pn), (*[4]float32)(alpha[:4]))
	}
}
