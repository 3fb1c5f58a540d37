package cpu

import (
	"math"

	"github.com/fp8attn/fp8attn/internal/freelist"
)

// blockRows says, for row r of a block, which keys it sees and where its
// output and log-sum-exp go: attendRows's outBuf[out(r):][:D] and
// lseBuf[lse(r)] (no log-sum-exp where lseBuf is nil). Where outStride > 0,
// out(r) is out(0) + r·outStride for every row.
type blockRows struct {
	// Row r sees keys [lo(r), visible(r)) (lo nil: from key 0); both grow
	// with r (a sliding window's lower edge, the causal diagonal).
	visible, lo func(r int) int
	out, lse    func(r int) int
	lseBuf      []float32
	outStride   int
	// sink, where not nil, gives row r's sink logit (natural), which joins
	// the row's denominator when its output is finished and not its
	// log-sum-exp (backend.Variants.Sinks). A call that merges partial
	// rows adds it at the merge instead.
	sink func(r int) float32
	// softcap c > 0 replaces each score s by c·tanh(s/c) (softcapRow);
	// the plain fused steps then step aside for the bounded ones
	// (kernelSet.stepsBounded4), which softcap in registers.
	softcap float32
	// steps01 says that from each row to the next, first and visible
	// each grow by 0 or 1 (a dense call's rows, backend.Problem.KeyRange).
	steps01 bool
}

// bounds sets lo[r] and hi[r] to the first key row r sees and the keys it
// sees, for r < len(lo). Where steps01 holds and both grow from the first
// row to the last by 0 or by one a row in all, every row's follow without
// the closures' calls.
func (br *blockRows) bounds(lo, hi []int) {
	last := len(lo) - 1
	lo[0], hi[0] = br.first(0), br.visible(0)
	lo[last], hi[last] = br.first(last), br.visible(last)
	dl, dh := lo[last]-lo[0], hi[last]-hi[0]
	if br.steps01 && (dl == 0 || dl == last) && (dh == 0 || dh == last) {
		sl, sh := dl/max(1, last), dh/max(1, last)
		for r := 1; r < last; r++ {
			lo[r], hi[r] = lo[0]+r*sl, hi[0]+r*sh
		}
		return
	}
	for r := 1; r < last; r++ {
		lo[r], hi[r] = br.first(r), br.visible(r)
	}
}

// first returns the first key row r sees.
func (br *blockRows) first(r int) int {
	if br.lo == nil {
		return 0
	}
	return br.lo(r)
}

// keyPanels is the range of key panels [kb0, kb1) a block runs over, and
// how to get panel kb: its keys as the kernel set's transpose lays them out
// and its value rows (n×D floats, n the panel's keys).
type keyPanels struct {
	kb0, kb1 int
	get      func(kb int) (kt, v []float32)
	// prefetch says the steps (kernelSet.steps4) of each panel but the
	// last prefetch the next panel's inputs (panelInputs of KV head kvh);
	// those of the last prefetch the worker's scratch.end.
	prefetch bool
	kvh      int
	// pairs says the block's query rows are in scratch.q16 and KV head
	// kvh's key panels in call.kt16 as bfloat16 pairs too (call.pairs: the
	// set has pairKernels), for its steps. (Not slices here: a slice of kp
	// passed to a function value would move kp's closures to the heap.)
	pairs bool
	// vFinite, where not nil, says whether panel kb's value rows are all
	// finite (call.vFinite), once get(kb) has returned.
	vFinite []bool
	// joined says that the value rows get(kb) returns run on past the
	// panel to the last key (a dense call's KV head, in one array), so
	// that a P·V may span panels (shortRows).
	joined bool
	// amx, where not nil, gives panel kb's AMX operands, followed by the
	// next panels' (call after get), and whether the AMX path may take it.
	amx func(kb int) (kB, vB []uint16, ok bool)
}

// attendRows runs the online softmax of a block's rowsN query rows q
// (rounded up to four, zero rows after rowsN) against the key panels kp
// (keys kp.kb0·panel .. kp.kb1·panel-1, those a row sees) and writes each
// row's output (scaled by outScale) and log-sum-exp; a row that sees no key
// of the range gets zeros and -Inf. A base2 set whose scaled scores grew
// past hugeBase2 in some row hands the block to its natural kernels.
func (c *call) attendRows(sc *scratch, q []float32, rowsN int, scoreScale, outScale float32, outBuf []float32, br blockRows, kp keyPanels) {
	if !c.attendRowsWith(c.ks, sc, q, rowsN, scoreScale, outScale, outBuf, br, kp) {
		kp.amx = nil // (AMX's softmax is in base 2)
		c.attendRowsWith(c.ks.natural, sc, q, rowsN, scoreScale, outScale, outBuf, br, kp)
	}
}

