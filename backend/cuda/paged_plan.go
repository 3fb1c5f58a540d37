//go:build cuda

package cuda

import (
	"math"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// pagedWarpsPerSM is how many warps of the attention kernel an SM runs at
// once. Measured on the H200 at D=128 (BenchmarkPagedDecodeSplits,
// docs/design/paged-decode.md):
// an SM reads the cache as fast with 8 warps (two blocks) as with 12 (three,
// all that its shared memory holds), and at two blocks an SM the grid fills
// whole waves more often: B64 Hq32 Hkv8 Sk2048 took 81 µs at two blocks an SM
// against 91 at three.
const pagedWarpsPerSM = 8

// pagedOccupancy returns how many attention blocks of tiles tc an SM of d
// holds (want, if positive; else pagedWarpsPerSM's worth, at most what fits),
// and the dynamic shared memory a block asks for so that no more fit.
func pagedOccupancy(d *device, tc tiles.PagedConfig, want int) (perSM, smem int) {
	const reserved = 1024 + 512 // the driver's reservation and the kernel's static shared memory, a block
	fit := max(1, d.SharedPerSM/(tc.SharedBytes()+reserved))
	if want <= 0 {
		want = max(1, pagedWarpsPerSM/tc.Warps)
	}
	perSM, smem = min(fit, want), tc.SharedBytes()
	if perSM < fit {
		smem = max(smem, d.SharedPerSM/(perSM+1)) // perSM+1 blocks would exceed the SM
	}
	return perSM, smem
}

// planRuns splits a's tokens into runs (consecutive tokens of one batch
// entry going to consecutive slots of one page), orders them into waves in
// which no two runs share a page (a run goes one wave after the last run
// before it on its page), and writes them, wave after wave, to s.runsW with
// the wave boundaries in s.waves.
func (s *pagedKV) planRuns(a *backend.PagedAppend) {
	s.runs = s.runs[:0]
	for b := range a.B {
		for t := range a.N {
			pg, sl := a.Page[b*a.N+t], a.Slot[b*a.N+t]
			if n := len(s.runs); t > 0 && s.runs[n-2] == pg && s.runs[n-1]+s.runs[n-3] == sl {
				s.runs[n-3]++
				continue
			}
			s.runs = append(s.runs, int32(b), int32(t), 1, pg, sl)
		}
	}
	nr := len(s.runs) / 5
	if s.lastWave == nil {
		s.lastWave = map[int32]int{}
	}
	clear(s.lastWave)
	wave := make([]int, nr) // small: one entry per run
	waves := 1
	for r := range nr {
		pg := s.runs[5*r+3]
		if w, ok := s.lastWave[pg]; ok {
			wave[r] = w + 1
		}
		s.lastWave[pg] = wave[r]
		waves = max(waves, wave[r]+1)
	}
	s.runsW = freelist.Grow(s.runsW, len(s.runs))[:0]
	s.waves = s.waves[:0]
	for w := range waves {
		s.waves = append(s.waves, len(s.runsW)/5)
		for r := range nr {
			if wave[r] == w {
				s.runsW = append(s.runsW, s.runs[5*r:5*r+5]...)
			}
		}
	}
	s.waves = append(s.waves, nr)
}

// plan fills s.params for p (everything but the device addresses of the
// call's staging buffers) and returns the grid. A varlen batch runs on the
// cp.async kernel, a block for each split of each of its sequences' own
// items (s.varBlocks), in one launch.
func (s *pagedKV) plan(p *backend.PagedProblem) (gx, gy, gz int) { return s.planSkipping(p, nil) }

// planSkipping is plan for a varlen batch of which the sequences b with
// skip[b] have no items (their rows run elsewhere: paged_varlen.go), or
// for any batch where skip is nil.
func (s *pagedKV) planSkipping(p *backend.PagedProblem, skip []bool) (gx, gy, gz int) {
	g := p.Hq / p.Hkv
	rowBlocks := (g*p.Sq + s.tc.Rows - 1) / s.tc.Rows
	items := p.B * p.Hkv * rowBlocks
	skipped := func(b int) bool { return p.QStarts != nil && b < len(skip) && skip[b] }
	if p.QStarts != nil { // a varlen batch: each sequence's own row blocks
		s.varBlocks = s.varBlocks[:0]
		for b := range p.B {
			if skipped(b) {
				continue
			}
			for rb := range (g*p.Queries(b) + s.tc.Rows - 1) / s.tc.Rows {
				s.varBlocks = append(s.varBlocks, int32(b), int32(rb))
			}
		}
		items = p.Hkv * len(s.varBlocks) / 2
	}
	keys := s.tc.Keys
	maxTiles := max(1, (p.MaxSeqLen+keys-1)/keys) // a graph's bound (0 otherwise)
	if w := p.SlidingWindow; w > 0 && p.MaxSeqLen > 0 {
		maxTiles = max(1, min(maxTiles, windowSpanTiles(w, p.Sq, keys)))
	}
	for b := range p.B {
		if !skipped(b) {
			maxTiles = max(maxTiles, seqTiles(int(p.SeqLens[b]), p.Queries(b), p.SlidingWindow, keys))
		}
	}
	var splits, perSplit int
	s.useWS = false
	if s.wsCfg.Consumers > 0 && s.splits == 0 && p.QStarts == nil { // the device has the warp-specialized kernel for D (uniform batches)
		splits, perSplit = s.splitKeysWS(items, maxTiles)
		s.useWS = items*splits <= wsMaxUnitsPerBlock*s.dev.SMs || s.wsBlocks > 0
		if n := min(s.wsSplits, maxTiles, maxSplits); n > 0 { // forced by a benchmark
			perSplit = (maxTiles + n - 1) / n
			splits, s.useWS = (maxTiles+perSplit-1)/perSplit, true
		}
	}
	switch n := min(s.splits, maxTiles, maxSplits); {
	case n > 0: // forced by a benchmark (the cp.async kernel)
		perSplit = (maxTiles + n - 1) / n
		splits = (maxTiles + perSplit - 1) / perSplit
	case !s.useWS:
		splits, perSplit = s.splitKeys(items, maxTiles)
	}
	bs, hs, rs := p.Layout.Strides(p.Hq, p.Sq, p.D)
	if p.QStarts != nil { // one packed batch entry of p.Rows() rows
		bs, hs, rs = p.Layout.Strides(p.Hq, p.Rows(), p.D)
	}
	mask := int32(0)
	if p.Mask == backend.CausalLowerRight {
		mask = 2
	}
	if s.params == nil {
		s.params = new(pagedParams)
	}
	*s.params = pagedParams{K: uint64(s.k), V: uint64(s.v), KScale: uint64(s.ks), VScale: uint64(s.vs),
		BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs),
		B: int32(p.B), Hq: int32(p.Hq), Hkv: int32(p.Hkv), Sq: int32(p.Sq), D: int32(p.D),
		PageSize: int32(s.cfg.PageSize), PagesPerSeq: int32(p.PagesPerSeq), Mask: mask,
		RowBlocks: int32(rowBlocks), Splits: int32(splits), TilesPerSplit: int32(perSplit),
		ScoreScale: float32(float64(p.Scale) * math.Log2E), Window: int32(p.SlidingWindow)}
	if c := float64(p.Softcap) * math.Log2E; c > 0 { // (1/c past float32's range, for a subnormal softcap: its largest)
		s.params.Softcap, s.params.InvSoftcap = float32(c), float32(min(1/c, math.MaxFloat32))
	}
	s.wsDynamic = false
	if s.useWS { // one block an SM walks the units
		blocks := min(items*splits, s.dev.SMs)
		if s.wsBlocks > 0 {
			blocks = min(items*splits, s.wsBlocks)
		}
		s.params.WSSlots = int32(wsSlots(s.wsCfg, items*splits, blocks))
		s.wsDynamic = items*splits > blocks // blocks draw their later units at run time (stageInputs: the ticket)
		return blocks, 1, 1
	}
	if p.QStarts != nil {
		s.params.QTotal = int32(p.Rows())
		return items, splits, 1
	}
	return splits, p.Hkv * rowBlocks, p.B
}

