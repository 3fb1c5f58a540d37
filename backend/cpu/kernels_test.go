package cpu

import (
	"math"
	"testing"
)

// TestExp32 measures exp32 against math.Exp on every 101st float32 in
// [-87.3, 88.7] (the normal-result range; -short: every 1009th) and pins
// its special cases.
func TestExp32(t *testing.T) {
	var worst float64
	step := uint32(101)
	if testing.Short() {
		step = 1009
	}
	check := func(x float32) {
		got, want := float64(exp32(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1))) - float32(want))
		worst = max(worst, math.Abs(got-want)/ulp)
	}
	for b := math.Float32bits(0); b < math.Float32bits(88.72); b += step {
		check(math.Float32frombits(b))
	}
	for b := math.Float32bits(0); b < math.Float32bits(87.33); b += step {
		check(-math.Float32frombits(b))
	}
	t.Logf("exp32: max error %.2f ulp", worst)
	if worst > 4 {
		t.Errorf("exp32 error %.2f ulp exceeds 4", worst)
	}
	inf := float32(math.Inf(1))
	if exp32(-inf) != 0 || exp32(inf) != inf || !math.IsNaN(float64(exp32(float32(math.NaN())))) || exp32(0) != 1 || exp32(-100) != 0 {
		t.Error("special cases")
	}
}
