package cpu_test

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestPagedCatchesMutants: the cache's page copy and its varlen rows,
// broken on purpose, fail the paged table (FP8ATTN_MUTANTS=1).
func TestPagedCatchesMutants(t *testing.T) {
	const pkg = "./backend/cpu"
	tests := []string{"TestPagedAttention"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "CopyPage leaves the key scales", File: "backend/cpu/paged.go", Pkg: pkg,
			Old: "copy(s.kScale[dst*H:(dst+1)*H], s.kScale[src*H:(src+1)*H])", New: "", Tests: tests},
		{Name: "CopyPage copies one head", File: "backend/cpu/paged.go", Pkg: pkg,
			Old: "n := H * s.cfg.HeadDim * s.cfg.PageSize // a page's blocks are contiguous", New: "n := s.cfg.HeadDim * s.cfg.PageSize", Tests: tests},
		{Name: "a varlen sequence computes the batch's Sq rows", File: "backend/cpu/paged.go", Pkg: pkg,
			Old: "rowsN := min(i0+c.bq, g*p.Queries(b)) - i0\n\tif rowsN <= 0", New: "rowsN := min(i0+c.bq, g*p.Sq) - i0\n\tif rowsN <= 0", Tests: tests},
		{Name: "a varlen merge takes the batch's Sq rows", File: "backend/cpu/paged.go", Pkg: pkg,
			Old: "rowsN := min(i0+c.bq, g*p.Queries(b)) - i0 // (none", New: "rowsN := min(i0+c.bq, g*p.Sq) - i0 // (none", Tests: tests},
	})
}
