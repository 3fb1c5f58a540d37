package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestPrefillChunkRows: the query chunks of the paged prefill's input
// launch on the shapes it was measured on (B1 Hq32, an H200's 132 SMs:
// 4·132 = 528 blocks a wave), at the bounds on a chunk's floats, and where
// the SMs bound a head's chunks; then over a sweep, the invariants: at
// least one row, at most sms chunks a head, and a chunk within the floats'
// bounds (in whole rows) unless the SMs' bound decides.
func TestPrefillChunkRows(t *testing.T) {
	for _, c := range []struct {
		what              string
		heads, sq, d, sms int
		want              int
	}{
		{"2048 new tokens, D128: 16 chunks a head, one wave", 32, 2048, 128, 132, 128},
		{"128 new tokens: chunks of at least 4096 floats", 32, 128, 128, 132, 32},
		{"D64: 16 chunks of 128 rows", 32, 2048, 64, 132, 128},
		{"many heads: chunks of at most 16384 floats", 128, 2048, 128, 132, 128},
		{"D256: at most 64 rows", 32, 4096, 256, 132, 64},
		{"one new token", 32, 1, 128, 132, 32},
		{"a head longer than the SMs' chunks", 1, 100000, 128, 132, 758},
		{"a GPU of 16 SMs", 32, 2048, 128, 16, 128},
	} {
		if got := prefillChunkRows(c.heads, c.sq, c.d, c.sms); got != c.want {
			t.Errorf("%s: %d rows a chunk, want %d", c.what, got, c.want)
		}
	}
	for _, heads := range []int{1, 3, 32, 64, 500} {
		for _, sq := range []int{1, 7, 128, 1000, 2048, 33000} {
			for _, d := range []int{16, 64, 80, 128, 256} {
				for _, sms := range []int{1, 16, 132} {
					rows := prefillChunkRows(heads, sq, d, sms)
					chunks := (sq + rows - 1) / rows
					switch {
					case rows < 1:
						t.Errorf("heads %d sq %d d %d sms %d: %d rows", heads, sq, d, sms, rows)
					case chunks > sms:
						t.Errorf("heads %d sq %d d %d sms %d: %d chunks a head, more than the SMs", heads, sq, d, sms, chunks)
					case rows > max(1, prefillChunkFloatsMax/d) && rows != (sq+sms-1)/sms:
						t.Errorf("heads %d sq %d d %d sms %d: %d floats a chunk, past the bound", heads, sq, d, sms, rows*d)
					case rows < prefillChunkFloats/d:
						t.Errorf("heads %d sq %d d %d sms %d: %d floats a chunk, below the bound", heads, sq, d, sms, rows*d)
					}
				}
			}
		}
	}
}

// TestPrefillChunkRowsCatchesMutants: the plan broken on purpose fails
// TestPrefillChunkRows (FP8ATTN_MUTANTS=1).
func TestPrefillChunkRowsCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cuda", "backend/cuda/prefill_chunks.go"
	tests := []string{"TestPrefillChunkRows"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "more chunks a head than the SMs", File: file, Pkg: pkg, Tests: tests,
			Old: "if (sq+rows-1)/rows > sms {", New: "if (sq+rows-1)/rows > 4*sms {"},
		{Name: "no upper bound on a chunk", File: file, Pkg: pkg, Tests: tests,
			Old: "max(1, prefillChunkFloatsMax/d)", New: "1 << 30"},
		{Name: "no lower bound on a chunk", File: file, Pkg: pkg, Tests: tests,
			Old: "max(rows, prefillChunkFloats/d)", New: "rows"},
		{Name: "a wave of one block an SM", File: file, Pkg: pkg, Tests: tests,
			Old: "perHead := max(1, prefillBlocksPerSM*sms/max(1, heads))", New: "perHead := max(1, sms/max(1, heads))"},
	})
}
