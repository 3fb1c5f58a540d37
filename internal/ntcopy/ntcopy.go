// Package ntcopy copies bytes into memory that a device reads next, with
// non-temporal stores where the CPU has them: the copied lines go to
// memory rather than into the CPU's caches, so that a DMA engine reading
// them does not have to fetch them back out of the caches first.
package ntcopy

import "unsafe"

// minStreamed is the fewest bytes worth streaming: below it the store
// fence and the head and tail copies cost more than the caches do.
const minStreamed = 4 << 10

// Copy copies min(len(dst), len(src)) bytes from src to dst, which must
// not overlap, and returns their number. On amd64 (without the purego
// tag) the 64-byte lines of dst that the copy fills whole are written with
// non-temporal stores and the copy ends with a store fence; elsewhere, and
// for copies of fewer than 4 KiB, it is the built-in copy. It is the loop
//
//	for i := range n {
//		dst[i] = src[i]
//	}
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < minStreamed || !streamed {
		return copy(dst, src)
	}
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & 63)
	blocks := (n - head) / 64
	copy(dst[:head], src[:head])
	move(&dst[head], &src[head], blocks)
	tail := head + blocks*64
	copy(dst[tail:n], src[tail:n])
	return n
}
