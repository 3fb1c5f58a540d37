package fp8

import (
	"fmt"
	"math"
)

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }

// Amax returns the largest finite magnitude in x, ignoring NaN and ±Inf
// (they cannot be represented by a scale and are quantized to NaN instead).
// On amd64 CPUs with AVX2 or AVX-512 it runs in assembly (quant_amd64.s),
// equal to amaxGo; the purego build tag turns that off.
func Amax(x []float32) float32 {
	m, n := amaxVector(x)
	return max(m, amaxGo(x[n:]))
}

// amaxGo is Amax's loop: the reference for the assembly.
func amaxGo(x []float32) float32 {
	var m float32
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if a > m && a <= math.MaxFloat32 {
			m = a
		}
	}
	return m
}

// ScaleForAmax returns the E4M3 dequantization scale that maps amax onto the
// largest finite E4M3 value, 448. A zero amax gives scale 1, so that an
// all-zero tensor quantizes to zeros and dequantizes exactly.
func ScaleForAmax(amax float32) float32 {
	if amax == 0 || amax != amax {
		return 1
	}
	s := amax / MaxE4M3
	if s == 0 { // amax below 448 * smallest float32: keep a usable scale
		return math.SmallestNonzeroFloat32
	}
	return s
}

// QuantizeE4M3 quantizes x in groups of groupLen consecutive elements, each
// group with its own amax-based scale (groupLen = len(x) gives one scale for
// the whole tensor; groupLen = S*D over a [B][H][S][D] tensor gives one scale
// per (batch, head)). Non-finite inputs become NaN (NoSat mode), so they
// propagate as they would in float32. It returns the codes and the per-group
// dequantization scales: x[i] ≈ data[i].Float32() * scales[i/groupLen].
// groupLen must be positive and divide len(x).
func QuantizeE4M3(x []float32, groupLen int) (data []E4M3, scales []float32, err error) {
	if err := checkGroups(len(x), groupLen); err != nil {
		return nil, nil, err
	}
	data = make([]E4M3, len(x))
	scales = make([]float32, len(x)/groupLen)
	quantizeE4M3(data, scales, x, groupLen)
	return data, scales, nil
}

// QuantizeE4M3Into is QuantizeE4M3 writing into caller-provided slices: data
// must hold exactly len(x) codes and scales exactly len(x)/groupLen scales.
// It allocates nothing, and on error writes nothing.
func QuantizeE4M3Into(data []E4M3, scales []float32, x []float32, groupLen int) error {
	if err := checkGroups(len(x), groupLen); err != nil {
		return err
	}
	if len(data) != len(x) || len(scales) != len(x)/groupLen {
		return fmt.Errorf("%w: QuantizeE4M3Into: %d codes and %d scales for %d elements in groups of %d (want %d and %d)",
			ErrInvalid, len(data), len(scales), len(x), groupLen, len(x), len(x)/groupLen)
	}
	quantizeE4M3(data, scales, x, groupLen)
	return nil
}

func checkGroups(n, groupLen int) error {
	if groupLen <= 0 || n%groupLen != 0 {
		return fmt.Errorf("%w: group length %d does not divide %d elements", ErrInvalid, groupLen, n)
	}
	return nil
}

func quantizeE4M3(data []E4M3, scales []float32, x []float32, groupLen int) {
	for g := range scales {
		chunk := x[g*groupLen : (g+1)*groupLen]
		s := ScaleForAmax(Amax(chunk))
		scales[g] = s
		EncodeE4M3(data[g*groupLen:(g+1)*groupLen], chunk, s, NoSat) // (s is positive and finite)
	}
}