// hugeBase2 bounds the running maxima of a base2 set's rows (scores times
// the scale and log2e). Its fused steps take 2^(c·x - m) with c·x
// unrounded and m a rounded maximum, so that the largest weight of a row
// is 2^δ, δ up to half a unit in the last place of m: from 2^24 on, 2^δ
// is at least 2, and from 2^31 on it overflows or vanishes. The natural
// kernels subtract the rounded maximum from the rounded scores, which
// leaves the largest weight 1.
const hugeBase2 = 1 << 24

// attendRowsWith is attendRows on kernel set ks. It returns false,
// writing no output, where ks is a base2 set and some row's running
// maximum reached hugeBase2 in magnitude.
func (c *call) attendRowsWith(ks *kernelSet, sc *scratch, q []float32, rowsN int, scoreScale, outScale float32, outBuf []float32, br blockRows, kp keyPanels) bool {
	D := c.d
	if br.softcap > 0 {
		kp.amx = nil // AMX, like the fused steps, computes its softmax on the scores it makes
	}
	if ks.base2 {
		// The softmax in base 2: scores times log2e (kernelSet.base2),
		// and a positive scale, which the fused step's maxima need
		// (kernelSet.scoresSoftmax4).
		if s2 := float32(float64(scoreScale) * math.Log2E); s2 > 0 && !math.IsInf(float64(s2), 0) {
			scoreScale = s2
		} else {
			ks, kp.amx = ks.natural, nil
		}
	}
	rows := (rowsN + 3) &^ 3
	m, l, acc := sc.m[:rows], sc.l[:rows], sc.acc[:rows*D]
	negInf := float32(math.Inf(-1))
	for r := range m {
		m[r], l[r] = negInf, 0
	}
	clear(acc)
	s := sc.s[:4*panel]
	// The AMX path takes groups of 16 rows whose query parts AMX keeps
	// (amxRowsOK, a bit a group) against the full panels whose elements
	// AMX keeps, where each of their rows sees a key of the panel
	// (amxAble): the loop below leaves those to amxGroups, which runs them
	// after it.
	var amxRowsOK uint64
	if kp.amx != nil {
		part := amxRows * D
		if c.amxExact {
			part = 0 // h alone: the exact form reads no other part
		}
		for g := 0; g+amxRows <= rowsN && g < 64*amxRows; g += amxRows {
			if ks.amx.splitRows(sc.qa[g*3*D:], part, D, q[g*D:], D, amxRows, D/32) {
				amxRowsOK |= 1 << (g / amxRows)
			}
		}
	}
	// Rows see keys [first(i), visible(i)); both grow with i, so the last
	// row bounds the block's key range and the first row's window starts
	// it: panels before it are skipped (neither built nor read).
	// Each row's keys [rowLo[r], rowHi[r]), once a block (the closures
	// are calls).
	rowLo, rowHi := sc.rowLo[:rowsN], sc.rowHi[:rowsN]
	br.bounds(rowLo, rowHi)
	nmax := min(rowHi[rowsN-1], kp.kb1*panel)
	kb0 := kp.kb0
	kp.kb0 = max(kp.kb0, rowLo[0]/panel)
	fused := br.softcap == 0 // the fused steps compute the softmax of the raw scores
	// The bounded steps (kernelSet.stepsBounded4, scoresSoftmaxBounded4)
	// take the groups the plain fused steps do not: rows that see part of
	// a panel, and softcapped scores (m2 and ck as softcapRow computes
	// them).
	bounded := ks.scoresSoftmaxBounded4 != nil && ks.stepsBounded4 != nil
	var capM2, capCK float32
	if br.softcap > 0 {
		k := float32(1)
		if ks.base2 {
			k = math.Log2E
		}
		capM2, capCK = -2/br.softcap, br.softcap*k
		bounded = bounded && capCK != 0
	}
	ableOf := func(kb, g int) bool {
		if amxRowsOK&(1<<(g/amxRows)) == 0 || (kb+1)*panel > nmax {
			return false
		}
		// Each row must see a key of the panel (the AMX softmax masks to
		// the rows' bounds, amxBounds; a row with none of the panel's
		// keys and none before would get NaN from its m of -Inf).
		j0 := kb * panel
		if rowLo[g+amxRows-1] > j0 || rowHi[g] < j0+panel { // not every row sees the whole panel
			for r := g; r < g+amxRows; r++ {
				if max(rowLo[r], j0) >= min(rowHi[r], j0+panel) {
					return false
				}
			}
		}
		_, _, ok := kp.amx(kb)
		return ok
	}
	// ableOf of each panel and group, once a block, as the loop below
	// gets the panel (kp.amx's answer holds once it is built): bit
	// g/amxRows of able[kb-kp.kb0].
	var able []uint64
	if amxRowsOK != 0 {
		able = freelist.Grow(sc.amxAble, max(0, nmax/panel-kp.kb0))
		sc.amxAble = able
	}
	kb0able := kp.kb0
	amxAble := func(kb, g int) bool {
		i := kb - kb0able
		return g%amxRows == 0 && i >= 0 && i < len(able) && able[i]&(1<<(g/amxRows)) != 0
	}
	if shortForm(ks, &kp, amxRowsOK != 0, kp.kb0, (nmax+panel-1)/panel) {
		c.shortRows(ks, sc, q, rowsN, scoreScale, br, kp, nmax, m, l, acc)
	} else {
		for kb := kp.kb0; kb*panel < nmax; kb++ {
			j0 := kb * panel
			n := min(panel, nmax-j0)
			kt, vb := kp.get(kb)
			vb = vb[:n*D]
			if i := kb - kb0able; i < len(able) {
				var bits uint64
				for g := 0; g+amxRows <= rowsN && g < 64*amxRows; g += amxRows {
					if ableOf(kb, g) {
						bits |= 1 << (g / amxRows)
					}
				}
				able[i] = bits
			}
			vf := kp.vFinite != nil && kp.vFinite[kb] // the panel's values are finite
			for g := 0; g < rowsN; g += 4 {
				if amxRowsOK != 0 && amxAble(kb, g) {
					g += amxRows - 4
					continue
				}
				qg, alpha := q[g*D:(g+4)*D], &sc.alpha
				full := fused && n == panel && g+4 <= rowsN && rowHi[g] >= j0+panel && rowLo[g+3] <= j0
				if ks.steps4 != nil && amxRowsOK == 0 && full {
					// This group and every later full one (visible keys only
					// grow with the row; a window's first key too, so the
					// full groups end where it passes j0) in one call.
					e := rowsN &^ 3
					for e > g+4 && rowLo[e-1] > j0 {
						e -= 4
					}
					pf := c.stepsAhead(sc, kp, kb, nmax)
					if kp.pairs {
						pi := kp.kvh*c.panels + kb
						ks.pairs.steps4(s, sc.q16[g*D/2:e*D/2], c.kt16[pi*D/2*panel:(pi+1)*D/2*panel], vb, acc[g*D:e*D], D, scoreScale, m[g:e], l[g:e], alpha, (e-g)/4, pf)
					} else {
						ks.steps4(s, q[g*D:e*D], kt, vb, acc[g*D:e*D], D, scoreScale, m[g:e], l[g:e], alpha, (e-g)/4, pf)
					}
					g = e - 4
					continue
				}
				if ks.scoresSoftmax4 != nil && full {
					// Four full rows (visible keys only grow with the row).
					ks.scoresSoftmax4(s, qg, kt, D, scoreScale, m[g:g+4], l[g:g+4], alpha)
					ks.pv4(acc[g*D:(g+4)*D], s, vb, D, panel, (*[4]float32)(alpha[:4]))
					continue
				}
				var k groupKeys
				k.of(rowLo, rowHi, m, g, rowsN, j0, n)
				if !k.seen {
					continue
				}
				if bounded && k.oneStep(vf) {
					// The bounded steps with one P·V each (the rows' keys the
					// same, or the panel's values finite, so that their other
					// keys' weights of 0 add nothing): this group and the
					// next ones that take them, up to a full group of the
					// plain steps or an AMX group, in one call.
					bs := sc.stepBounds[:0]
					e := g
					for {
						bs = append(bs, rowBounds{})
						k.bounds(&bs[len(bs)-1], min(4, rowsN-e), capM2, capCK)
						if e += 4; e >= rowsN || amxRowsOK != 0 && amxAble(kb, e) {
							break
						}
						if ks.steps4 != nil && amxRowsOK == 0 && fused && n == panel && e+4 <= rowsN && rowHi[e] >= j0+panel && rowLo[e+3] <= j0 {
							break
						}
						if k.of(rowLo, rowHi, m, e, rowsN, j0, n); !k.seen || !k.oneStep(vf) {
							break
						}
					}
					if pf := c.stepsAhead(sc, kp, kb, nmax); kp.pairs && ks.pairs != nil && ks.pairs.stepsBounded4 != nil {
						// On bfloat16 pairs: the whole panel's dot products,
						// at twice the float32 rate, then the bounds.
						pi := kp.kvh*c.panels + kb
						ks.pairs.stepsBounded4(s, sc.q16[g*D/2:e*D/2], c.kt16[pi*D/2*panel:(pi+1)*D/2*panel], vb, acc[g*D:e*D], D, scoreScale, m[g:e], l[g:e], alpha, len(bs), pf, bs)
					} else {
						ks.stepsBounded4(s, q[g*D:e*D], kt, vb, acc[g*D:e*D], D, scoreScale, m[g:e], l[g:e], alpha, len(bs), pf, bs)
					}
					g = e - 4
					continue
				}
				nl, nr, lo4, common := k.nl, k.nr, k.lo4, k.common
				if bounded && !k.unseen {
					// The bounded step on each row's own keys, softcapped
					// where there is a softcap.
					b := &sc.bounds
					k.bounds(b, min(4, rowsN-g), capM2, capCK)
					ks.scoresSoftmaxBounded4(s, qg, kt, D, scoreScale, m[g:g+4], l[g:g+4], alpha, b)
				} else {
					// The scores of the keys some row sees, [u0, u1): where
					// that is part of the panel (a window's edge, the causal
					// diagonal) and the set can, those alone.
					if u0, u1 := k.u0, k.u1; ks.scoresKeys4 != nil && (u0 > 0 || u1 < panel) {
						ks.scoresKeys4(s, qg, kt, D, scoreScale, u0, u1, panel)
						if br.softcap > 0 {
							for r := range 4 {
								softcapRow(ks, s[r*panel+u0:r*panel+u1], br.softcap, sc.t32)
							}
						}
					} else {
						ks.scores4(s, qg, kt, D, scoreScale)
						if br.softcap > 0 {
							softcapRow(ks, s[:4*panel], br.softcap, sc.t32)
						}
					}
					// Each row's softmax step over its own visible keys
					// (softcapped first): new maxima first, then the four
					// rescale factors alpha = e^(m_old-m_new) in one vector
					// exponential (e^0 = 1 exactly where a row has no old
					// sum), then the rows.
					*alpha = [8]float32{}
					for r := range 4 {
						i := g + r
						if i >= rowsN || nr[r] == nl[r] {
							continue
						}
						row := s[r*panel+nl[r] : r*panel+nr[r]]
						mOld := m[i]
						mNew := max(mOld, ks.rowMax(row))
						if l[i] != 0 || mOld != mOld {
							alpha[r] = mOld - mNew
						}
						m[i] = mNew
					}
					ks.expSum(alpha[:], 0)
					for r := range 4 {
						if i := g + r; i < rowsN && nr[r] > nl[r] {
							l[i] = l[i]*alpha[r] + ks.expSum(s[r*panel+nl[r]:r*panel+nr[r]], m[i])
						}
					}
				}
				// Keys every row sees, [lo4, common), go through pv4; a
				// causal diagonal or a window's lower edge leaves each row a
				// few more on either side (or, with no common key, all).
				pv4 := common > lo4
				if pv4 {
					ks.pv4(acc[g*D:(g+4)*D], s[lo4:], vb[lo4*D:], D, common-lo4, (*[4]float32)(alpha[:4]))
				}
				for r := range 4 {
					if g+r >= rowsN || nr[r] <= nl[r] {
						continue
					}
					row := acc[(g+r)*D : (g+r+1)*D]
					if !pv4 {
						ks.pv1(row, s[r*panel+nl[r]:r*panel+nr[r]], vb[nl[r]*D:], D, nr[r]-nl[r], alpha[r])
						continue
					}
					if nl[r] < lo4 {
						ks.pv1(row, s[r*panel+nl[r]:r*panel+lo4], vb[nl[r]*D:], D, lo4-nl[r], 1)
					}
					if nr[r] > common {
						ks.pv1(row, s[r*panel+common:r*panel+nr[r]], vb[common*D:], D, nr[r]-common, 1)
					}
				}
			}
		}
	}
	if amxRowsOK != 0 {
		c.amxGroups(sc, rowsN, kp, nmax, amxAble, scoreScale, m, l, acc)
	}
	// A row has an output where it sees a key of the range [kb0, kb1)
	// panels.
	sees := func(r int) bool { return max(rowLo[r], kb0*panel) < min(rowHi[r], kp.kb1*panel) }
	mScale := float32(1) // m in natural units: m·mScale
	if ks.base2 {
		for r := range rowsN {
			if sees(r) && abs32(m[r]) >= hugeBase2 {
				return false
			}
		}
		mScale = math.Ln2
	}
	// Each row's output is acc·(outScale/l), with l grown by the sink's
	// e^(sink - m) where there is one; a row that sees no key has acc 0,
	// and a factor 0 makes its output 0. The sinks' terms come from the
	// set's exponential, all rows in one call, on -|x| (its domain), x =
	// sink - m in its units (sink·log2e - m in a base2 set): u = e^x where
	// x <= 0, else u = e^-x and outScale/(l + 1/u) = outScale·u/(l·u + 1).
	f := sc.f[:rowsN]
	var u []float32
	sinkK := float32(1)
	if ks.base2 {
		sinkK = math.Log2E
	}
	if br.sink != nil {
		if len(sc.t32) < rowsN {
			sc.t32 = make([]float32, rowsN)
		}
		u = sc.t32[:rowsN]
		for r := range u {
			f[r] = br.sink(r)*sinkK - m[r] // x, until f[r] is set below
			u[r] = -abs32(f[r])
		}
		ks.expSum(u, 0)
	}
	for r := range f {
		x := f[r]
		f[r] = 0
		if sees(r) {
			d := l[r]
			if u == nil {
				f[r] = outScale / d
			} else if x <= 0 {
				f[r] = outScale / (d + u[r])
			} else {
				f[r] = outScale * u[r] / (d*u[r] + 1)
			}
		}
	}
	if br.outStride > 0 {
		ks.scaleRows(outBuf[br.out(0):], br.outStride, acc, D, f)
	} else {
		for r := range f {
			ks.scaleRows(outBuf[br.out(r):], D, acc[r*D:], D, f[r:r+1])
		}
	}
	if br.lseBuf == nil {
		return true
	}
	// The log-sum-exps in a loop of their own, whose logarithms overlap.
	for r := 0; r < rowsN; r++ {
		lse := negInf
		if sees(r) {
			lse = m[r]*mScale + log32(l[r])
		}
		br.lseBuf[br.lse(r)] = lse
	}
	return true
}