// seqTiles is how many key tiles (of keys keys) the units of a sequence of
// n keys with sq new queries read, under a sliding window w (0: none): from
// the tile of the first query's lowest key (n-sq-w+1; the kernels'
// window_lo, where each unit starts its splits) to the last key's. A later
// query's window starts no lower, so every unit's span is within it.
func seqTiles(n, sq, w, keys int) int {
	hi := (n + keys - 1) / keys
	if w <= 0 {
		return hi
	}
	return hi - max(0, n-sq-w+1)/keys
}

// windowSpanTiles bounds seqTiles over every length under window w: the
// span is at most w+sq-1 keys, which touch at most (w+sq-2)/keys+2 tiles
// (a graph's plan, for the lengths of its replays).
func windowSpanTiles(w, sq, keys int) int { return (w+sq-2)/keys + 2 }

// maxSplits bounds the key splits of a call (the merge keeps a weight a
// split in shared memory).
const maxSplits = 256

// splitKeys chooses how many blocks share the tiles of one of items (a
// sequence's KV head and row block) of up to maxTiles tiles: the count that
// minimizes a cost in a warp's tile-times, waves·(tiles a warp + 2) for the
// blocks (the 2: a block's fixed work, its query load and its warps' merge),
// plus, with splits, the merge's traffic (its partial rows, written and
// read) and its launch. A wave is every block the GPU holds at once: the SMs
// times s.perSM. Each warp gets at least two tiles.
func (s *pagedKV) splitKeys(items, maxTiles int) (splits, perSplit int) {
	slots := s.perSM * s.dev.SMs
	best := math.Inf(1)
	for n := 1; n <= min(maxTiles, maxSplits); n++ {
		per := (maxTiles + n - 1) / n
		if n > 1 && per < 2*s.tc.Warps {
			break
		}
		blocks := items * n
		cost := float64((blocks+slots-1)/slots) * float64((per+s.tc.Warps-1)/s.tc.Warps+2)
		if n > 1 {
			cost += float64(blocks)/float64(slots) + 2
		}
		if cost < best {
			best, splits, perSplit = cost, n, per
		}
	}
	return splits, perSplit
}

