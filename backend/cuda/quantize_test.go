//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// hostQuantize is the reference: per (batch, head), the head's elements in
// (row, column) order through fp8.QuantizeE4M3 with mode m for the codes
// (NoSat is the library's), scattered back by the layout.
func hostQuantize(x []float32, s tensorShape, m fp8.Mode) ([]fp8.E4M3, []float32) {
	codes, scales := make([]fp8.E4M3, len(x)), make([]float32, s.B*s.H)
	head := make([]float32, s.S*s.D)
	hc := make([]fp8.E4M3, s.S*s.D)
	for bh := range scales {
		b, h := bh/s.H, bh%s.H
		for i := range s.S {
			o := s.Layout.Offset(b, h, i, s.H, s.S, s.D)
			copy(head[i*s.D:(i+1)*s.D], x[o:o+s.D])
		}
		scales[bh] = fp8.ScaleForAmax(fp8.Amax(head))
		fp8.EncodeE4M3(hc, head, scales[bh], m)
		for i := range s.S {
			o := s.Layout.Offset(b, h, i, s.H, s.S, s.D)
			copy(codes[o:o+s.D], hc[i*s.D:(i+1)*s.D])
		}
	}
	return codes, scales
}

// specialInputs fills a tensor whose heads each stress one case: ordinary
// N(0,1), huge (1e30) and tiny (subnormal) magnitudes, an all-zero head,
// a head of only NaN and ±Inf (amax 0, scale 1), amax 448 exactly with
// E4M3's rounding ties and overflow edges, and ordinary values sprinkled
// with NaN, ±Inf, ±0 and float32 subnormals.
func specialInputs(rng *rand.Rand, s tensorShape) []float32 {
	x := make([]float32, s.B*s.H*s.S*s.D)
	edges := []float32{448, 464, math.Nextafter32(464, 500), math.Nextafter32(464, 0), 480, 0.5 / 512, 1.5 / 512, 0.75 / 512,
		0.25 / 512, math.Nextafter32(0.5/512, 1), 1.0 / 64, 15.0 / 512, 15.5 / 512, 17, 18, 19, 0}
	for bh := range s.B * s.H {
		b, h := bh/s.H, bh%s.H
		for i := range s.S {
			for d := range s.D {
				o := s.Layout.Offset(b, h, i, s.H, s.S, s.D) + d
				v := float32(rng.NormFloat64())
				switch bh % 7 {
				case 1:
					v *= 1e30
				case 2:
					v *= 1e-42
				case 3:
					v = 0
				case 4:
					v = [...]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[rng.IntN(3)]
				case 5:
					v = edges[rng.IntN(len(edges))]
					if rng.IntN(2) == 0 {
						v = -v
					}
					if i == 0 && d == 0 {
						v = 448 // the head's amax: scale 1
					}
				case 6:
					switch rng.IntN(8) {
					case 0:
						v = float32(math.NaN())
					case 1:
						v = float32(math.Inf(rng.IntN(2)*2 - 1))
					case 2:
						v = float32(math.Copysign(0, float64(v)))
					case 3:
						v = math.Float32frombits(uint32(rng.IntN(1 << 23)))
					}
				}
				x[o] = v
			}
		}
	}
	return x
}

