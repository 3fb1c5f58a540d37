package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestQuantLongChunks holds the long form's chunking to its bounds: chunks
// of whole V key groups that fit a buffer, a head of at most as many
// chunks as the grid has blocks (one more row is refused), the grid's
// tickets and the head words' offsets within 32-bit ints, and no chunk
// where the form is off or a buffer holds no V key group.
func TestQuantLongChunks(t *testing.T) {
	h200 := quantLongGeometry{Threads: 384, PerSM: 2, Codes: 8 << 10, Held: 52 << 10, Blocks: 264}
	off, small := h200, h200 // the form off (no blocks); a buffer a float short of a D256 V key group
	off.Blocks, small.Held = 0, 16*4*256-4
	shape := func(b, hq, hkv, sq, sk, d int) *backend.Problem {
		return &backend.Problem{Shape: backend.Shape{B: b, Hq: hq, Hkv: hkv, Sq: sq, Sk: sk, D: d}}
	}
	for _, c := range []struct {
		name   string
		g      quantLongGeometry
		p      *backend.Problem
		rows   int   // chunkRows
		chunks int64 // all heads' chunks, where rows > 0
		takes  bool
	}{
		{"B4 H32 S4096 D128: 96 rows", h200, shape(4, 32, 32, 4096, 4096, 128), 96, 4 * (32*43 + 2*32*43), true},
		{"D64: 208 rows", h200, shape(1, 8, 8, 2048, 2048, 64), 208, 24 * 10, true},
		{"D96: 128 rows", h200, shape(1, 2, 1, 1000, 1500, 96), 128, 2*8 + 2*12, true},
		{"D192: 64 rows", h200, shape(1, 2, 2, 90, 700, 192), 64, 2*2 + 4*11, true},
		{"D256: 48 rows", h200, shape(1, 2, 1, 1900, 1777, 256), 48, 2*40 + 2*38, true},
		{"a head of as many chunks as blocks", h200, shape(1, 1, 1, 16, 264*96, 128), 96, 1 + 2*264, true},
		{"one row more", h200, shape(1, 1, 1, 16, 264*96+1, 128), 0, 0, false},
		{"queries longer than keys", h200, shape(1, 1, 1, 264*96+1, 16, 128), 0, 0, false},
		{"the form off", off, shape(1, 1, 1, 64, 64, 64), 0, 0, false},
		{"no V key group in a buffer", small, shape(1, 1, 1, 64, 64, 256), 0, 0, false},
		// 256 chunks a head, 768 a batch entry: the tickets, and the 2 a
		// block past the last, within 2^31 and past it by one entry.
		{"tickets just within 32 bits", h200, shape(2796201, 1, 1, 256*208, 256*208, 64), 208, 2796201 * 768, true},
		{"tickets past 32 bits", h200, shape(2796202, 1, 1, 256*208, 256*208, 64), 208, 2796202 * 768, false},
		{"head words just within 32 bits", h200, shape(1, 1<<29-2, 1<<28, 16, 16, 64), 208, 1<<30 - 2, true},
		{"head words past 32 bits", h200, shape(1, 1<<29, 1<<28, 16, 16, 64), 208, 1<<29 + 1<<29, false},
	} {
		rows := c.g.chunkRows(c.p)
		if rows != c.rows {
			t.Errorf("%s: chunkRows %d, want %d", c.name, rows, c.rows)
		}
		if rows > 0 {
			if n := c.g.chunks(c.p, rows); n != c.chunks {
				t.Errorf("%s: chunks %d, want %d", c.name, n, c.chunks)
			}
			if rows%16 != 0 || 4*rows*c.p.D > c.g.Held {
				t.Errorf("%s: %d rows at D %d are not whole V key groups within %d bytes", c.name, rows, c.p.D, c.g.Held)
			}
		}
		if got := c.g.takes(c.p); got != c.takes {
			t.Errorf("%s: takes %v, want %v", c.name, got, c.takes)
		}
	}
}

// TestQuantLongChunksCatchesMutants: the long form's bounds, broken on
// purpose, fail TestQuantLongChunks (FP8ATTN_MUTANTS=1).
func TestQuantLongChunksCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cuda", "backend/cuda/quantgeom.go"
	tests := []string{"TestQuantLongChunks"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a head of more chunks than blocks", File: file, Pkg: pkg, Tests: tests,
			Old: "int64(max(p.Sq, p.Sk)) > int64(r)*int64(g.Blocks)", New: "int64(max(p.Sq, p.Sk)) > int64(r)*int64(g.Blocks+1)"},
		{Name: "rows not whole V key groups", File: file, Pkg: pkg, Tests: tests,
			Old: "return g.Held / (4 * d) / 16 * 16", New: "return g.Held / (4 * d)"},
		{Name: "the tickets unbounded", File: file, Pkg: pkg, Tests: tests,
			Old: "g.chunks(p, r)+2*int64(g.Blocks) < 1<<31", New: "g.chunks(p, r) < 1<<40"},
		{Name: "the head words unbounded", File: file, Pkg: pkg, Tests: tests,
			Old: " && g.words(p) < 1<<31", New: " && g.words(p) < 1<<62"},
		{Name: "keys' chunks counted for queries", File: file, Pkg: pkg, Tests: tests,
			Old: "cq, ck := (int64(p.Sq)+int64(r)-1)/int64(r)", New: "cq, ck := (int64(p.Sk)+int64(r)-1)/int64(r)"},
	})
}
