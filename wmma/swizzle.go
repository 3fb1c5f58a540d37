package wmma

import "fmt"

// Swizzle is a shared-memory swizzle mode of Hopper's wgmma operands (and
// of the tensor-memory accelerator): the width in bytes of a swizzled row,
// or 0 for none.
type Swizzle int

// The swizzle modes.
const (
	SwizzleNone Swizzle = 0
	Swizzle32   Swizzle = 32
	Swizzle64   Swizzle = 64
	Swizzle128  Swizzle = 128
)

// Swizzles lists the swizzled modes, the ones the hardware dump verifies.
var Swizzles = []Swizzle{Swizzle32, Swizzle64, Swizzle128}

// KMajorOffset returns where byte kb (0 <= kb < s) of row r of a K-major
// wgmma operand sits in the swizzled canonical layout, as a byte offset from
// a tile base aligned to 1024 bytes: rows of s bytes one after another (8-row
// groups 8·s bytes apart, the descriptor's stride byte offset), and within
// that linear offset o, address bits 4.. (the 16-byte chunk) XORed with bits
// 7.. (CUTLASS's Swizzle<log2(s/16), 4, 3>): o ^ ((o >> 7) & (s/16-1)) << 4.
// The pattern repeats every 8 rows. Verified on an H200 by
// testdata/wmma/wgmmaswizzle.cu (TestHardwareWGMMASwizzle).
func KMajorOffset(s Swizzle, r, kb int) int {
	w := int(s)
	o := r*w + kb
	return o ^ ((o>>7)&(w/16-1))<<4
}

// DescriptorMode returns the wgmma shared-memory descriptor's bits 62-63
// for s: 0 none, 1 128-byte, 2 64-byte, 3 32-byte swizzle.
func (s Swizzle) DescriptorMode() uint64 {
	switch s {
	case Swizzle128:
		return 1
	case Swizzle64:
		return 2
	case Swizzle32:
		return 3
	}
	return 0
}

// WGMMADescriptor encodes a wgmma shared-memory matrix descriptor: the
// operand's shared-memory address, its leading and stride byte offsets
// (each in 16-byte units, 14 bits), base offset 0 (tiles aligned to the
// swizzle's repeat) and the swizzle mode. For a swizzled K-major operand
// whose K extent is one swizzle row, the leading byte offset is unused and
// the stride byte offset is 8·s (8 rows).
func WGMMADescriptor(addr, lbo, sbo uint32, s Swizzle) (uint64, error) {
	for _, v := range []uint32{addr, lbo, sbo} {
		if v%16 != 0 || v>>4 >= 1<<14 {
			return 0, fmt.Errorf("wmma: descriptor field %#x is not a multiple of 16 below 2^18", v)
		}
	}
	return uint64(addr>>4) | uint64(lbo>>4)<<16 | uint64(sbo>>4)<<32 | s.DescriptorMode()<<62, nil
}

// ChunkTable returns, for rows 0-7 of a swizzle repeat, the physical
// 16-byte chunk of each logical chunk: KMajorOffset(s, r, 16c) = r·s +
// 16·table[r][c]. The generated header carries it for the kernels.
func (s Swizzle) ChunkTable() [][]int {
	t := make([][]int, 8)
	for r := range t {
		t[r] = make([]int, int(s)/16)
		for c := range t[r] {
			t[r][c] = (KMajorOffset(s, r, 16*c) - r*int(s)) / 16
		}
	}
	return t
}