// wsSlots is how many of its ring's slots the warp-specialized kernel uses
// for a call of units units on blocks blocks: two a consumer warp where each
// block has one unit, the whole ring otherwise. Fewer tiles in flight wait
// less in the memory's queues (the ring need only cover the memory's
// latency), while a block with several units needs the whole ring to stream
// on through its consumers' pause between units. Measured on the H200
// (docs/design/paged-decode.md): 16 slots against 24 at D=128, B8 Hq32 Hkv8 Sk8192
// 38.5-39.1 µs against 40.1-40.3 and B1 Sk32768 24.6 against 25.2, one unit
// a block; B64 Sk2048 (four a block) 78.5 against 75.1-75.5.
func wsSlots(c tiles.PagedWSConfig, units, blocks int) int {
	if units <= blocks {
		return min(c.Ring, wsSlotsPerWarpOneUnit*c.Consumers)
	}
	return c.Ring
}

// wsSlotsPerWarpOneUnit: see wsSlots.
const wsSlotsPerWarpOneUnit = 2

// wsMaxUnitsPerBlock: a call whose units would give a block more than this
// many runs the cp.async kernel instead. The consumers of a block meet at
// the end of every unit; on B64 Hq32 Hkv8 Sk2048 (3.9 units a block) the
// warp-specialized kernel with transposed units took 73.0-74.8 µs against
// the cp.async kernel's 75.9-76.0 in the same runs (without them it was
// the slower, 76.5-77.0 against 74.8-75.0; docs/design/paged-decode.md).
const wsMaxUnitsPerBlock = 4

// Costs of the warp-specialized kernel's plan, in tiles' time: a unit's
// fixed work (its query load and its warps' merge, while the producer goes
// on streaming) and the merge of an item's splits by its last unit.
const (
	wsUnitTiles  = 4
	wsMergeTiles = 4
)

// splitKeysWS chooses the key splits for the warp-specialized kernel: one
// block an SM walks the items·n units round robin, so the slowest block has
// ceil(units/SMs) units of ceil(maxTiles/n) tiles and a unit's fixed work
// each, and n > 1 adds the merge; a split has a tile for every consumer
// warp. The count with the least cost wins (the
// fewest splits on a tie).
func (s *pagedKV) splitKeysWS(items, maxTiles int) (splits, perSplit int) {
	best := math.MaxInt
	for n := 1; n <= min(maxTiles, maxSplits); n++ {
		per := (maxTiles + n - 1) / n
		if n > 1 && per < s.wsCfg.Consumers {
			break // a split for every consumer warp at least
		}
		cost := (items*n + s.dev.SMs - 1) / s.dev.SMs * (per + wsUnitTiles)
		if n > 1 {
			cost += wsMergeTiles
		}
		if cost < best {
			best, splits, perSplit = cost, n, per
		}
	}
	return splits, perSplit
}
