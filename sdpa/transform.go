package sdpa

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/internal/freelist"
)

// The accuracy options (Options.SmoothK, Options.Hadamard) transform Q and K
// before quantization. Both leave the attention output unchanged in exact
// arithmetic; what they change is what quantization loses.

// conditioned returns q and k as the options transform them, in buf's
// scratch (the callers' tensors are not touched), and, with SmoothK, the
// per-(batch, KV head) channel means of K that were subtracted ([B][Hkv][D],
// for the LSE correction). With neither option it returns q and k.
func (b *callBuffers) conditioned(q, k *Tensor, opts *Options) (*Tensor, *Tensor, []float64) {
	if opts == nil || !opts.SmoothK && !opts.Hadamard {
		return q, k, nil
	}
	b.tq = append(b.tq[:0], q.Data...)
	b.tk = append(b.tk[:0], k.Data...)
	b.tqT = Tensor{Data: b.tq, B: q.B, H: q.H, S: q.S, D: q.D, Layout: q.Layout}
	b.tkT = Tensor{Data: b.tk, B: k.B, H: k.H, S: k.S, D: k.D, Layout: k.Layout}
	tq, tk := &b.tqT, &b.tkT
	var means []float64
	if opts.SmoothK {
		b.means = freelist.Grow(b.means, k.B*k.H*k.D)
		means = b.means
		smoothK(tk, means)
	}
	if opts.Hadamard {
		hadamardQK(tq, tk, b)
	}
	return tq, tk, means
}

// smoothK subtracts from every key of each (batch, KV head) the mean key of
// that head (channel by channel, summed in float64) and stores the means.
// Every query's scores then shift by the same q·mean, which the softmax
// cancels, whatever keys the mask lets the query see.
func smoothK(k *Tensor, means []float64) {
	d := k.D
	for g := range k.B * k.H {
		b, h := g/k.H, g%k.H
		m := means[g*d : (g+1)*d]
		clear(m)
		for j := range k.S {
			for c, x := range k.row(b, h, j) {
				m[c] += float64(x)
			}
		}
		for c := range m {
			m[c] /= float64(k.S)
		}
		for j := range k.S {
			row := k.row(b, h, j)
			for c := range row {
				row[c] = float32(float64(row[c]) - m[c])
			}
		}
	}
}

// HadamardBlock returns the size of the Walsh-Hadamard blocks Options.Hadamard
// uses for head dimension d: the largest power of two that divides d (64 for
// 64, 128 for 128, 32 for 96). The transform is block-diagonal, and so
// orthogonal, for every d.
func HadamardBlock(d int) int { return 1 << bits.TrailingZeros(uint(d)) }

// hadamardSeed fixes the random signs: the same for every call, so that
// results are reproducible.
const hadamardSeed = 0x4841444D

// hadamardQK applies R = diag(signs)·blockdiag(H/sqrt(n)) to every row of
// K and of the query heads that read it: one sign vector per (batch, KV
// head), so Q·Kᵀ = (Q·R)·(K·R)ᵀ in exact arithmetic.
func hadamardQK(q, k *Tensor, b *callBuffers) {
	d, group := k.D, q.H/k.H
	n := HadamardBlock(d)
	b.signs = freelist.Grow(b.signs, d)
	for bb := range k.B {
		for kvh := range k.H {
			hadamardSigns(b.signs, bb*k.H+kvh)
			for j := range k.S {
				rotateRows(k.row(bb, kvh, j), b.signs, n)
			}
			for h := kvh * group; h < (kvh+1)*group; h++ {
				for i := range q.S {
					rotateRows(q.row(bb, h, i), b.signs, n)
				}
			}
		}
	}
}

// hadamardSigns fills signs with KV head g's (g = batch·Hkv + KV head)
// random ±1, the same on every call.
func hadamardSigns(signs []float32, g int) {
	var pcg rand.PCG // a value: no allocation per head
	pcg.Seed(hadamardSeed, uint64(g))
	var bitsLeft uint64
	for c := range signs {
		if c%64 == 0 {
			bitsLeft = pcg.Uint64()
		}
		signs[c] = float32(1 - 2*int(bitsLeft&1))
		bitsLeft >>= 1
	}
}

// rotateRows multiplies each row (len(signs) long) by the signs, then applies
// the normalized fast Walsh-Hadamard transform to each block of n.
func rotateRows(rows, signs []float32, n int) {
	d := len(signs)
	norm := float32(1 / math.Sqrt(float64(n)))
	for j := 0; j < len(rows); j += d {
		row := rows[j : j+d]
		for c := range row {
			row[c] *= signs[c]
		}
		for off := 0; off < d; off += n {
			x := row[off : off+n]
			for h := 1; h < n; h <<= 1 {
				for i := 0; i < n; i += 2 * h {
					for t := i; t < i+h; t++ {
						a, c := x[t], x[t+h]
						x[t], x[t+h] = a+c, a-c
					}
				}
			}
			for i := range x {
				x[i] *= norm
			}
		}
	}
}

// lseShift is scale·(q·m) as the device's correction computes it: each
// product rounded to float64, then each sum. The conversions keep the
// compiler from fusing a product into the next sum (arm64's would).
func lseShift(q []float32, m []float64, scale float32) float64 {
	var dot float64
	for c, x := range q {
		dot += float64(float64(x) * m[c])
	}
	return float64(float64(scale) * dot)
}

// correctLSE undoes smoothing's shift of each row's log-sum-exp: the scores
// of query row q were lowered by scale·(q·mean), so LSE was too. q is the
// caller's untransformed query.
func correctLSE(lse []float32, q *Tensor, kvHeads int, means []float64, scale float32) {
	d, group := q.D, q.H/kvHeads
	for bh := range q.B * q.H {
		b, h := bh/q.H, bh%q.H
		m := means[(b*kvHeads+h/group)*d : (b*kvHeads+h/group+1)*d]
		for i := range q.S {
			l := &lse[bh*q.S+i]
			if math.IsInf(float64(*l), -1) { // the row sees no key
				continue
			}
			*l = float32(float64(*l) + lseShift(q.row(b, h, i), m, scale))
		}
	}
}
