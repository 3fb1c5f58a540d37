package profile

import (
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

// TestDecode writes events into a synthetic table the way profile.cuh's
// put addresses them and reads them back through At.
func TestDecode(t *testing.T) {
	s := seed.Get()
	t.Logf("seed %d", s)
	rng := rand.New(rand.NewPCG(s, 1))
	for _, l := range []Layout{{1, 1, 1, 1}, {3, 1024, 192, 24}, {2, 5, 3, 7}} {
		words := make([]int32, l.Words())
		type ev struct{ k, b, r, s int }
		want := map[ev]uint32{}
		for range 100 {
			e := ev{rng.IntN(l.Kernels), rng.IntN(l.Blocks), rng.IntN(l.Rows), rng.IntN(l.Slots)}
			v := rng.Uint32()
			words[((e.k*l.Blocks+e.b)*l.Rows+e.r)*l.Slots+e.s] = int32(v) // profile.cuh's put
			want[e] = v
		}
		tab, err := Decode(l, words)
		if err != nil {
			t.Fatal(err)
		}
		for e, v := range want {
			if got := tab.At(e.k, e.b, e.r, e.s); got != v {
				t.Errorf("%+v: At%v = %#x, want %#x", l, e, got, v)
			}
		}
	}
}

func TestLayoutAndDecodeErrors(t *testing.T) {
	for _, w := range [][]int32{nil, {1, 2, 3}, {0, 1, 1, 1}, {1, 1, -1, 1}} {
		if _, err := ParseLayout(w); err == nil {
			t.Errorf("ParseLayout(%v): no error", w)
		}
	}
	l, err := ParseLayout([]int32{2, 3, 4, 5})
	if err != nil || l != (Layout{2, 3, 4, 5}) || l.Words() != 120 {
		t.Fatalf("ParseLayout: %+v, %v", l, err)
	}
	if _, err := Decode(l, make([]int32, 119)); err == nil {
		t.Error("Decode of a short table: no error")
	}
	tab, _ := Decode(l, make([]int32, 120))
	for _, e := range [][4]int{{2, 0, 0, 0}, {0, 3, 0, 0}, {0, 0, 4, 0}, {0, 0, 0, 5}, {-1, 0, 0, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("At%v outside the layout: no panic", e)
				}
			}()
			tab.At(e[0], e[1], e[2], e[3])
		}()
	}
}

func TestSince(t *testing.T) {
	for _, c := range []struct {
		from, to uint32
		want     int64
	}{{10, 25, 15}, {25, 10, -15}, {0xFFFFFFF0, 0x10, 0x20}, {0x10, 0xFFFFFFF0, -0x20}} {
		if got := Since(c.from, c.to); got != c.want {
			t.Errorf("Since(%#x, %#x) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.x); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}