// groupKeys is what a group of four rows of a block sees of a panel's
// keys (groupKeys.of).
type groupKeys struct {
	// nl, nr: row r's keys [nl[r], nr[r]) of the panel (none for a
	// padding row); lo4, common: the keys all four rows see, [lo4,
	// common); u0, u1: the keys some row sees, [u0, u1).
	nl, nr              [4]int
	lo4, common, u0, u1 int
	// seen: some row sees a key; unseen: some row sees none of the
	// panel's and has seen none before (its m is -Inf); same: every row
	// (padding aside) sees the same keys.
	seen, unseen, same bool
}

// of sets k to the groupKeys of rows g..g+3 of a block (rowsN rows, row
// i seeing keys [rowLo[i], rowHi[i]), running maxima m) in the panel of
// keys [j0, j0+n).
func (k *groupKeys) of(rowLo, rowHi []int, m []float32, g, rowsN, j0, n int) {
	*k = groupKeys{common: n, u0: n, same: true}
	for r := range 4 {
		i := g + r
		if i >= rowsN { // padding: its output is never written
			continue
		}
		k.nr[r] = max(0, min(n, rowHi[i]-j0))
		k.nl[r] = min(k.nr[r], max(0, rowLo[i]-j0))
		k.lo4, k.common = max(k.lo4, k.nl[r]), min(k.common, k.nr[r])
		k.same = k.same && k.nl[r] == k.nl[0] && k.nr[r] == k.nr[0]
		if k.nr[r] > k.nl[r] {
			k.seen = true
			k.u0, k.u1 = min(k.u0, k.nl[r]), max(k.u1, k.nr[r])
		} else if m[i] == float32(math.Inf(-1)) {
			k.unseen = true
		}
	}
}

