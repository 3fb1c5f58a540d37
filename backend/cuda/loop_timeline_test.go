//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/profile"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// The main loop's events (kernels/hopper.cuh, loop_stamp): the blocks read,
// the tiles a warpgroup records (row 64·warpgroup + tile), the slots.
const (
	loopStampBlocks = 4
	loopStampTiles  = 64
	loopStampSlots  = 8
)

// profileSkip skips a timeline test unless FP8ATTN_PROFILE=1 says that the
// modules the FP8ATTN_* variables name are profile builds.
func profileSkip(t *testing.T, module string) {
	if os.Getenv("FP8ATTN_PROFILE") != "1" {
		t.Skipf("diagnostic: needs FP8ATTN_PROFILE=1 and %s built with -DFP8ATTN_PROFILE (kernels/profile.cuh)", module)
	}
}

// clearProfile zeroes the event table of mod, a profile build's module.
func clearProfile(t *testing.T, d *device, mod cu.Module) {
	ptr, size, err := mod.Global(profile.TableSymbol)
	if err != nil {
		t.Fatalf("%s: %v: not a profile build", profile.TableSymbol, err)
	}
	if err := d.do(func() error { return cu.MemsetD32(ptr, 0, size/4) }); err != nil {
		t.Fatal(err)
	}
}

