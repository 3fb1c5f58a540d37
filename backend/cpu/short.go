package cpu

import (
	"math"

	"github.com/fp8attn/fp8attn/internal/freelist"
)

// shortPanels is the most key panels a block's rows may span for the short
// form (shortRows): 64 rows' scores over them take 64 KB.
const shortPanels = 4

// noRescale is the alpha of a P·V that adds to its rows as they are (a
// global: the kernels take its address through a function value, which
// would move a local to the heap).
var noRescale = [4]float32{1, 1, 1, 1}

// shortForm says whether attendRowsWith runs a block whose rows see keys of
// panels [kb0, kb1) in the short form: on a kernel set whose groups all
// take the unfused step (no fused or bounded steps, no AMX) and that has
// the strided kernels, over a few panels of a call whose value rows lie in
// one array (kp.joined).
func shortForm(ks *kernelSet, kp *keyPanels, amx bool, kb0, kb1 int) bool {
	return !amx && kp.joined && ks.steps4 == nil && ks.stepsBounded4 == nil &&
		ks.scoresKeys4 != nil && ks.pv4Strided != nil && kb1 > kb0 && kb1-kb0 <= shortPanels
}

// shortRows is attendRowsWith's panel loop for a block whose rows see few
// panels, the keys [base, nmax) (base = kp.kb0·panel): the scores of each
// row over all of its keys first, then one softmax a row, its maximum m
// and sum l final (no rescaling), then one P·V a group of four rows over
// the keys some row of it sees.
//
// A sliding window or a causal diagonal leaves a group's rows parts of two
// or three panels (a window of 128 keys: 131 keys over three panels), and
// the online steps take each row's maximum, exponentials and rescale once
// a panel, and its keys outside the group's common range through one-row
// P·V calls. Here row i's scores sit in sc.wide[i·W:], W = (kb1-kb0)·panel
// (column j for key base+j), written there by scoresKeys4 a panel at a
// time with rows W apart; each row's softmax is then one rowMax and one
// expSum over its own keys, its other columns in the group's span are set
// to 0, and the group's P·V is one pv4Strided over the span, reading the
// value rows where get(kb0) finds them. A weight of 0 adds nothing where the values are
// finite; where a panel of the span holds a value that is not (and the
// rows' keys differ), pv4Strided runs on the keys every row sees and pv1
// on each row's others, as the online steps do.
//
// m, l and acc are the rows' state as attendRowsWith set it (-Inf, 0, 0);
// they end as the online steps would leave them, but for the rounding of
// the sums.
func (c *call) shortRows(ks *kernelSet, sc *scratch, q []float32, rowsN int, scoreScale float32, br blockRows, kp keyPanels, nmax int, m, l, acc []float32) {
	D := c.d
	kb0, kb1 := kp.kb0, (nmax+panel-1)/panel
	base, W := kb0*panel, (kb1-kb0)*panel
	sc.wide = freelist.Grow(sc.wide, 4*W)
	w := sc.wide[:4*W]
	// row returns the group's row r's scores, column j for key base+j.
	row := func(r int) []float32 { return w[r*W : (r+1)*W] }
	negInf := float32(math.Inf(-1))
	// keys returns row i's keys [lo, hi) in the block's range, hi <= lo
	// for none.
	rowLo, rowHi := sc.rowLo[:rowsN], sc.rowHi[:rowsN]
	keys := func(i int) (lo, hi int) { return max(rowLo[i], base), min(rowHi[i], nmax) }
	// The rows' first and last keys grow with the row, so a group's rows
	// see keys in its span [first row's lo, last row's hi).
	span := func(g int) (lo, hi int) {
		lo, _ = keys(g)
		_, hi = keys(min(g+3, rowsN-1))
		return lo, hi
	}
	var kts [shortPanels][]float32
	for kb := kb0; kb < kb1; kb++ {
		kts[kb-kb0], _ = kp.get(kb)
	}
	_, v := kp.get(kb0) // key base+j's values at v[j*D:] (kp.joined)
	for g := 0; g < rowsN; g += 4 {
		glo, ghi := span(g)
		if ghi <= glo {
			continue
		}
		for kb := glo / panel; kb*panel < ghi; kb++ {
			j0 := kb * panel
			lo, hi := max(glo, j0), min(ghi, j0+panel)
			ks.scoresKeys4(w[j0-base:], q[g*D:(g+4)*D], kts[kb-kb0], D, scoreScale, lo-j0, hi-j0, W)
		}
		for r := range min(4, rowsN-g) {
			i := g + r
			lo, hi := keys(i)
			if hi <= lo {
				continue
			}
			p := row(r)
			s := p[lo-base : hi-base]
			if br.softcap > 0 {
				softcapRow(ks, s, br.softcap, sc.t32)
			}
			m[i] = ks.rowMax(s)
			// The exponentials in whole vectors of 8: the row's columns up
			// to the next multiple, where it has them, join as -Inf
			// (e^-Inf = 0, the weight the clearing below gives them).
			if e := lo - base + (hi-lo+7)&^7; e <= W {
				pad := p[hi-base : e]
				for j := range pad {
					pad[j] = negInf
				}
				s = p[lo-base : e]
			}
			l[i] = ks.expSum(s, m[i])
		}
		// Each row's weights over the span: its own, 0 elsewhere (a
		// padding row's all 0). clo and chi bound the keys every row
		// sees.
		clo, chi, same := glo, ghi, true
		for r := range 4 {
			p := row(r)[glo-base : ghi-base]
			if g+r >= rowsN {
				clear(p)
				continue
			}
			lo, hi := keys(g + r)
			lo, hi = max(lo, glo), max(min(hi, ghi), lo)
			clear(p[:lo-glo])
			clear(p[hi-glo:])
			clo, chi = max(clo, lo), min(chi, hi)
			same = same && lo == glo && hi == ghi
		}
		finite := same
		if !same && kp.vFinite != nil {
			finite = true
			for kb := glo / panel; finite && kb*panel < ghi; kb++ {
				finite = kp.vFinite[kb]
			}
		}
		p0, p1 := glo, ghi
		if !finite {
			p0, p1 = clo, chi
		}
		if p1 > p0 {
			ks.pv4Strided(acc[g*D:(g+4)*D], w[p0-base:], v[(p0-base)*D:], D, p1-p0, W, &noRescale)
		}
		if finite {
			continue
		}
		for r := range min(4, rowsN-g) {
			lo, hi := keys(g + r)
			out, p := acc[(g+r)*D:(g+r+1)*D], row(r)
			if p1 <= p0 {
				if hi > lo {
					ks.pv1(out, p[lo-base:hi-base], v[(lo-base)*D:], D, hi-lo, 1)
				}
				continue
			}
			if lo < p0 {
				ks.pv1(out, p[lo-base:p0-base], v[(lo-base)*D:], D, p0-lo, 1)
			}
			if hi > p1 {
				ks.pv1(out, p[p1-base:hi-base], v[(p1-base)*D:], D, hi-p1, 1)
			}
		}
	}
}