// oneStep says whether the group can take the bounded steps with one P·V
// over the keys [u0, u1) (kernelSet.stepsBounded4): every row has a key
// here or before, and each row's other keys of [u0, u1), which weigh 0,
// add nothing: there are none (same), or the panel's values are finite
// (vf, call.vFinite).
func (k *groupKeys) oneStep(vf bool) bool { return !k.unseen && (k.same || vf) }

// bounds sets b to the group's rowBounds (real of its rows not padding,
// which take the first row's keys), softcapped by m2 and ck (0: none),
// its P·V over [u0, u1).
func (k *groupKeys) bounds(b *rowBounds, real int, m2, ck float32) {
	*b = rowBounds{m2: m2, ck: ck, p0: int32(k.u0), pn: int32(k.u1 - k.u0)}
	for r := range 4 {
		lo, hi := k.nl[r], k.nr[r]
		if r >= real {
			lo, hi = k.nl[0], k.nr[0]
		}
		b.lo[r], b.hi[r] = int32(lo), int32(hi)
	}
}

// stepsAhead is what the steps of panel kb prefetch (keyPanels.prefetch):
// the next panel's inputs, or during the block's last (the one that holds
// key nmax-1), the worker's scratch.end.
func (c *call) stepsAhead(sc *scratch, kp keyPanels, kb, nmax int) ahead {
	if !kp.prefetch {
		return ahead{}
	}
	if (kb+1)*panel < nmax {
		return c.panelInputs(kp.kvh, kb+1)
	}
	return sc.end
}

