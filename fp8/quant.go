package fp8

import (
	"fmt"
	"math"
)

// Amax returns the largest finite magnitude in x, ignoring NaN and ±Inf
// (they cannot be represented by a scale and are quantized to NaN instead).
func Amax(x []float32) float32 {
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
func QuantizeE4M3(x []float32, groupLen int) (data []E4M3, scales []float32, err error) {
	if groupLen <= 0 || len(x)%groupLen != 0 {
		return nil, nil, fmt.Errorf("fp8: group length %d does not divide %d elements", groupLen, len(x))
	}
	data = make([]E4M3, len(x))
	scales = make([]float32, len(x)/groupLen)
	QuantizeE4M3Into(data, scales, x, groupLen)
	return data, scales, nil
}

// QuantizeE4M3Into is QuantizeE4M3 writing into caller-provided slices, which
// must hold len(x) codes and len(x)/groupLen scales; groupLen must divide
// len(x). It allocates nothing.
func QuantizeE4M3Into(data []E4M3, scales []float32, x []float32, groupLen int) {
	for g := range scales {
		chunk := x[g*groupLen : (g+1)*groupLen]
		s := ScaleForAmax(Amax(chunk))
		scales[g] = s
		EncodeE4M3(data[g*groupLen:(g+1)*groupLen], chunk, s, NoSat)
	}
}
