package cpu

import "math"

// The micro-kernels of the CPU backend. Each is the reference for any
// assembly version that replaces it: the assembly must equal these loops.

// dot2x4 returns the eight dot products of query rows q0, q1 with key rows
// k0..k3 (all of length len(q0)): a[r][c] = Σ_i q_r[i]·k_c[i]. Loading each
// element once for four (keys) or two (queries) products halves the loads
// per multiply-add of a plain dot product.
func dot2x4(q0, q1, k0, k1, k2, k3 []float32) (a [2][4]float32) {
	n := len(q0)
	q1, k0, k1, k2, k3 = q1[:n], k0[:n], k1[:n], k2[:n], k3[:n]
	var a00, a01, a02, a03, a10, a11, a12, a13 float32
	for i := 0; i < n; i++ {
		x0, x1 := q0[i], q1[i]
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
	return [2][4]float32{{a00, a01, a02, a03}, {a10, a11, a12, a13}}
}

// dot1x4 returns the dot products of q with k0..k3.
func dot1x4(q, k0, k1, k2, k3 []float32) (a0, a1, a2, a3 float32) {
	n := len(q)
	k0, k1, k2, k3 = k0[:n], k1[:n], k2[:n], k3[:n]
	for i, x := range q {
		a0 += x * k0[i]
		a1 += x * k1[i]
		a2 += x * k2[i]
		a3 += x * k3[i]
	}
	return
}

// dot returns Σ q[i]·k[i] (len(k) >= len(q)).
func dot(q, k []float32) float32 {
	k = k[:len(q)]
	var a0, a1 float32
	i := 0
	for ; i+2 <= len(q); i += 2 {
		a0 += q[i] * k[i]
		a1 += q[i+1] * k[i+1]
	}
	if i < len(q) {
		a0 += q[i] * k[i]
	}
	return a0 + a1
}

// scoresRows sets s0[j] = scale·(q0·k_j) and, if q1 is not nil,
// s1[j] = scale·(q1·k_j), for the len(s0) keys stored row by row in k.
func scoresRows(s0, s1, q0, q1, k []float32, d int, scale float32) {
	n := len(s0)
	j := 0
	if q1 != nil {
		s1 = s1[:n]
		for ; j+4 <= n; j += 4 {
			a := dot2x4(q0, q1, k[j*d:], k[(j+1)*d:], k[(j+2)*d:], k[(j+3)*d:])
			s0[j], s0[j+1], s0[j+2], s0[j+3] = a[0][0]*scale, a[0][1]*scale, a[0][2]*scale, a[0][3]*scale
			s1[j], s1[j+1], s1[j+2], s1[j+3] = a[1][0]*scale, a[1][1]*scale, a[1][2]*scale, a[1][3]*scale
		}
		for ; j < n; j++ {
			s0[j] = dot(q0, k[j*d:]) * scale
			s1[j] = dot(q1, k[j*d:]) * scale
		}
		return
	}
	for ; j+4 <= n; j += 4 {
		a0, a1, a2, a3 := dot1x4(q0, k[j*d:], k[(j+1)*d:], k[(j+2)*d:], k[(j+3)*d:])
		s0[j], s0[j+1], s0[j+2], s0[j+3] = a0*scale, a1*scale, a2*scale, a3*scale
	}
	for ; j < n; j++ {
		s0[j] = dot(q0, k[j*d:]) * scale
	}
}

// accumulate2 adds Σ_j w0[j]·v_j to acc0 and Σ_j w1[j]·v_j to acc1, for
// the len(w0) value rows v_j of length len(acc0) stored row by row in v.
// If acc1 is nil only the first row is updated.
func accumulate2(acc0, acc1, w0, w1, v []float32) {
	d := len(acc0)
	n := len(w0)
	if acc1 == nil {
		accumulate(acc0, w0, v)
		return
	}
	acc1, w1 = acc1[:d], w1[:n]
	j := 0
	for ; j+4 <= n; j += 4 {
		a0, a1, a2, a3 := w0[j], w0[j+1], w0[j+2], w0[j+3]
		b0, b1, b2, b3 := w1[j], w1[j+1], w1[j+2], w1[j+3]
		v0 := v[j*d : j*d+d]
		v1 := v[(j+1)*d : (j+1)*d+d]
		v2 := v[(j+2)*d : (j+2)*d+d]
		v3 := v[(j+3)*d : (j+3)*d+d]
		for i := range acc0 {
			x0, x1, x2, x3 := v0[i], v1[i], v2[i], v3[i]
			acc0[i] += a0*x0 + a1*x1 + a2*x2 + a3*x3
			acc1[i] += b0*x0 + b1*x1 + b2*x2 + b3*x3
		}
	}
	for ; j < n; j++ {
		a, b, vj := w0[j], w1[j], v[j*d:j*d+d]
		for i, x := range vj {
			acc0[i] += a * x
			acc1[i] += b * x
		}
	}
}

// accumulate adds Σ_j w[j]·v_j to acc (one row).
func accumulate(acc, w, v []float32) {
	d := len(acc)
	n := len(w)
	j := 0
	for ; j+4 <= n; j += 4 {
		w0, w1, w2, w3 := w[j], w[j+1], w[j+2], w[j+3]
		v0 := v[j*d : j*d+d]
		v1 := v[(j+1)*d : (j+1)*d+d]
		v2 := v[(j+2)*d : (j+2)*d+d]
		v3 := v[(j+3)*d : (j+3)*d+d]
		for i := range acc {
			acc[i] += w0*v0[i] + w1*v1[i] + w2*v2[i] + w3*v3[i]
		}
	}
	for ; j < n; j++ {
		wj, vj := w[j], v[j*d:j*d+d]
		for i, x := range vj {
			acc[i] += wj * x
		}
	}
}

// expSoftmax sets s[j] = exp(s[j] - m) and returns their sum.
func expSoftmax(s []float32, m float32) float32 {
	var sum float32
	for j, x := range s {
		e := exp32(x - m)
		s[j] = e
		sum += e
	}
	return sum
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
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	// 2^n in two factors: n spans [-126, 128], one factor would not.
	n1 := int32(n) >> 1
	n2 := int32(n) - n1
	return p * math.Float32frombits(uint32(n1+127)<<23) * math.Float32frombits(uint32(n2+127)<<23)
}