// softcapRow replaces each score x of row (in the set's domain: natural, or
// times log2e in a base2 set) by the softcapped score c·tanh(y) in that
// domain, y the natural score over c, through the set's exponential on
// non-positive arguments (its contract): e = e^(-2|y|) in (0, 1] (2^(-2|x|/c)
// in a base2 set, the same number), tanh|y| = (1-e)/(1+e), the sign of x
// restored. NaN stays NaN, ±Inf becomes ±c. tmp holds len(row) floats.
// The error is a few float32 ulps of the exponential, at most c in
// magnitude: what sdpatest's softcap term allows. A set's softcap kernel
// does the same in one pass (softcapGo's loops, bit for bit).
func softcapRow(ks *kernelSet, row []float32, c float32, tmp []float32) {
	k := float32(1)
	if ks.base2 {
		k = math.Log2E
	}
	m2, ck := -2/c, c*k
	if ks.softcap != nil {
		ks.softcap(row, m2, ck)
		return
	}
	softcapGo(ks.expSum, row, m2, ck, tmp)
}

// softcapGo is softcapRow's loops with m2 = -2/c and ck = c (times log2e
// in a base2 set): e = expSum of |x|·m2 (a kernel set's), then softcapOf.
// tmp holds len(row) floats.
func softcapGo(expSum func([]float32, float32) float32, row []float32, m2, ck float32, tmp []float32) {
	tmp = tmp[:len(row)]
	softcapArgs(tmp, row, m2)
	expSum(tmp, 0)
	softcapFinish(row, tmp, ck)
}

