package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestParallelCopy: every byte of every piece arrives, for pieces smaller
// and larger than a chunk, empty ones included, memmoved and streamed
// (parallelMove); nothing outside them is written.
func TestParallelCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for k, sizes := range [][]int{{0}, {5}, {copyChunk}, {copyChunk + 1, 0, 3}, {1 << 20, 300 << 10, 17}, {4 << 20},
		{0}, {5}, {copyChunk + 1, 0, 3}, {1 << 20, 300 << 10, 17}} {
		streamed := k >= 6
		var dst, src [][]byte
		var backing [][]byte
		for _, n := range sizes {
			s := make([]byte, n)
			for i := range s {
				s[i] = byte(rng.Uint32())
			}
			b := make([]byte, n+2) // a guard byte each side
			b[0], b[n+1] = 0xA5, 0x5A
			src, dst, backing = append(src, s), append(dst, b[1:n+1]), append(backing, b)
		}
		parallelMove(dst, src, streamed)
		for i := range src {
			if !bytes.Equal(dst[i], src[i]) {
				t.Fatalf("sizes %v streamed %v: piece %d differs", sizes, streamed, i)
			}
			if b := backing[i]; b[0] != 0xA5 || b[len(b)-1] != 0x5A {
				t.Fatalf("sizes %v streamed %v: piece %d wrote outside its bytes", sizes, streamed, i)
			}
		}
	}
}
