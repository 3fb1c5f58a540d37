//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// amxKernels: the AVX-512 set, with blocks of 16 full rows against full key
// panels on AMX tiles (amx.go), on CPUs with AMX-BF16 that the OS lets this
// process use.
var amxKernels = withAMX("amx", amxGemm6Asm, true)

// amxEmulated is amxKernels with the tile products in Go (amxGemm6Go): the
// AMX path's layouts, splits and steps, testable on any AVX-512 CPU.
var amxEmulated = withAMX("amx-emulated", amxGemm6Go, false)

// amxFP8Kernels runs FP8 problems as amxKernels does, whose operands are
// exact in bfloat16 so that the fused form needs three of its twelve
// product steps (call.amxExact), and every other problem on avx512Kernels.
var amxFP8Kernels = func() kernelSet {
	ks := withAMX("amxfp8", amxGemm6Asm, true)
	ks.amxExactOnly = true
	return ks
}()

// withAMX returns avx512Kernels named name with the AMX path on gemm's
// tile products, and with the fused form (amxAttend64, tile instructions)
// if fused.
func withAMX(name string, gemm func(c []float32, ldc int, a []uint16, lda, aPart int, b []uint16, bPart, bStep, ks int), fused bool) kernelSet {
	ks := avx512Kernels
	ks.name = name
	ks.amx = &amxOps{
		gemm:       gemm,
		splitRows:  amxSplitRowsAsm,
		splitPairs: amxSplitPairsAsm,
		softmax4:   softmax4AVX512,

		softmax4Bounded: softmaxBounded4AVX512,
		update:          amxUpdateAsm,
	}
	if fused {
		ks.amx.attend64 = amxAttend64Asm
	}
	return ks
}

// hasAMX reports whether this CPU has AMX-BF16 with AVX-512 (for the
// softmax and the splits) and the OS grants this process the tile state.
func hasAMX() bool {
	return cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && amxPermit()
}

func softmax4AVX512(s []float32, scale float32, m, l []float32, alpha []float32) {
	_, _, _, _ = s[4*panel-1], m[3], l[3], alpha[7]
	softmax4x64AVX512(&s[0], scale, &m[0], &l[0], &alpha[0])
}

func softmaxBounded4AVX512(s []float32, scale float32, m, l []float32, alpha []float32, b *rowBounds) {
	_, _, _, _ = s[4*panel-1], m[3], l[3], alpha[7]
	softmaxBounded4x64AVX512(&s[0], scale, &m[0], &l[0], &alpha[0], b)
}

// The wrappers check every bound the assembly relies on, so that a wrong
// call panics in Go instead of reading or writing out of bounds.

func amxGemm6Asm(c []float32, ldc int, a []uint16, lda, aPart int, b []uint16, bPart, bStep, ks int) {
	if ks <= 0 {
		panic("cpu: amxGemm6 with no k steps")
	}
	_ = c[(amxRows-1)*ldc+63]
	_ = a[2*aPart+(amxRows-1)*lda+32*ks-1]
	_ = b[2*bPart+(ks-1)*bStep+4*amxTile-1]
	amxGemm6(&c[0], 4*ldc, &a[0], 2*lda, 2*aPart, &b[0], 2*bPart, 2*bStep, ks)
}

func amxSplitRowsAsm(dst []uint16, dstPart, dstRow int, src []float32, srcRow, rows, chunks int) bool {
	if rows <= 0 || chunks <= 0 {
		return true
	}
	_ = dst[2*dstPart+(rows-1)*dstRow+32*chunks-1]
	_ = src[(rows-1)*srcRow+32*chunks-1]
	return amxSplitRows(&dst[0], 2*dstPart, 2*dstRow, &src[0], 4*srcRow, rows, chunks)
}

func amxSplitPairsAsm(dst []uint16, dstPart, dstVec, dstPair int, src []float32, srcPair, srcRow, pairs, vecs int) bool {
	if pairs <= 0 || vecs <= 0 {
		return true
	}
	_ = dst[2*dstPart+(pairs-1)*dstPair+(vecs-1)*dstVec+31]
	_ = src[(pairs-1)*srcPair+srcRow+16*vecs-1]
	return amxSplitPairs(&dst[0], 2*dstPart, 2*dstVec, 2*dstPair, &src[0], 4*srcPair, 4*srcRow, pairs, vecs)
}

func amxUpdateAsm(acc, t []float32, d int, alpha []float32, rows int) {
	if rows <= 0 || d <= 0 {
		return
	}
	if d%16 != 0 {
		panic("cpu: amxUpdate with d not a multiple of 16")
	}
	_, _, _ = acc[rows*d-1], t[rows*d-1], alpha[rows-1]
	amxUpdate(&acc[0], &t[0], d, &alpha[0], rows)
}

//go:noescape
func amxGemm6(c *float32, ldc int, a *uint16, lda, aPart int, b *uint16, bPart, bStep, ks int)

//go:noescape
func amxSplitRows(dst *uint16, dstPart, dstRow int, src *float32, srcRow, rows, chunks int) (ok bool)

//go:noescape
func amxSplitPairs(dst *uint16, dstPart, dstVec, dstPair int, src *float32, srcPair, srcRow, pairs, vecs int) (ok bool)

// amxAttend64Asm runs a's panels with the fused assembly (amxAttend64),
// after checking its slices' bounds.
func amxAttend64Asm(a *amxGroup) {
	part, op := amxRows*64, amxPanelSize(64)
	if a.panels <= 0 {
		return
	}
	_, _ = a.qa[3*part-1], a.pa[3*part-1]
	_, _ = a.kB[a.panels*op-1], a.vB[a.panels*op-1]
	_, _ = a.s[amxRows*panel-1], a.t[amxRows*64-1]
	_, _, _, _ = a.m[amxRows-1], a.l[amxRows-1], a.alpha[amxRows+3], a.acc[amxRows*64-1]
	args := amxGroupArgs{
		qa: &a.qa[0], kB: &a.kB[0], vB: &a.vB[0], panels: a.panels,
		s: &a.s[0], pa: &a.pa[0], t: &a.t[0],
		m: &a.m[0], l: &a.l[0], alpha: &a.alpha[0], acc: &a.acc[0], scale: a.scale,
	}
	if a.exact {
		args.exact = 1
	}
	if a.bounds != nil {
		_ = a.bounds[4*a.panels-1]
		args.bounds = &a.bounds[0]
	}
	amxAttend64(&args)
}

// amxGroupArgs is amxGroup as amxAttend64 reads it (field offsets fixed
// in amx_amd64.s).
type amxGroupArgs struct {
	qa, kB, vB *uint16
	panels     int
	s          *float32
	pa         *uint16
	t          *float32
	m, l       *float32
	alpha, acc *float32
	scale      float32
	exact      int64 // amxGroup.exact: 1, else 0
	// bounds: amxGroup.bounds (nil: none), advanced a panel at a time by
	// amxAttend64.
	bounds *rowBounds
}

//go:noescape
func amxAttend64(a *amxGroupArgs)

//go:noescape
func amxUpdate(acc, t *float32, d int, alpha *float32, rows int)

//go:noescape
func softmax4x64AVX512(s *float32, scale float32, m, l, alpha *float32)

//go:noescape
func softmaxBounded4x64AVX512(s *float32, scale float32, m, l, alpha *float32, b *rowBounds)

func amxConfigRelease()
