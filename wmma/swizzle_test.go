package wmma

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKMajorOffset: each mode places every byte of a 64-row tile exactly
// once, keeps 16-byte chunks whole, repeats every 8 rows, and matches the
// table the header carries.
func TestKMajorOffset(t *testing.T) {
	for _, s := range Swizzles {
		w := int(s)
		seen := make([]int, 64*w)
		for r := range 64 {
			for kb := range w {
				o := KMajorOffset(s, r, kb)
				if o < 0 || o >= len(seen) {
					t.Fatalf("sw%d (%d,%d): offset %d outside the tile", w, r, kb, o)
				}
				seen[o]++
				if o%16 != kb%16 || o/(8*w) != r/8 {
					t.Fatalf("sw%d (%d,%d): offset %d leaves its chunk or its 8-row group", w, r, kb, o)
				}
				if KMajorOffset(s, r%8, kb)+(r/8)*8*w != o {
					t.Fatalf("sw%d: row %d does not repeat row %d", w, r, r%8)
				}
				if got := r*w + 16*s.ChunkTable()[r%8][kb/16] + kb%16; got != o {
					t.Fatalf("sw%d (%d,%d): table gives %d, offset %d", w, r, kb, got, o)
				}
			}
		}
		for o, n := range seen {
			if n != 1 {
				t.Fatalf("sw%d: byte %d placed %d times", w, o, n)
			}
		}
	}
	// 128-byte swizzle, row 3: chunk c goes to c ^ 3.
	if got := Swizzle128.ChunkTable()[3]; got[0] != 3 || got[1] != 2 || got[5] != 6 {
		t.Errorf("sw128 row 3: %v", got)
	}
}

// TestWGMMADescriptor: the encoding of a 128-byte-swizzled K-major operand
// at shared address 0x400 with SBO 1024 (CUTLASS writes LBO 1, SBO 64,
// layout type 1 for this operand).
func TestWGMMADescriptor(t *testing.T) {
	d, err := WGMMADescriptor(0x400, 16, 1024, Swizzle128)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(0x40) | 1<<16 | 64<<32 | 1<<62; d != want {
		t.Errorf("descriptor %#x, want %#x", d, want)
	}
	if _, err := WGMMADescriptor(0x401, 16, 1024, Swizzle128); err == nil {
		t.Error("unaligned address accepted")
	}
	if _, err := WGMMADescriptor(1<<18, 16, 1024, Swizzle128); err == nil {
		t.Error("address past 14 bits accepted")
	}
}

// TestHardwareWGMMASwizzle: the products an H200 computed with operands
// placed by KMajorOffset (through the generated chunk tables) under swizzled
// descriptors, over whole swizzle rows (W/32 wgmma steps, descriptors
// advanced 32 bytes a step), equal A·B recomputed here through the verified
// accumulator layout; and the dump's negative control, linear placement
// under the same descriptors, got products wrong (so the check can fail).
func TestHardwareWGMMASwizzle(t *testing.T) {
	d := loadDump(t, "dump_wgmma_swizzle_sm_90a.txt")
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "wmma", "dump_wgmma_swizzle_sm_90a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	L := WGMMAAcc(64)
	for _, s := range Swizzles {
		w := int(s)
		trials := d.Trials[fmt.Sprintf("wgmma_m64n64k32_e4m3_sw%d", w)]
		if len(trials) == 0 {
			t.Fatalf("sw%d: no trials in the dump", w)
		}
		for k, tr := range trials {
			if err := CheckMMA(rowMajor(64, w), rowMajor(w, 64), L, tr); err != nil {
				t.Errorf("sw%d trial %d: %v", w, k, err)
			}
		}
		var wrong int
		if _, err := fmt.Sscanf(afterPrefix(string(raw), fmt.Sprintf("# control sw%d: ", w)), "%d", &wrong); err != nil || wrong == 0 {
			t.Errorf("sw%d: the negative control did not fail (%d wrong, %v)", w, wrong, err)
		}
		// The check itself: a product with one element off fails.
		bad := trials[0]
		bad.C = append([][]float64(nil), bad.C...)
		bad.C[5] = append([]float64(nil), bad.C[5]...)
		bad.C[5][7]++
		if CheckMMA(rowMajor(64, w), rowMajor(w, 64), L, bad) == nil {
			t.Errorf("sw%d: a wrong product passed", w)
		}
	}
}

// afterPrefix returns the text after the first occurrence of prefix, or "".
func afterPrefix(s, prefix string) string {
	if i := strings.Index(s, prefix); i >= 0 {
		return s[i+len(prefix):]
	}
	return ""
}
