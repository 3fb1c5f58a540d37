//go:build !purego && (amd64 || arm64)

package cpu

// pv4Split is kernelSet.pv4Strided for a set whose assembly (asm) handles
// the columns that fill whole vectors of width floats: it runs asm on
// those and the Go loop of pv4StridedGo on the rest (d not a multiple of
// width).
func pv4Split(acc, p, v []float32, d, n, stride int, alpha *[4]float32, width int, asm func(acc, p, v *float32, d, n, cols, stride int, alpha *[4]float32)) {
	if stride < 1 {
		panic("cpu: pv4 with a stride below 1")
	}
	_, _ = acc[4*d-1], p[3*stride+n-1]
	if n > 0 {
		_ = v[n*d-1]
	}
	cols := d &^ (width - 1)
	if cols > 0 {
		var vp *float32
		if n > 0 {
			vp = &v[0]
		}
		asm(&acc[0], &p[0], vp, d, n, cols, stride, alpha)
	}
	if cols == d {
		return
	}
	// The remaining columns, as pv4Go computes them.
	for r := range 4 {
		a := acc[r*d : (r+1)*d]
		for c := cols; c < d; c++ {
			a[c] *= alpha[r]
		}
		for j := range n {
			x := p[r*stride+j]
			for c := cols; c < d; c++ {
				a[c] += x * v[j*d+c]
			}
		}
	}
}

// pv1Split is pv4Split for one row (kernelSet.pv1, as pv1Go computes it).
func pv1Split(acc, p, v []float32, d, n int, alpha float32, width int, asm func(acc, p, v *float32, d, n, cols int, alpha float32)) {
	_ = acc[d-1]
	if n > 0 {
		_, _ = p[n-1], v[n*d-1]
	}
	cols := d &^ (width - 1)
	if cols > 0 {
		var pp, vp *float32
		if n > 0 {
			pp, vp = &p[0], &v[0]
		}
		asm(&acc[0], pp, vp, d, n, cols, alpha)
	}
	for c := cols; c < d; c++ {
		acc[c] *= alpha
	}
	for j := range n {
		for c := cols; c < d; c++ {
			acc[c] += p[j] * v[j*d+c]
		}
	}
}
