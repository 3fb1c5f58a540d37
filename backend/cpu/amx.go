package cpu

import "math"

// The AMX path: Intel's tile multiply (AMX-BF16, Sapphire Rapids and later
// Xeons) computes the two products of attention for blocks of 16 query rows
// and one key panel, at float32 accuracy.
//
// AMX multiplies bfloat16 and accumulates in float32. Every float32 x is
// split exactly into three bfloat16 parts, x = h + m + l (h is x truncated
// to bfloat16, m the remainder truncated, l what is left: 8 + 8 + 8
// significant bits), and a product x·y is taken as the six part products
// that reach float32's precision:
//
//	l·h + m·m + h·l + m·h + h·m + h·h
//
// accumulated smallest first. With |m| < 2^-7·|x| and |l| < 2^-15·|x|,
// the three left out (m·l, l·m, l·l) are below 2^-21 of |x·y| together:
// within the error bound of a float32 dot product of 8 or more terms
// (about n·2^-24 of the sum of its products' magnitudes), so the scores
// and outputs carry float32's error (BF16x6; FP8 values are exact in h
// alone). AMX treats subnormal bfloat16 as zero, so a block or
// panel with a non-zero element below 2^-101 in magnitude, or a non-finite
// one, takes the AVX-512 kernels instead (the split reports it).
//
// Layouts (bfloat16 as uint16, strides in elements):
//   - A operands (Q rows, softmax weights P): part i of row r at
//     a[i·aPart + r·lda:], row-major, 32 columns a k step;
//   - B operands: tiles of 16 rows × 32 bfloat16, 512 elements each, row p
//     holding 16 pairs (x[2p][n], y[2p+1][n]) of the k dimension: for K
//     (Q·Kᵀ, k = head dimension, n = key) part j, k step s, n tile t at
//     j·64·D + (4s+t)·512; for V (P·V, k = key, n = head dimension) at
//     j·64·D + (s·D/16+t)·512.

// amxOps are the AMX path's kernels; a kernel set without it has nil.
type amxOps struct {
	// gemm sets C (16 rows × 64 float32, rows ldc apart) to the six part
	// products of A and B over ks k steps (amxGemm6Go).
	gemm func(c []float32, ldc int, a []uint16, lda, aPart int, b []uint16, bPart, bStep, ks int)
	// splitRows splits rows of src into A-operand parts (amxSplitRowsGo).
	splitRows func(dst []uint16, dstPart, dstRow int, src []float32, srcRow, rows, chunks int) bool
	// splitPairs splits pairs of rows of src into B-operand rows
	// (amxSplitPairsGo).
	splitPairs func(dst []uint16, dstPart, dstVec, dstPair int, src []float32, srcPair, srcRow, pairs, vecs int) bool
	// softmax4 is scoresSoftmax4 on four rows of dot products already in
	// s.
	softmax4 func(s []float32, scale float32, m, l []float32, alpha []float32)
	// softmax4Bounded is softmax4 on rows that see part of the panel
	// (rowBounds, no softcap): softmax4BoundedGo.
	softmax4Bounded func(s []float32, scale float32, m, l []float32, alpha []float32, b *rowBounds)
	// update sets acc = acc·alpha[r] + t on rows of d floats.
	update func(acc, t []float32, d int, alpha []float32, rows int)
	// attend64, if not nil, is amxStep on a run of panels at D 64 in one
	// call (amxAttend64): the next panel's scores on the tiles while this
	// one's softmax runs on the vector units.
	attend64 func(a *amxGroup)
}

