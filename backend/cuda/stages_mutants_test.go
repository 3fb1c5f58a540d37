package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestSupportsCatchesMutants: the stages' refusal of the attention
// variants, broken on purpose both ways, fails TestSupports
// (FP8ATTN_MUTANTS=1).
func TestSupportsCatchesMutants(t *testing.T) {
	const pkg = "./backend/cuda"
	mutant.Run(t, []mutant.Mutant{
		{Name: "the Ada kernel refuses the variants", File: "backend/cuda/stages.go", Pkg: pkg,
			Old:   "if stage == tiles.HopperStage || stage == tiles.AdaStage || !p.Variants.Any() {",
			New:   "if stage == tiles.HopperStage || !p.Variants.Any() {",
			Tests: []string{"TestSupports"}},
		{Name: "every stage takes the variants", File: "backend/cuda/stages.go", Pkg: pkg,
			Old:   "if stage == tiles.HopperStage || stage == tiles.AdaStage || !p.Variants.Any() {",
			New:   "if stage >= 0 || !p.Variants.Any() {",
			Tests: []string{"TestSupports"}},
	})
}