// readProfile reads the event table of mod, a profile build's module.
func readProfile(t *testing.T, d *device, mod cu.Module) *profile.Table {
	var lw, raw []int32
	if err := d.do(func() (err error) { lw, err = d.global(mod, profile.LayoutSymbol, 4); return err }); err != nil {
		t.Fatalf("%s: %v: not a profile build", profile.LayoutSymbol, err)
	}
	l, err := profile.ParseLayout(lw)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.do(func() (err error) { raw, err = d.global(mod, profile.TableSymbol, l.Words()); return err }); err != nil {
		t.Fatal(err)
	}
	tab, err := profile.Decode(l, raw)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// profileRow is row r of block b's events of kernel k, its first n slots.
func profileRow(tab *profile.Table, k, b, r, n int) []int32 {
	row := make([]int32, n)
	for s := range row {
		row[s] = int32(tab.At(k, b, r, s))
	}
	return row
}

// loopShape reads the timeline tests' FP8ATTN_LOOP_SHAPE (def where
// unset): a shape as sdpatest.ParseShape reads it, then, each after a ":",
// optionally a mask as backend.ParseMask reads it, "w" and a sliding
// window, "c" and a softcap.
func loopShape(t *testing.T, def string) (string, backend.Shape, backend.Mask, backend.Variants) {
	spec := os.Getenv("FP8ATTN_LOOP_SHAPE")
	if spec == "" {
		spec = def
	}
	parts := strings.Split(spec, ":")
	s, err := sdpatest.ParseShape(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	m, v := backend.NoMask, backend.Variants{}
	for _, x := range parts[1:] {
		if w, ok := strings.CutPrefix(x, "w"); ok {
			_, err = fmt.Sscan(w, &v.SlidingWindow)
		} else if c, ok := strings.CutPrefix(x, "c"); ok && x != "causal" && x != "causal-lr" {
			_, err = fmt.Sscan(c, &v.Softcap)
		} else {
			m, err = backend.ParseMask(x)
		}
		if err != nil {
			t.Fatalf("FP8ATTN_LOOP_SHAPE %q: %q: %v", spec, x, err)
		}
	}
	return spec, s, m, v
}

// TestStage9LoopTimeline is a diagnostic, not a check: with
// FP8ATTN_PROFILE=1 and FP8ATTN_CUBIN naming a Hopper module built with
// -DFP8ATTN_PROFILE (kernels/profile.cuh), it runs stage 9's
// tiled kernel on FP8ATTN_LOOP_SHAPE (loopShape, default
// 4x32x4096x4096x64) and logs, for the first blocks' two consumer
// warpgroups, how long each step of a tile took in SM cycles (median over
// the blocks and the tiles past the first two and before the last), and,
// block by block, how much of one warpgroup's softmax ran while the
// other's did.
func TestStage9LoopTimeline(t *testing.T) {
	profileSkip(t, "the Hopper cubin (FP8ATTN_CUBIN)")
	d := hopperDevice(t)
	spec, s, m, v := loopShape(t, "4x32x4096x4096x64")
	in := sdpatest.RandomInputs(rand.New(rand.NewPCG(sdpatest.Seed(), 27)), s, 1)
	p, _, _ := sdpatest.NewProblem(s, in, float32(0.125), m, backend.FP8E4M3)
	p.Variants = v
	times, err := testBackend(tiles.HopperStage).DeviceTimes(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	tab := readProfile(t, d, d.hmod)
	at := func(blk, wg, tile, slot int) uint32 { return tab.At(profile.Loop, blk, loopStampTiles*wg+tile, slot) }
	cfg, err := tiles.Hopper(s.D)
	if err != nil {
		t.Fatal(err)
	}
	ntiles := min((s.Sk+cfg.BlockN-1)/cfg.BlockN, loopStampTiles)
	t.Logf("%s: %.1f µs a call (median of %d); %d tiles a block, SM cycles a step, median over blocks 0-%d and tiles 2..%d",
		spec, median(times), len(times), ntiles, loopStampBlocks-1, ntiles-2)
	names := []string{"wait P·V(t-2)", "fold", "wait for turn", "issue", "wait Q·K(t)", "softmax (its turn included)", "pack"}
	for wg := range 2 {
		steps := make([][]float64, len(names)+1)
		for blk := range loopStampBlocks {
			for tile := 2; tile < ntiles-1; tile++ {
				for k := range names {
					steps[k] = append(steps[k], float64(at(blk, wg, tile, k+1)-at(blk, wg, tile, k)))
				}
				steps[len(names)] = append(steps[len(names)], float64(at(blk, wg, tile+1, 0)-at(blk, wg, tile, 0)))
			}
		}
		var b strings.Builder
		for k, name := range names {
			fmt.Fprintf(&b, " %s %.0f,", name, median(steps[k]))
		}
		fmt.Fprintf(&b, " tile %.0f", median(steps[len(names)]))
		t.Logf("warpgroup %d:%s", wg, b.String())
	}
	// The softmaxes (slots 5 to 6) of the two warpgroups, block by block:
	// the cycles of warpgroup 0's that overlap any of warpgroup 1's, over
	// its total.
	overlap := make([]string, loopStampBlocks)
	for blk := range loopStampBlocks {
		rel := func(wg, tile, slot int) int64 { return int64(at(blk, wg, tile, slot) - at(blk, 0, 0, 2)) } // past a clock wrap too
		var both, total int64
		for tile := 2; tile < ntiles-1; tile++ {
			a0, a1 := rel(0, tile, 5), rel(0, tile, 6)
			total += a1 - a0
			for u := 1; u < ntiles-1; u++ {
				b0, b1 := rel(1, u, 5), rel(1, u, 6)
				if lo, hi := max(a0, b0), min(a1, b1); hi > lo {
					both += hi - lo
				}
			}
		}
		overlap[blk] = fmt.Sprintf("%.0f%%", 100*float64(both)/float64(max(total, 1)))
	}
	t.Logf("softmaxes: the share of warpgroup 0's that ran beside one of warpgroup 1's, blocks 0-%d: %s",
		loopStampBlocks-1, strings.Join(overlap, " "))
	var pw []float64
	for blk := range loopStampBlocks {
		for tile := 4; tile < ntiles-1; tile++ {
			pw = append(pw, float64(at(blk, 2, tile, 1)-at(blk, 2, tile, 0)))
		}
	}
	t.Logf("producer: wait for a free slot %.0f cycles (median)", median(pw))
	for tile := range min(ntiles, 6) { // block 0, raw, from its first stamp
		t0 := at(0, 0, 0, 2)
		var b strings.Builder
		for wg := range 2 {
			fmt.Fprintf(&b, " | wg%d", wg)
			for k := range loopStampSlots {
				fmt.Fprintf(&b, " %d", int32(at(0, wg, tile, k)-t0))
			}
		}
		t.Logf("block 0 tile %d:%s", tile, b.String())
	}
}

// TestStage9BlockTimeline is a diagnostic, not a check: with
// FP8ATTN_PROFILE=1 and FP8ATTN_CUBIN naming a Hopper module built with
// -DFP8ATTN_PROFILE, it replays the tensor form (what Device.Attention
// runs on FP8 device tensors) on FP8ATTN_LOOP_SHAPE (loopShape, default
// 4x32x4096x4096x128) in a graph, and logs
// where an SM's time went over the last call's first blocks (profile.cuh's
// block limit): per block, medians of its steps (kernels/hopper/quant_pack.cuh,
// QP_STAMP: entry, past pdl_wait, consumer 0 started, Q landed, last tile
// done, rows written), the gap from a block's rows written to the next
// block's entry on its SM, and the shares of the SMs' busy span.
func TestStage9BlockTimeline(t *testing.T) {
	profileSkip(t, "the Hopper cubin (FP8ATTN_CUBIN)")
	d := hopperDevice(t)
	spec, s, m, v := loopShape(t, "4x32x4096x4096x128")
	in := sdpatest.RandomInputs(rand.New(rand.NewPCG(sdpatest.Seed(), 28)), s, 1)
	bufs, free := deviceInputs(t, d, s, backend.BHSD, in)
	defer free()
	r, err := d.newResident(&backend.Problem{Shape: s, Scale: 0.125, Mask: m, Variants: v}, bufs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	clearProfile(t, d, d.hmod)
	times, err := r.Times(tiles.HopperStage, 20, true)
	if err != nil {
		t.Fatal(err)
	}
	tab := readProfile(t, d, d.hmod)
	const entry, pastWait, started, done, written, qLanded, sm = 0, 1, 2, 3, 4, 6, 7
	bySM := map[uint32][][]uint32{}
	for b := range tab.Blocks {
		row := make([]uint32, 8)
		for k := range row {
			row[k] = tab.At(profile.Attention, b, 0, k)
		}
		if row[written] != 0 && row[qLanded] != 0 {
			bySM[row[sm]] = append(bySM[row[sm]], row)
		}
	}
	if len(bySM) == 0 {
		t.Fatal("no block stamped its steps (a profile build of the tiled form?)")
	}
	steps := []struct {
		name     string
		from, to int
	}{
		{"entry to past pdl_wait", entry, pastWait}, {"to consumer started", pastWait, started},
		{"to Q landed", started, qLanded}, {"main loop (to last tile done)", qLanded, done}, {"epilogue (to rows written)", done, written},
	}
	got := make([][]float64, len(steps)+1)
	var busy, gaps, loops float64
	blocks := 0
	for _, rows := range bySM {
		ref := rows[0][entry] // (the clock's low 32 bits: times from one of them)
		sort.Slice(rows, func(i, j int) bool { return profile.Since(ref, rows[i][entry]) < profile.Since(ref, rows[j][entry]) })
		for i, row := range rows {
			for k, st := range steps {
				got[k] = append(got[k], float64(profile.Since(row[st.from], row[st.to]))/1e3)
			}
			loops += float64(profile.Since(row[qLanded], row[done])) / 1e3
			if i+1 < len(rows) {
				g := float64(profile.Since(row[written], rows[i+1][entry])) / 1e3
				got[len(steps)] = append(got[len(steps)], g)
				gaps += g
			}
		}
		busy += float64(profile.Since(rows[0][entry], rows[len(rows)-1][written])) / 1e3
		blocks += len(rows)
	}
	t.Logf("%s: %.1f µs a call (graph replay, median of %d); %d blocks on %d SMs recorded", spec, median(times), len(times), blocks, len(bySM))
	for k, st := range steps {
		x := got[k]
		sort.Float64s(x)
		t.Logf("  %-32s median %6.2f µs, range %6.2f .. %6.2f", st.name, median(x), x[0], x[len(x)-1])
	}
	if x := got[len(steps)]; len(x) > 0 {
		sort.Float64s(x)
		t.Logf("  %-32s median %6.2f µs, range %6.2f .. %6.2f", "gap to the SM's next block", median(x), x[0], x[len(x)-1])
	}
	t.Logf("  of the SMs' spans from first entry to last rows written: main loops %.1f%%, gaps between blocks %.1f%%, the rest (prologues, epilogues) %.1f%%",
		100*loops/busy, 100*gaps/busy, 100*(busy-loops-gaps)/busy)
}