// amxGroup is one group of 16 query rows against a run of consecutive
// full key panels (their operands panel after panel in kB and vB).
type amxGroup struct {
	qa, kB, vB []uint16
	panels     int
	s          []float32
	pa         []uint16
	t          []float32
	m, l       []float32
	alpha, acc []float32
	scale      float32
	// bounds, where not nil, holds for each panel of the run the key
	// bounds of its four groups of four rows (4·panels), which the softmax
	// masks to (softmax4Bounded): each row's other keys weigh 0, and the
	// panel's values, all finite (packAMXPanel), add 0 for them.
	bounds []rowBounds
	// exact says that every element of Q, K and V is a bfloat16 (an FP8
	// problem's code values): their m and l parts are zero, and attend64
	// leaves out the nine products of those (the results are the same, bit
	// for bit).
	exact bool
}

const (
	amxRows = 16  // query rows of one AMX step
	amxTile = 512 // bfloat16 in one B tile
)

// amxSplit returns x's three bfloat16 parts, as float32 with zero low
// halves, and whether AMX keeps them all (x finite, and zero or at least
// 2^-101 in magnitude).
func amxSplit(x float32) (h, m, l float32, ok bool) {
	const mask = 0xFFFF0000
	b := math.Float32bits(x)
	abs := b & 0x7FFFFFFF
	ok = abs == 0 || abs-0x0D000000 < 0x72800000
	h = math.Float32frombits(b & mask)
	r := x - h
	m = math.Float32frombits(math.Float32bits(r) & mask)
	return h, m, r - m, ok
}

func bf16(x float32) uint16 { return uint16(math.Float32bits(x) >> 16) }

func fromBF16(u uint16) float32 { return math.Float32frombits(uint32(u) << 16) }

// amxSplitRowsGo writes, for rows r < rows and columns c < 32·chunks, the
// parts of src[r·srcRow+c] into dst[i·dstPart + r·dstRow + c] (part i = 0
// h, 1 m, 2 l), l first and h last, so that with dstPart 0 it writes h
// alone (all exact operands need). It reports whether every element is one
// AMX keeps.
func amxSplitRowsGo(dst []uint16, dstPart, dstRow int, src []float32, srcRow, rows, chunks int) bool {
	ok := true
	for r := range rows {
		for c := range 32 * chunks {
			h, m, l, o := amxSplit(src[r*srcRow+c])
			ok = ok && o
			at := r*dstRow + c
			dst[2*dstPart+at], dst[dstPart+at], dst[at] = bf16(l), bf16(m), bf16(h)
		}
	}
	return ok
}

// amxSplitPairsGo writes, for pairs p < pairs, vectors v < vecs and
// columns c < 16, the parts of x = src[p·srcPair + 16v + c] and y =
// src[p·srcPair + srcRow + 16v + c] as bfloat16 pairs (x's low, y's high)
// at dst[i·dstPart + p·dstPair + v·dstVec + 2c], l first and h last (as
// amxSplitRowsGo). It reports whether every element is one AMX keeps.
func amxSplitPairsGo(dst []uint16, dstPart, dstVec, dstPair int, src []float32, srcPair, srcRow, pairs, vecs int) bool {
	ok := true
	for p := range pairs {
		for v := range vecs {
			for c := range 16 {
				xh, xm, xl, ox := amxSplit(src[p*srcPair+16*v+c])
				yh, ym, yl, oy := amxSplit(src[p*srcPair+srcRow+16*v+c])
				ok = ok && ox && oy
				at := p*dstPair + v*dstVec + 2*c
				dst[2*dstPart+at], dst[2*dstPart+at+1] = bf16(xl), bf16(yl)
				dst[dstPart+at], dst[dstPart+at+1] = bf16(xm), bf16(ym)
				dst[at], dst[at+1] = bf16(xh), bf16(yh)
			}
		}
	}
	return ok
}

// amxPairs lists the part products (i of A, j of B), smallest first.
var amxPairs = [6][2]int{{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}}

