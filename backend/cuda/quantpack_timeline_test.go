//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestQuantPackTimeline is a diagnostic, not a check: with FP8ATTN_PROFILE=1
// and FP8ATTN_CUBIN naming a Hopper module built with -DFP8ATTN_PROFILE
// (kernels/profile.cuh), it replays the fused quantize + attention of the
// mission shape in a graph (as BenchmarkDeviceQuantizeAttention does) and
// logs where the last call's time went: for each step quant_pack9 and the
// fused attention record, the earliest, median and latest block, in µs
// from quant_pack9's first block past pdl_wait. Where the mission shape
// runs the one-tile form that quantizes its own inputs, its blocks record
// the quantization's steps in quant_pack9's slots (kernels/hopper.cuh,
// quantize_one_tile). FP8ATTN_QP_BLOCKS=1 also lists every block of the
// quantization with its SM, latest past pdl_wait first. Skipped otherwise.
func TestQuantPackTimeline(t *testing.T) {
	profileSkip(t, "the Hopper cubin (FP8ATTN_CUBIN)")
	d := hopperDevice(t)
	const slots = 8 // of row 0 of kernels profile.Quant and profile.Attention; 7 is the SM
	s := sdpatest.NamedShapes["mission"]
	in := sdpatest.RandomInputs(rand.New(rand.NewPCG(sdpatest.Seed(), 77)), s, 1)
	// The inputs, then the output and LSE, then the three scale buffers.
	bufs, free := floatBuffers(t, d, in.Q, in.K, in.V, make([]float32, s.B*s.Hq*s.Sq*s.D), make([]float32, s.B*s.Hq*s.Sq),
		make([]float32, s.B*s.Hq), make([]float32, s.B*s.Hkv), make([]float32, s.B*s.Hkv))
	defer free()
	p := &backend.Problem{Shape: s, Scale: 0.125}
	if !d.fusable(p) {
		t.Fatalf("the mission shape is not fused with quant_pack9's geometry %+v", d.quantPack)
	}
	r, err := d.newResident(p, [6]*buffer{bufs[0], bufs[1], bufs[2], bufs[5], bufs[6], bufs[7]}, bufs[3], bufs[4])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	r.fused = true
	clearProfile(t, d, d.hmod)
	var times []float64
	if err := d.do(func() (err error) {
		times, err = d.timeCalls(200, true, func() error { return r.launch(tiles.HopperStage) })
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tab := readProfile(t, d, d.hmod)
	rows := [2][][]int32{}
	for k := range 2 { // profile.Quant, profile.Attention
		for b := range tab.Blocks {
			if row := profileRow(tab, k, b, 0, slots); row[1] != 0 {
				rows[k] = append(rows[k], row)
			}
		}
	}
	if len(rows[0]) == 0 || len(rows[1]) == 0 {
		t.Fatalf("blocks that stamped: quant_pack9 %d, attention %d (is the fused path running?)", len(rows[0]), len(rows[1]))
	}
	t0 := rows[0][0][1]
	for _, row := range rows[0] {
		if row[1]-t0 < 0 {
			t0 = row[1]
		}
	}
	at := func(k, slot int) string {
		var x []float64
		for _, row := range rows[k] {
			if row[slot] != 0 {
				x = append(x, float64(row[slot]-t0)/1e3)
			}
		}
		if len(x) == 0 {
			return "-"
		}
		sort.Float64s(x)
		return fmt.Sprintf("%7.2f %7.2f %7.2f", x[0], x[len(x)/2], x[len(x)-1])
	}
	sms := func(k int) int {
		seen := map[int32]bool{}
		for _, row := range rows[k] {
			seen[row[7]] = true
		}
		return len(seen)
	}
	shared := 0
	for _, a := range rows[1] {
		for _, q := range rows[0] {
			if q[7] == a[7] {
				shared++
				break
			}
		}
	}
	type step struct {
		k, slot int
		name    string
	}
	steps := []step{
		{0, 0, "quant: entry"}, {0, 1, "quant: past pdl_wait"}, {0, 2, "quant: loaded, amax"}, {0, 3, "quant: block amax"},
		{0, 4, "quant: cluster amax"}, {0, 5, "quant: codes in smem"}, {0, 6, "quant: images written"},
		{1, 0, "attn: entry"}, {1, 1, "attn: past pdl_wait"}, {1, 5, "attn: copies issued"}, {1, 2, "attn: consumer started"},
		{1, 3, "attn: last tile done"}, {1, 4, "attn: rows written"},
	}
	if k := d.hopper[s.D]; k.attention(s, true).quantizes {
		t.Logf("mission: the one-tile form quantizing its own inputs, %.2f µs a call (graph replay, median); %d blocks on %d SMs",
			median(times), len(rows[1]), sms(1))
		steps = []step{
			{0, 0, "entry"}, {0, 1, "past pdl_wait"}, {0, 2, "loaded, amax"}, {0, 3, "block amax"},
			{0, 4, "cluster amax"}, {1, 5, "codes stored"}, {0, 5, "codes in smem"}, {0, 6, "copies issued"},
			{1, 2, "consumer started"}, {1, 0, "K shares landed"}, {1, 6, "softmax done"}, {1, 3, "last tile done"}, {1, 4, "rows written"},
		}
	} else {
		t.Logf("mission, geometry %+v: %.2f µs a call (graph replay, median); quant_pack9 %d blocks on %d SMs, attention %d blocks on %d SMs (%d on an SM a quant_pack9 block used)",
			d.quantPack, median(times), len(rows[0]), sms(0), len(rows[1]), sms(1), shared)
	}
	t.Logf("µs from the first block past quant_pack9's pdl_wait (or the quantizing form's), earliest/median/latest block:")
	for _, st := range steps {
		t.Logf("  %-24s %s", st.name, at(st.k, st.slot))
	}
	if os.Getenv("FP8ATTN_QP_BLOCKS") != "" {
		// Each block of kernel 0 (quant_pack9, or the quantizing form's
		// quantization): its SM and its steps, latest past pdl_wait first.
		byWait := append([][]int32(nil), rows[0]...)
		sort.Slice(byWait, func(i, j int) bool { return byWait[i][1]-t0 > byWait[j][1]-t0 })
		t.Logf("blocks by their pass of pdl_wait, latest first: SM, then µs at slots 0-6 of kernel 0")
		for _, row := range byWait {
			line := fmt.Sprintf("  SM %3d", row[7])
			for slot := range 7 {
				if row[slot] == 0 {
					line += "       -"
				} else {
					line += fmt.Sprintf(" %7.2f", float64(row[slot]-t0)/1e3)
				}
			}
			t.Log(line)
		}
	}
}