// softcapTail is softcapGo with expSumGo on the fewer than 8 scores a
// kernel leaves after its last whole vector, where the set's expSum takes
// expSumGo too; its scratch stays on the stack.
func softcapTail(row []float32, m2, ck float32) {
	var tmp [8]float32
	e := tmp[:len(row)]
	softcapArgs(e, row, m2)
	expSumGo(e, 0)
	softcapFinish(row, e, ck)
}

// softcapArgs sets e[j] = |row[j]|·m2, the softcap's exponential's
// arguments.
func softcapArgs(e, row []float32, m2 float32) {
	for j, x := range row {
		e[j] = abs32(x) * m2
	}
}

// softcapFinish sets row[j] = softcapOf(row[j], e[j], ck).
func softcapFinish(row, e []float32, ck float32) {
	for j, x := range row {
		row[j] = softcapOf(x, e[j], ck)
	}
}

// softcapOf is softcapRow's score for x with e = e^(-2|y|) (y the natural
// score over the softcap c) and ck = c (times log2e in a base2 set):
// ck·(1-e)/(1+e), each operation rounded in this order, with x's sign.
func softcapOf(x, e, ck float32) float32 {
	const sign = 1 << 31
	return math.Float32frombits(math.Float32bits(ck*(1-e)/(1+e)) | math.Float32bits(x)&sign)
}

// abs32 is |x|, its sign bit cleared (NaN stays NaN).
func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