func deviceQuantize(t *testing.T, d *device, x []float32, s tensorShape) ([]fp8.E4M3, []float32) {
	t.Helper()
	src, err := d.Alloc(int64(4 * len(x)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	codes, err := d.Alloc(int64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	defer codes.Free()
	scales, err := d.Alloc(int64(4 * s.B * s.H))
	if err != nil {
		t.Fatal(err)
	}
	defer scales.Free()
	if err := src.Write(bytesOf(x)); err != nil {
		t.Fatal(err)
	}
	if err := d.Quantize(codes, scales, src, s); err != nil {
		t.Fatal(err)
	}
	gotCodes, gotScales := make([]fp8.E4M3, len(x)), make([]float32, s.B*s.H)
	if err := codes.Read(bytesOf(gotCodes)); err != nil {
		t.Fatal(err)
	}
	if err := scales.Read(bytesOf(gotScales)); err != nil {
		t.Fatal(err)
	}
	return gotCodes, gotScales
}

// diffQuant counts codes and scales (by bits) that differ.
func diffQuant(c1 []fp8.E4M3, s1 []float32, c2 []fp8.E4M3, s2 []float32) (codes, scales int, first int) {
	first = -1
	for i := range c1 {
		if c1[i] != c2[i] {
			if first < 0 {
				first = i
			}
			codes++
		}
	}
	for i := range s1 {
		if math.Float32bits(s1[i]) != math.Float32bits(s2[i]) {
			scales++
		}
	}
	return codes, scales, first
}

// TestQuantizeBitExact: device.Quantize gives the host's codes and scales
// bit for bit, in both layouts, on heads built to hit every case (special
// values, ties, overflow, subnormal scales). The same comparison against
// the host in SatFinite mode must fail (overflow codes differ), so the
// check can tell rounding modes apart.
func TestQuantizeBitExact(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	for _, s := range []tensorShape{{2, 7, 33, 64, backend.BHSD}, {1, 7, 130, 128, backend.BSHD}, {3, 7, 1, 16, backend.BHSD}} {
		t.Run(fmt.Sprintf("%+v", s), func(t *testing.T) {
			x := specialInputs(rng, s)
			gotC, gotS := deviceQuantize(t, d, x, s)
			wantC, wantS := hostQuantize(x, s, fp8.NoSat)
			if nc, ns, first := diffQuant(gotC, gotS, wantC, wantS); nc+ns > 0 {
				t.Fatalf("%d codes and %d scales differ from the host; first code at %d: x=%g (bits %#x) got %#x want %#x",
					nc, ns, first, x[max(first, 0)], math.Float32bits(x[max(first, 0)]), gotC[max(first, 0)], wantC[max(first, 0)])
			}
			satC, satS := hostQuantize(x, s, fp8.SatFinite)
			if nc, _, _ := diffQuant(gotC, gotS, satC, satS); nc == 0 {
				t.Error("the device codes also equal the SatFinite codes: the inputs do not reach overflow")
			}
		})
	}
}

// TestQuantizeAllFloats: the encode kernel gives fp8.EncodeE4M3's NoSat
// code for every float32 bit pattern (scale 1: the conversion alone), and
// for every 16th chunk of them divided by an inexact scale (1657.6/448);
// the scale it reports is fp8.ScaleForAmax's. -short tests every 16th
// chunk.
func TestQuantizeAllFloats(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 1 << 24
	src, err := d.Alloc(4 * chunk)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	codes, err := d.Alloc(chunk)
	if err != nil {
		t.Fatal(err)
	}
	defer codes.Free()
	scales, err := d.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	defer scales.Free()
	got := make([]fp8.E4M3, chunk)
	x, want := make([]float32, chunk), make([]fp8.E4M3, chunk)
	step := 1
	if testing.Short() {
		step = 16
	}
	// The head's amax word is set directly (the encode phase alone runs):
	// 448 gives scale 1; 1657.6 an inexact quotient, whose scale the device
	// reports in scales[0].
	for _, amax := range []float32{448, 1657.6} {
		cstep := step
		if amax != 448 {
			cstep = 16 * step
		}
		for c := 0; c < 1<<32/chunk; c += cstep {
			base := uint32(c) * chunk
			qp := &quantParams{N: 1, IotaBase: base}
			qp.T[0] = quantTensor{Src: uint64(src.buf.p), Codes: uint64(codes.buf.p), Scales: uint64(scales.buf.p), RowStride: 1, B: 1, H: 1, S: chunk, D: 1}
			err := d.do(func() error {
				if err := launchStruct(d.quant.iota, chunk/256, 1, 1, 256, 0, d.stream, unsafe.Pointer(qp)); err != nil {
					return err
				}
				words, err := d.zeroWords(2) // the head's amax word, set here, then its done word
				if err != nil {
					return err
				}
				if err := cu.MemsetD32Async(cu.DevicePtr(words), uint(math.Float32bits(amax)), 1, d.stream); err != nil {
					return err
				}
				return d.quantizePhases(qp, false)
			})
			if err != nil {
				t.Fatal(err)
			}
			var scale [1]float32
			if err := errors.Join(codes.Read(bytesOf(got)), scales.Read(bytesOf(scale[:]))); err != nil {
				t.Fatal(err)
			}
			if want := fp8.ScaleForAmax(amax); math.Float32bits(scale[0]) != math.Float32bits(want) {
				t.Fatalf("amax %g: the device's scale %g, fp8.ScaleForAmax %g", amax, scale[0], want)
			}
			parallelFor(chunk, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					x[i] = math.Float32frombits(base + uint32(i))
				}
				fp8.EncodeE4M3(want[lo:hi], x[lo:hi], scale[0], fp8.NoSat)
			})
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("scale %g: float bits %#x: device code %#x, fp8.EncodeE4M3 %#x", scale[0], base+uint32(i), got[i], want[i])
				}
			}
		}
	}
}

// parallelFor runs f over [0, n) in one piece per CPU.
func parallelFor(n int, f func(lo, hi int)) {
	w := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := n*k/w, n*(k+1)/w
		wg.Add(1)
		go func() { defer wg.Done(); f(lo, hi) }()
	}
	wg.Wait()
}

// TestFastEncodeAllFloats: quant_pack9's encode (hopper::Encoder: the
// quotient by a reciprocal and one remainder step, the code by the
// hardware conversion) gives encode4's code, the one TestQuantizeAllFloats
// finds equal to the Go converter's, for every float x with |x| <= amax
// and every non-finite x, for amax of every magnitude (scales below the
// fast path's bound too) and random ones, through the sm_90a test module's
// fp8attn_encode_check. A build without the remainder step fails it
// (kernels/mutants/qp-encode-no-remainder.sed).
func TestFastEncodeAllFloats(t *testing.T) {
	d := hopperDevice(t)
	mod := testModule(t, d, true)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 41))
	amax := []float32{0, 1, 448, 1657.6, 4.5, 1.9999999, 3.4028235e38, 1e30, 1e-20, 3.7e-22, 3.6e-22, 1e-30, 1e-40,
		float32(math.Ldexp(1, -70)), float32(math.Ldexp(0.75, 100))}
	for range 8 { // random significands and exponents from 2^-72 to 2^110
		amax = append(amax, float32(math.Ldexp(1+rng.Float64(), rng.IntN(183)-72)))
	}
	if testing.Short() {
		amax = amax[:6]
	}
	in, err := d.Alloc(int64(4 * len(amax)))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Free()
	res, err := d.Alloc(int64(8 * len(amax)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Free()
	if err := errors.Join(in.Write(bytesOf(amax)), res.Write(make([]byte, 8*len(amax)))); err != nil {
		t.Fatal(err)
	}
	if err := encodeCheck(d, mod, in, res, len(amax)); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 2*len(amax))
	if err := res.Read(bytesOf(got)); err != nil {
		t.Fatal(err)
	}
	for k, a := range amax {
		if n := got[2*k]; n != 0 {
			bits := uint32(got[2*k+1])
			t.Errorf("amax %g: %d floats encode differently, one of them %g (%#08x)", a, uint32(n), math.Float32frombits(bits), bits)
		}
	}
}
