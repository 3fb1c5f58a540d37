package oracle_test

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestOracleCatchesMutants: each variant of the oracles, broken on
// purpose, fails the tests that hold them to each other and to hand-worked
// cases (FP8ATTN_MUTANTS=1).
func TestOracleCatchesMutants(t *testing.T) {
	const pkg = "./oracle"
	tests := []string{"TestNaiveOnlineMatrixAgree", "TestHandWorked"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a sink counted twice", File: "oracle/oracle.go", Pkg: pkg,
			Old: "\t\tden := l + math.Exp(sink-m)\n\t\toi := out", New: "\t\tden := l + 2*math.Exp(sink-m)\n\t\toi := out", Tests: tests},
		{Name: "no softcap in the two-pass form", File: "oracle/oracle.go", Pkg: pkg,
			Old: "s[j] = softcap(dot*scale, c)", New: "s[j] = softcap(dot*scale, c*0)", Tests: tests},
		{Name: "a block's keys before the window", File: "oracle/oracle.go", Pkg: pkg,
			Old: "j0, j1 := max(b0, lo), min(b0+blockK, hi)", New: "j0, j1 := b0, min(b0+blockK, hi)", Tests: tests},
		{Name: "the sink in the LSE", File: "oracle/oracle.go", Pkg: pkg,
			Old: "\t\tlse[o] = m + math.Log(l)\n\t})\n\treturn inLayout(p, out), lse\n}\n\n// Online", New: "\t\tlse[o] = m + math.Log(den)\n\t})\n\treturn inLayout(p, out), lse\n}\n\n// Online", Tests: tests},
	})
	spread := []string{"TestWeightSpreadHandWorked", "TestWeightSpreadMonteCarlo"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "the spread's weights not squared", File: "oracle/spread.go", Pkg: pkg,
			Old: "vr[d] += w[j] * w[j] * e * e", New: "vr[d] += w[j] * e * e", Tests: spread},
		{Name: "the spread without the sink", File: "oracle/spread.go", Pkg: pkg,
			Old: "den := math.Exp(sink - m)", New: "den := 0.0", Tests: spread},
		{Name: "the spread about the unweighted mean", File: "oracle/spread.go", Pkg: pkg,
			Old: "o[d] += w[j] * vh[j*D+d]", New: "o[d] += vh[j*D+d] / float64(hi-lo)", Tests: spread},
	})
}
