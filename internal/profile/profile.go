// Package profile decodes the event table of a kernel module built with
// -DFP8ATTN_PROFILE (backend/cuda/kernels/profile.cuh): 32-bit words
// addressed by (kernel, block, row, slot), each a clock reading (the low 32
// bits of %globaltimer in ns, or of an SM's %clock in cycles) or a value.
// The module exports the table as fp8attn_profile and its geometry as
// fp8attn_profile_layout = {kernels, blocks, rows, slots}; what a slot
// means is the kernel's (profile.cuh lists them). The timeline tests of
// backend/cuda read their kernels' events through it.
package profile

import (
	"fmt"
	"slices"
)

// Table symbols in a profile build's module.
const (
	TableSymbol  = "fp8attn_profile"
	LayoutSymbol = "fp8attn_profile_layout"
)

// Kernel numbers of the Hopper module's events (profile.cuh).
const (
	Quant     = 0 // quant_pack9 and the quantizing one-tile form's quantization
	Attention = 1 // the fused attention's steps
	Loop      = 2 // the tiled kernel's main loop (SM cycles)
)

// Layout is the table's geometry.
type Layout struct {
	Kernels, Blocks, Rows, Slots int
}

// ParseLayout reads fp8attn_profile_layout's four words.
func ParseLayout(w []int32) (Layout, error) {
	if len(w) != 4 {
		return Layout{}, fmt.Errorf("profile: layout has %d words, want 4", len(w))
	}
	l := Layout{int(w[0]), int(w[1]), int(w[2]), int(w[3])}
	if l.Kernels <= 0 || l.Blocks <= 0 || l.Rows <= 0 || l.Slots <= 0 {
		return Layout{}, fmt.Errorf("profile: layout %v", w)
	}
	return l, nil
}

// Words is the number of words of a table of layout l.
func (l Layout) Words() int { return l.Kernels * l.Blocks * l.Rows * l.Slots }

// Table is a decoded event table.
type Table struct {
	Layout
	words []uint32
}

// Decode wraps the table's words (as read from the device) for reading by
// event address.
func Decode(l Layout, words []int32) (*Table, error) {
	if len(words) != l.Words() {
		return nil, fmt.Errorf("profile: %d words, layout %+v has %d", len(words), l, l.Words())
	}
	t := &Table{Layout: l, words: make([]uint32, len(words))}
	for i, w := range words {
		t.words[i] = uint32(w)
	}
	return t, nil
}

// At is the event (kernel, block, row, slot). It panics outside the layout.
func (t *Table) At(kernel, block, row, slot int) uint32 {
	if kernel < 0 || kernel >= t.Kernels || block < 0 || block >= t.Blocks || row < 0 || row >= t.Rows || slot < 0 || slot >= t.Slots {
		panic(fmt.Sprintf("profile: event (%d, %d, %d, %d) outside %+v", kernel, block, row, slot, t.Layout))
	}
	return t.words[((kernel*t.Blocks+block)*t.Rows+row)*t.Slots+slot]
}

// Since is the time from clock reading from to clock reading to: the 32-bit
// difference, so that a wrap of the clock between them does not matter
// (readings less than 2^31 ticks apart).
func Since(from, to uint32) int64 { return int64(int32(to - from)) }

// Median is the median of x (the mean of the two middle values for an even
// count), 0 for none. NaN sorts first.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
