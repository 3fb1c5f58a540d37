//go:build !purego && (amd64 || arm64)

package fp8

import "math"

// encodeModeBits returns what the vector encoders take for mode m: the
// code an overflow becomes (ovf) and the sign bit a NaN's code keeps
// (nanSign), or ok false for a mode they leave to the scalar path.
func encodeModeBits(m Mode) (ovf, nanSign uint32, ok bool) {
	switch m {
	case SatFinite:
		return uint32(e4m3Format.maxFinite), 0, true
	case Torch:
		return uint32(e4m3Format.overflow), 0x80, true
	case NoSat:
		return uint32(e4m3Format.overflow), 0, true
	}
	return 0, 0, false // the scalar path decides what an unknown mode means
}

// roundModeBits is encodeModeBits for the vector rounders: the values of
// the overflow code and of a NaN's code as the table gives them (NaN is
// 0x7fc00000 with the code's sign).
func roundModeBits(m Mode) (ovf, nanSign uint32, ok bool) {
	switch m {
	case SatFinite:
		return math.Float32bits(e4m3Table[e4m3Format.maxFinite]), 0, true
	case Torch:
		return math.Float32bits(e4m3Table[e4m3Format.overflow]), 1 << 31, true
	case NoSat:
		return math.Float32bits(e4m3Table[e4m3Format.overflow]), 0, true
	}
	return 0, 0, false
}
