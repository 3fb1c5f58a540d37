package checked

import (
	"math"
	"math/bits"
	"testing"
)

func TestMul(t *testing.T) {
	for _, tc := range []struct {
		xs   []int
		want int
		ok   bool
	}{
		{nil, 1, true},
		{[]int{2, 3, 4}, 24, true},
		{[]int{0, math.MaxInt, math.MaxInt}, 0, true},
		{[]int{math.MaxInt, math.MaxInt, 0}, 0, true}, // found by FuzzMul
		{[]int{1 << 32, 1 << 32}, 0, false},           // wraps to 0 in plain int arithmetic
		{[]int{1 << 31, 1 << 31, 2}, 0, false},
		{[]int{math.MaxInt, 1}, math.MaxInt, true},
		{[]int{math.MaxInt/2 + 1, 2}, 0, false},
		{[]int{-1, 5}, 0, false},
		{[]int{3, 1 << 62}, 0, false},
	} {
		got, ok := Mul(tc.xs...)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Mul(%v) = %d, %v; want %d, %v", tc.xs, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzMul: Mul agrees with exact big-number arithmetic.
func FuzzMul(f *testing.F) {
	f.Add(int64(1<<32), int64(1<<32), int64(1))
	f.Add(int64(math.MaxInt64), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, a, b, c int64) {
		got, ok := Mul(int(a), int(b), int(c))
		if a < 0 || b < 0 || c < 0 {
			if ok {
				t.Fatalf("Mul(%d,%d,%d) accepted a negative operand", a, b, c)
			}
			return
		}
		exact := new(bigInt).mul(uint64(a), uint64(b), uint64(c))
		fits := exact.fitsInt()
		if ok != fits || ok && uint64(got) != exact.lo {
			t.Fatalf("Mul(%d,%d,%d) = %d, %v; exact fits=%v lo=%d", a, b, c, got, ok, fits, exact.lo)
		}
	})
}

// bigInt is a 192-bit unsigned product, enough for three 63-bit operands.
type bigInt struct{ lo, mid, hi uint64 }

func (z *bigInt) mul(a, b, c uint64) *bigInt {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(l1, c)
	h3, l3 := bits.Mul64(h1, c)
	var carry uint64
	z.lo = l2
	z.mid, carry = bits.Add64(h2, l3, 0)
	z.hi = h3 + carry
	return z
}

func (z *bigInt) fitsInt() bool { return z.hi == 0 && z.mid == 0 && z.lo <= math.MaxInt64 }
