package cuda

import "github.com/fp8attn/fp8attn/backend"

// quantPackGeometry is the geometry of quant_pack9 as the Hopper module
// exports it (fp8attn_quantpack9_config: QUANT_PACK_THREADS,
// QUANT_PACK_CLUSTER, QUANT_PACK_CODES in kernels/hopper/quant_pack.cuh):
// threads a block, blocks a head (a thread-block cluster) and the most
// codes a block encodes.
type quantPackGeometry struct {
	Threads, Cluster, Codes int
}

// chunkRows is the rows of a head a block takes: a Cluster-th of the
// head's, rounded up to 16 (a V key group).
func (g quantPackGeometry) chunkRows(rows int) int {
	return ((rows+g.Cluster-1)/g.Cluster + 15) / 16 * 16
}

// quantLongGeometry is the geometry of quant_pack9's long form as the
// Hopper module exports it (fp8attn_quantpack9l_config:
// QUANT_LONG_THREADS, QUANT_LONG_PER_SM, QUANT_LONG_CODES, QUANT_LONG_HELD):
// threads a block, blocks an SM (its launch bounds'), the bytes of a
// part's codes, and the most bytes of float32 values each of a block's two
// buffers holds; and Blocks, its grid: the blocks the device holds at once
// (its SMs times what one holds, found at load), 0 where the form is off.
type quantLongGeometry struct {
	Threads, PerSM, Codes, Held int
	Blocks                      int
}

// heldRows is the most rows of a chunk at head dim d: whole V key groups
// whose float32 values fit a buffer (0 where not one group does).
func (g quantLongGeometry) heldRows(d int) int { return g.Held / (4 * d) / 16 * 16 }

// smem is a block's dynamic shared memory at head dim d: a part's codes
// and two buffers of the longest chunk's values.
func (g quantLongGeometry) smem(d int) int { return g.Codes + 2*4*d*g.heldRows(d) }

// chunkRows is the rows of p's chunks: heldRows, where a head has at
// most as many chunks as the grid has blocks; 0 where it has more.
func (g quantLongGeometry) chunkRows(p *backend.Problem) int {
	r := g.heldRows(p.D)
	if g.Blocks <= 0 || r < 16 || int64(max(p.Sq, p.Sk)) > int64(r)*int64(g.Blocks) {
		return 0
	}
	return r
}

// chunks returns the long form's chunks for p's heads at r rows a chunk,
// all of them.
func (g quantLongGeometry) chunks(p *backend.Problem, r int) int64 {
	cq, ck := (int64(p.Sq)+int64(r)-1)/int64(r), (int64(p.Sk)+int64(r)-1)/int64(r)
	return int64(p.B) * (int64(p.Hq)*cq + 2*int64(p.Hkv)*ck)
}

// words is the long form's scratch words for p (QuantLongParams.words):
// the ticket and the blocks done, then an amax and a count of chunks
// arrived for each head of Q, K and V.
func (g quantLongGeometry) words(p *backend.Problem) int64 {
	return 2 + 2*int64(p.B)*(int64(p.Hq)+2*int64(p.Hkv))
}

// takes reports whether the long form takes p's heads: chunks of at most
// heldRows (chunkRows) with at most as many a head as the grid has blocks
// (a chunk waits for the others of its head, so all of them must be able
// to run at once), and tickets and word offsets within the kernel's
// 32-bit ints.
func (g quantLongGeometry) takes(p *backend.Problem) bool {
	r := g.chunkRows(p)
	return r > 0 && g.chunks(p, r)+2*int64(g.Blocks) < 1<<31 && g.words(p) < 1<<31
}
