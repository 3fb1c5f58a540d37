//go:build cuda

package cuda

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/profile"
)

// TestPackedTimeline is a diagnostic, not a check: with FP8ATTN_PROFILE=1
// and FP8ATTN_CUBIN naming a Hopper module built with -DFP8ATTN_PROFILE,
// it runs the packed form on a step of continuous batching (Hq32 Hkv8 D128,
// 4 sequences with 512 new tokens and 60 with one, 4096-8191 cached: the
// serving benchmark's) and on each kind of its items alone (the other
// kind's counts 0), and logs where the SMs' time went, item by item
// (QP_STAMP: entry to rows written): each kind's items, their median time
// a key tile, the SM time they took, and over the launch's span how many
// SMs ran each kind.
func TestPackedTimeline(t *testing.T) {
	profileSkip(t, "the Hopper cubin (FP8ATTN_CUBIN)")
	d, be, rng := prefillTestDevice(t, 0x7A73)
	if d.ComputeCapability != 90 {
		t.Skip("the packed form is the Hopper kernel's")
	}
	be.pagedPacked = true
	const hkv, g, chunk, chunks, decodes = 8, 4, 512, 4, 60
	var counts, lens []int
	for i := range chunks + decodes {
		n, c := 4096+i*4095/(decodes-1), 1
		if i < chunks {
			n, c = 4096+i*4095/(chunks-1), chunk
		}
		counts, lens = append(counts, c), append(lens, n+c)
	}
	kv, table, per := plainCache(t, be, rng, hkv, 128, 64, lens)
	defer kv.Close()
	k := d.hopper[pagedTilesHeadDim]
	for _, part := range []string{"step", "chunks", "tokens"} {
		c := packedCase{hkv: hkv, g: g, counts: slices.Clone(counts), lens: lens, mask: backend.CausalLowerRight, layout: backend.BHSD}
		for b := range c.counts {
			if (part == "chunks" && b >= chunks) || (part == "tokens" && b < chunks) {
				c.counts[b] = 0
			}
		}
		p := packedProblem(c, table, per)
		for i := range p.Q {
			p.Q[i] = float32(rng.NormFloat64())
		}
		for range 3 {
			if err := kv.Attention(p); err != nil {
				t.Fatal(err)
			}
		}
		clearProfile(t, d, d.hmod)
		before := packedLaunches.Load()
		if err := kv.Attention(p); err != nil {
			t.Fatal(err)
		}
		if packedLaunches.Load() != before+1 {
			t.Fatal("the packed form did not run")
		}
		tab := readProfile(t, d, d.hmod)
		items := packedItems(p, k.cfg.BlockM, k.cfg.BlockN, packedOrder())
		logPackedTimeline(t, part, p, items, k.cfg.BlockM, k.cfg.BlockN, tab)
	}
}

// logPackedTimeline logs the items' events of tab (one launch of items over
// p, tiles of bn keys, blocks of bm rows): see TestPackedTimeline.
func logPackedTimeline(t *testing.T, part string, p *backend.PagedProblem, items []packedItem, bm, bn int, tab *profile.Table) {
	const entry, written, smSlot = 0, 4, 7
	if len(items) > tab.Blocks {
		t.Fatalf("%d items, the profile table holds %d blocks", len(items), tab.Blocks)
	}
	type span struct {
		from, to int64 // ns from the launch's first entry
		sm       uint32
		short    bool
		tiles    int
	}
	ref := tab.At(profile.Attention, 0, 0, entry)
	var spans []span
	for x, it := range items {
		e, w := tab.At(profile.Attention, x, 0, entry), tab.At(profile.Attention, x, 0, written)
		if e == 0 || w == 0 {
			t.Fatalf("item %d stamped no entry or no rows written (a profile build?)", x)
		}
		spans = append(spans, span{profile.Since(ref, e), profile.Since(ref, w), tab.At(profile.Attention, x, 0, smSlot),
			2*int(it.Rows) <= bm, max(1, packedKeyTiles(p, int(it.B), int(it.R0), int(it.Rows), bn))})
	}
	first, last := spans[0].from, spans[0].to
	sms := map[uint32]bool{}
	for _, s := range spans {
		first, last = min(first, s.from), max(last, s.to)
		sms[s.sm] = true
	}
	t.Logf("%s: %d items on %d SMs, %.1f µs from the first entry to the last rows written", part, len(spans), len(sms),
		float64(last-first)/1e3)
	for _, short := range []bool{false, true} {
		var per, dur []float64
		var smTime float64
		end := first
		for _, s := range spans {
			if s.short != short {
				continue
			}
			d := float64(s.to - s.from)
			dur = append(dur, d/1e3)
			per = append(per, d/float64(s.tiles))
			smTime += d / 1e3
			end = max(end, s.to)
		}
		if len(dur) == 0 {
			continue
		}
		sort.Float64s(dur)
		sort.Float64s(per)
		name := map[bool]string{false: "long items (chunks)", true: "short items (tokens)"}[short]
		t.Logf("  %-22s %4d: %.2f µs each (median; %.2f .. %.2f), %.0f ns a key tile (median; %.0f .. %.0f), %.0f SM·µs (%.1f µs of all SMs), the last done at %.1f µs",
			name, len(dur), median(dur), dur[0], dur[len(dur)-1], median(per), per[0], per[len(per)-1], smTime,
			smTime/float64(len(sms)), float64(end-first)/1e3)
	}
	// How many SMs ran each kind, at 20 points of the span.
	var b strings.Builder
	for i := range 20 {
		at := first + (last-first)*int64(2*i+1)/40
		var long, short int
		for _, s := range spans {
			if s.from <= at && at < s.to {
				if s.short {
					short++
				} else {
					long++
				}
			}
		}
		fmt.Fprintf(&b, " %d+%d", long, short)
	}
	t.Logf("  SMs running long+short items at each twentieth of the span:%s", b.String())
}
