package tiles

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	for _, st := range Stages {
		for _, d := range HeadDims {
			c, err := Get(st, d)
			if err != nil || c.BlockM%16 != 0 || c.Threads%32 != 0 || c.BlockN%16 != 0 || c.Ring < 1 {
				t.Errorf("stage %d d %d: %+v %v", st, d, c, err)
			}
			spec := fmt.Sprintf("struct Tiles<%d, %d> { static constexpr int BM = %d, BN = %d, THREADS = %d, RING = %d; };",
				st, d, c.BlockM, c.BlockN, c.Threads, c.Ring)
			if !strings.Contains(Header(), spec) {
				t.Errorf("header lacks %s", spec)
			}
		}
	}
	if _, err := Get(3, 96); !errors.Is(err, ErrNoKernel) {
		t.Errorf("d=96: %v", err)
	}
	if _, err := Get(len(Stages)+1, 64); !errors.Is(err, ErrNoKernel) {
		t.Errorf("stage past the list: %v", err)
	}
	c, _ := Get(4, 64)
	if x, y, z := c.Grid(2, 8, 256); x != 8 || y != 8 || z != 2 {
		t.Errorf("grid %d %d %d", x, y, z)
	}
}

// TestPaged: every paged-cache head dim has a geometry whose shared memory
// fits an L4's 99 KB per block (the compute_89 module loads there) and whose
// key pitch is an odd number of 16-byte chunks (conflict-free ldmatrix);
// other head dims are refused.
func TestPaged(t *testing.T) {
	for _, d := range PagedHeadDims {
		c, err := Paged(d)
		if err != nil {
			t.Fatal(err)
		}
		if c.SharedBytes() > 99*1024 {
			t.Errorf("D=%d: %d bytes of shared memory, above the L4's 99 KB", d, c.SharedBytes())
		}
		if c.KPitch()%32 != 16 || c.KPitch() < d {
			t.Errorf("D=%d: key pitch %d is not an odd number of 16-byte chunks covering the row", d, c.KPitch())
		}
		if c.Rows != 8 || c.Keys != 32 || d%16 != 0 {
			t.Errorf("D=%d: %+v: the kernel's fragment walk needs 8 rows, 32 keys and D a multiple of 16", d, c)
		}
		if c.SharedBytes() < c.Warps*8*d*4 {
			t.Errorf("D=%d: the warps' merge (%d bytes) does not fit the rings (%d)", d, c.Warps*8*d*4, c.SharedBytes())
		}
	}
	for _, d := range []int{0, 16, 72, 100, 512} {
		if _, err := Paged(d); err == nil {
			t.Errorf("Paged(%d) accepted", d)
		}
	}
}