// amxGemm6Go is what the tile instructions compute: for each part pair
// (i, j) of amxPairs, each k step s < ks and each n tile t < 4, C's
// columns 16t..16t+15 += A_i[:, 32s:32s+32] · B_j[s][t], where B_j[s][t]
// is the tile at b[j·bPart + s·bStep + t·512]; C starts at zero. Each
// tile product adds, for each pair row p, both halves' products to the
// float32 sum in turn (TDPBF16PS's order in Intel's pseudocode; the
// hardware may round the pair's sum once, within the same error).
func amxGemm6Go(c []float32, ldc int, a []uint16, lda, aPart int, b []uint16, bPart, bStep, ks int) {
	var acc [amxRows][64]float32
	for _, pr := range amxPairs {
		ai, bj := a[pr[0]*aPart:], b[pr[1]*bPart:]
		for s := range ks {
			for t := range 4 {
				tile := bj[s*bStep+t*amxTile:]
				for r := range amxRows {
					row := ai[r*lda+32*s:]
					for n := range 16 {
						sum := acc[r][16*t+n]
						for p := range 16 {
							sum += fromBF16(row[2*p]) * fromBF16(tile[32*p+2*n])
							sum += fromBF16(row[2*p+1]) * fromBF16(tile[32*p+2*n+1])
						}
						acc[r][16*t+n] = sum
					}
				}
			}
		}
	}
	for r := range amxRows {
		copy(c[r*ldc:r*ldc+64], acc[r][:])
	}
}

// amxUpdateGo sets acc[r·d+c] = acc[r·d+c]·alpha[r] + t[r·d+c] for rows r
// < rows (one rounding where the assembly fuses it).
func amxUpdateGo(acc, t []float32, d int, alpha []float32, rows int) {
	for r := range rows {
		for c := range d {
			acc[r*d+c] = acc[r*d+c]*alpha[r] + t[r*d+c]
		}
	}
}

// amxUsable reports whether the AMX path can run a call of head dimension
// d whose blocks have at least one full group of amxRows query rows.
//
// With the tile instructions (attend64 set) that is D 64 only: there the
// fused assembly runs, and at other head dimensions amxStep's separate
// calls measured no faster than the AVX-512 kernels (docs/design/cpu.md).
// The emulated set takes every multiple of 64, so that amxStep, the fused
// form's reference, is tested at several head dimensions.
func (ks *kernelSet) amxUsable(d, blockRows int) bool {
	if ks.amx == nil || blockRows < amxRows {
		return false
	}
	if ks.amx.attend64 != nil {
		return d == 64
	}
	return d%64 == 0
}

// amxPanelSize is the bfloat16 elements of one panel's K (or V) operand.
func amxPanelSize(d int) int { return 3 * 64 * d }

// packAMXPanel builds the B operands of one full key panel from its
// transposed keys kt (as the AVX kernels' transpose lays them out: row i
// the panel's element i of each key) and its value rows v, and reports
// whether AMX keeps every element. With exact (call.amxExact) it writes
// the h parts alone, all the fused form then reads.
func (ks *kernelSet) packAMXPanel(kB, vB []uint16, kt, v []float32, d int, exact bool) bool {
	x := ks.amx
	part := 64 * d
	if exact {
		part = 0 // h alone (amxSplitPairsGo)
	}
	ok := true
	for s := range d / 32 { // K: k = head dimension, pairs of kt rows
		ok = x.splitPairs(kB[s*4*amxTile:], part, amxTile, 32, kt[32*s*panel:], 2*panel, panel, 16, 4) && ok
	}
	for s := range panel / 32 { // V: k = key, pairs of value rows
		ok = x.splitPairs(vB[s*(d/16)*amxTile:], part, amxTile, 32, v[32*s*d:], 2*d, d, 16, d/16) && ok
	}
	return ok
}

