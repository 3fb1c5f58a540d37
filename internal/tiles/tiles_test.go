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
