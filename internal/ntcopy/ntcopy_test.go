package ntcopy

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

// TestCopy copies random bytes at every alignment of dst and src around
// the streamed sizes' edges into a poisoned buffer and checks every byte,
// the bytes beyond the copy left alone included.
func TestCopy(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 0))
	src := make([]byte, 3<<16)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src)+256)
	for _, n := range []int{0, 1, 63, 64, minStreamed - 1, minStreamed, minStreamed + 1, minStreamed + 63, 1 << 16, 1<<16 + 129, 2 << 16} {
		for _, a := range []int{0, 1, 8, 31, 63} {
			for _, s := range []int{0, 3, 64} {
				for i := range dst {
					dst[i] = 0xA5
				}
				got := Copy(dst[a:a+n], src[s:s+n+7])
				if got != n {
					t.Fatalf("n %d dst+%d src+%d: copied %d", n, a, s, got)
				}
				if !bytes.Equal(dst[a:a+n], src[s:s+n]) {
					t.Fatalf("n %d dst+%d src+%d: bytes differ", n, a, s)
				}
				for i := range dst {
					if (i < a || i >= a+n) && dst[i] != 0xA5 {
						t.Fatalf("n %d dst+%d src+%d: byte %d outside the copy written", n, a, s, i)
					}
				}
			}
		}
	}
}