// amxGroups runs, for each group of 16 rows g that the AMX path takes,
// the runs of consecutive key panels able(kb, g) reports, on
// amxOps.attend64 where the set has it (D 64) and amxStep panel by panel
// otherwise.
func (c *call) amxGroups(sc *scratch, rowsN int, kp keyPanels, nmax int, able func(kb, g int) bool, scoreScale float32, m, l, acc []float32) {
	x, D := c.ks.amx, c.d
	for g := 0; g+amxRows <= rowsN; g += amxRows {
		qa := sc.qa[g*3*D : (g+amxRows)*3*D]
		for kb := kp.kb0; kb*panel < nmax; {
			if !able(kb, g) {
				kb++
				continue
			}
			run := 1
			for (kb+run)*panel < nmax && able(kb+run, g) {
				run++
			}
			kB, vB, _ := kp.amx(kb)
			bounds := c.amxBounds(sc, g, kb, run)
			if x.attend64 != nil && D == 64 {
				sc.group = amxGroup{
					qa: qa, kB: kB, vB: vB, panels: run,
					s: sc.s16, pa: sc.pa, t: sc.t,
					m: m[g : g+amxRows], l: l[g : g+amxRows], alpha: sc.alpha16[:], acc: acc[g*D : (g+amxRows)*D],
					scale: scoreScale, exact: c.amxExact, bounds: bounds,
				}
				x.attend64(&sc.group)
			} else {
				sz := amxPanelSize(D)
				for i := range run {
					var b []rowBounds
					if bounds != nil {
						b = bounds[4*i : 4*i+4]
					}
					c.amxStep(sc, g, qa, kB[i*sz:(i+1)*sz], vB[i*sz:(i+1)*sz], scoreScale, m, l, acc, b)
				}
			}
			kb += run
		}
	}
}

// amxBounds returns the key bounds of rows g..g+15 of the block (the
// scratch's rowLo and rowHi) in each of panels kb..kb+run-1
// (amxGroup.bounds), or nil where every row sees every key of them.
func (c *call) amxBounds(sc *scratch, g, kb, run int) []rowBounds {
	lo, hi := sc.rowLo[g:g+amxRows], sc.rowHi[g:g+amxRows]
	if lo[amxRows-1] <= kb*panel && hi[0] >= (kb+run)*panel {
		return nil
	}
	bounds := sc.amxBounds[:4*run]
	for i := range run {
		j0 := (kb + i) * panel
		for r := range amxRows {
			b := &bounds[4*i+r/4]
			b.lo[r%4] = int32(min(panel, max(0, lo[r]-j0)))
			b.hi[r%4] = int32(min(panel, max(0, hi[r]-j0)))
			b.m2, b.ck = 0, 0
		}
	}
	return bounds
}

// amxStep runs one key panel for query rows g..g+15 of a block: scores by
// AMX into sc.s16, the online-softmax step on them four rows at a time,
// the weights split, P·V by AMX into sc.t, and acc rescaled and added. qa
// holds the group's query parts (part stride 16·D), kB and vB the panel's
// operands; bounds, where not nil, the rows' key bounds in the panel
// (amxGroup.bounds).
func (c *call) amxStep(sc *scratch, g int, qa []uint16, kB, vB []uint16, scoreScale float32, m, l, acc []float32, bounds []rowBounds) {
	x, D := c.ks.amx, c.d
	s, alpha := sc.s16, sc.alpha16[:]
	x.gemm(s, panel, qa, D, amxRows*D, kB, 64*D, 4*amxTile, D/32)
	for r := 0; r < amxRows; r += 4 {
		if bounds != nil {
			x.softmax4Bounded(s[r*panel:], scoreScale, m[g+r:], l[g+r:], alpha[r:], &bounds[r/4])
			continue
		}
		x.softmax4(s[r*panel:], scoreScale, m[g+r:], l[g+r:], alpha[r:])
	}
	x.splitRows(sc.pa, amxRows*panel, panel, s, panel, amxRows, panel/32)
	for n := 0; n < D; n += 64 {
		x.gemm(sc.t[n:], D, sc.pa, panel, amxRows*panel, vB[(n/16)*amxTile:], 64*D, (D/16)*amxTile, panel/32)
	}
	x.update(acc[g*D:], sc.t, D, alpha, amxRows)
}
