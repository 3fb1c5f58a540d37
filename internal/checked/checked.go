// Package checked multiplies sizes without overflow: every size product in
// the module that comes from a caller (tensor shapes, element counts) goes
// through it before anything is allocated or indexed.
package checked

import "math"

// Mul returns the exact product of xs and true, or 0 and false if an operand
// is negative or the product does not fit in an int. A zero operand makes
// the product 0 whatever the others are; an empty product is 1.
func Mul(xs ...int) (int, bool) {
	p := 1
	for _, x := range xs {
		switch {
		case x < 0:
			return 0, false
		case x == 0:
			p = 0
		}
	}
	if p == 0 {
		return 0, true
	}
	for _, x := range xs {
		if p > math.MaxInt/x {
			return 0, false
		}
		p *= x
	}
	return p, true
}
