package wmma

import (
	"os"
	"path/filepath"
	"testing"
)

var dumpFiles = []string{"dump_compute_89.txt", "dump_sm_90.txt"}

func loadDump(t *testing.T, name string) *Dump {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "wmma", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ParseDump(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCoverage(t *testing.T) {
	for _, L := range All() {
		copies := 1
		if L.Elems*L.Lanes == 2*L.Rows*L.Cols {
			copies = 2 // WMMA A/B fragments repeat elements 0..7 as 8..15
		}
		if err := L.Coverage(copies); err != nil {
			t.Error(err)
		}
	}
}

// TestHardwareFragments holds every layout to both hardware dumps.
func TestHardwareFragments(t *testing.T) {
	for _, file := range dumpFiles {
		d := loadDump(t, file)
		for _, L := range Fragments {
			if err := CheckFrag(L, d.Frags[L.Name]); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
		// The accumulator as an mma produces it (I x coded tile).
		acc := WMMAAccF32
		if err := CheckFrag(acc, d.Frags["wmma_m16n16k16_acc_f32_mma"]); err != nil {
			t.Errorf("%s: after mma_sync: %v", file, err)
		}
		if err := CheckFrag(acc, d.Frags["wmma_m16n16k16_acc_f32_load"]); err != nil {
			t.Errorf("%s: after load_matrix_sync: %v", file, err)
		}
	}
}

// TestHardwareProducts recomputes every mma.sync trial from the layouts.
func TestHardwareProducts(t *testing.T) {
	for _, file := range dumpFiles {
		d := loadDump(t, file)
		for name, ops := range map[string][3]Layout{
			"mma_m16n8k16_f16":  {MMAF16A, MMAF16B, MMAC},
			"mma_m16n8k32_e4m3": {MMAE4M3A, MMAE4M3B, MMAC},
		} {
			trials := d.Trials[name]
			if len(trials) == 0 {
				t.Fatalf("%s: no %s trials", file, name)
			}
			for k, tr := range trials {
				if err := CheckMMA(ops[0], ops[1], ops[2], tr); err != nil {
					t.Errorf("%s %s trial %d: %v", file, name, k, err)
				}
			}
		}
	}
}

// TestPerturbationsCaught: swapping any two slots of any verified layout
// (a sample of pairs per layout) makes the hardware checks fail.
func TestPerturbationsCaught(t *testing.T) {
	d := loadDump(t, dumpFiles[1])
	pairs := [][4]int{{0, 0, 0, 1}, {0, 1, 0, 2}, {0, 2, 0, 4}, {3, 0, 4, 0}, {0, 0, 31, 3}, {5, 1, 9, 1}}
	for _, L := range append(Fragments, WMMAAccF32) {
		dump := d.Frags[L.Name]
		if L.Name == WMMAAccF32.Name {
			dump = d.Frags[L.Name+"_mma"]
		}
		for _, p := range pairs {
			P := Swapped(L, p[0], p[1], p[2], p[3])
			if r1, c1 := L.At(p[0], p[1]); true {
				if r2, c2 := L.At(p[2], p[3]); r1 == r2 && c1 == c2 {
					continue // same element: not a perturbation
				}
			}
			if CheckFrag(P, dump) == nil {
				t.Errorf("%s: swap %v not caught", L.Name, p)
			}
		}
	}
	for name, ops := range map[string][3]Layout{"mma_m16n8k16_f16": {MMAF16A, MMAF16B, MMAC}, "mma_m16n8k32_e4m3": {MMAE4M3A, MMAE4M3B, MMAC}} {
		for which := 0; which < 3; which++ {
			for _, p := range pairs {
				o := ops
				o[which] = Swapped(o[which], p[0], p[1]%o[which].Elems, p[2], p[3]%o[which].Elems)
				caught := false
				for _, tr := range d.Trials[name] {
					caught = caught || CheckMMA(o[0], o[1], o[2], tr) != nil
				}
				r1, c1 := ops[which].At(p[0], p[1]%o[which].Elems)
				r2, c2 := ops[which].At(p[2], p[3]%o[which].Elems)
				if !caught && (r1 != r2 || c1 != c2) {
					t.Errorf("%s operand %d: swap %v not caught", name, which, p)
				}
			}
		}
	}
}

// TestSeedTableWrong: a plausible accumulator table for lane 0,
// (0,0),(0,1),(0,8),(0,9),(8,0),(8,1),(8,8),(8,9), disagrees with the
// hardware on elements 2..5: the layouts are read from the hardware's
// fragment dumps (testdata/wmma), not guessed.
func TestSeedTableWrong(t *testing.T) {
	seed := [8][2]int{{0, 0}, {0, 1}, {0, 8}, {0, 9}, {8, 0}, {8, 1}, {8, 8}, {8, 9}}
	var wrong []int
	for i, rc := range seed {
		if r, c := WMMAAccF32.At(0, i); r != rc[0] || c != rc[1] {
			wrong = append(wrong, i)
		}
	}
	if len(wrong) != 4 || wrong[0] != 2 || wrong[3] != 5 {
		t.Fatalf("seed table differs from hardware at elements %v, want [2 3 4 5]", wrong)
	}
}

// rowMajor is the trivial layout of a matrix dumped row by row: "lane" r
// holds row r. It places the wgmma trials' shared-memory operands.
func rowMajor(rows, cols int) Layout {
	return Layout{Name: "row-major", Rows: rows, Cols: cols, Lanes: rows, Elems: cols,
		At: func(l, i int) (int, int) { return l, i }}
}

// TestHardwareWGMMA holds WGMMAAcc(64) to the Hopper dump: the coded
// product D[r][c] = 64r+c, and random e4m3 products recomputed on the CPU
// with A and B as the program stored them (K-major, no swizzle). A swapped
// slot must fail both.
func TestHardwareWGMMA(t *testing.T) {
	d := loadDump(t, "dump_wgmma_sm_90a.txt")
	L := WGMMAAcc(64)
	if err := CheckFrag(L, d.Frags[L.Name]); err != nil {
		t.Error(err)
	}
	trials := d.Trials["wgmma_m64n64k32_e4m3"]
	if len(trials) == 0 {
		t.Fatal("no wgmma trials in the dump")
	}
	a, b := rowMajor(64, 32), rowMajor(32, 64)
	for k, tr := range trials {
		if err := CheckMMA(a, b, L, tr); err != nil {
			t.Errorf("trial %d: %v", k, err)
		}
	}
	for _, p := range [][4]int{{0, 0, 0, 1}, {0, 1, 0, 2}, {0, 3, 0, 4}, {0, 0, 32, 0}, {1, 5, 127, 31}, {64, 2, 96, 2}} {
		P := Swapped(L, p[0], p[1], p[2], p[3])
		if CheckFrag(P, d.Frags[L.Name]) == nil {
			t.Errorf("swap %v not caught by the coded dump", p)
		}
		if CheckMMA(a, b, P, trials[0]) == nil {
			t.Errorf("swap %v not caught by the products", p)
		}
	}
}

// TestHardwareWGMMARS holds WGMMAE4M3A to the Hopper dump: every thread's
// A registers, filled with random codes without any layout in mind, placed
// by the model and multiplied by B must give the accumulators the H200
// returned (through the verified WGMMAAcc(64)). A swapped slot must fail.
func TestHardwareWGMMARS(t *testing.T) {
	d := loadDump(t, "dump_wgmma_rs_sm_90a.txt")
	trials := d.Trials["wgmma_m64n64k32_e4m3_rs"]
	if len(trials) == 0 {
		t.Fatal("no wgmma trials in the dump")
	}
	if err := WGMMAE4M3A.Coverage(1); err != nil {
		t.Fatal(err)
	}
	b, c := rowMajor(32, 64), WGMMAAcc(64)
	for k, tr := range trials {
		if err := CheckMMA(WGMMAE4M3A, b, c, tr); err != nil {
			t.Errorf("trial %d: %v", k, err)
		}
	}
	// A swap of two slots holding equal values cannot change a product, so
	// a swap needs to be caught by one of the trials, not each.
	for _, p := range [][4]int{{0, 0, 0, 1}, {0, 4, 0, 8}, {0, 0, 1, 0}, {5, 3, 37, 3}, {0, 15, 127, 15}} {
		caught := false
		for _, tr := range trials {
			caught = caught || CheckMMA(Swapped(WGMMAE4M3A, p[0], p[1], p[2], p[3]), b, c, tr) != nil
		}
		if !caught {
			t.Errorf("swap %v not caught by the products", p)
		}
	}
}

// accToA is the hand-over rule under test: AccToE4M3A, or a doctored copy.
type accToA func(e int) (tile, i int)

// handOverErrors checks a hand-over against the verified layouts: element e
// of lane l's A fragment (MMAE4M3A) must hold the accumulator element (MMAC)
// of the same row whose key is the one SigmaKey stores at e's A column.
func handOverErrors(f accToA, sigma func(int) int) int {
	bad := 0
	for l := 0; l < 32; l++ {
		for e := 0; e < 16; e++ {
			row, col := MMAE4M3A.At(l, e)
			key := 16*(col/16) + sigma(col%16)
			tile, i := f(e)
			r, c := MMAC.At(l, i)
			if r != row || 8*tile+c != key {
				bad++
			}
		}
	}
	return bad
}

// TestAccToE4M3A: the hand-over of P agrees with the hardware-verified A and
// accumulator layouts for every lane, SigmaKey is a permutation of each
// 16-key group, and doctored variants (two bytes swapped, no permutation)
// fail.
func TestAccToE4M3A(t *testing.T) {
	if n := handOverErrors(AccToE4M3A, SigmaKey); n != 0 {
		t.Errorf("%d (lane, element) pairs take the wrong accumulator element", n)
	}
	seen := map[int]bool{}
	for q := 0; q < 16; q++ {
		seen[SigmaKey(q)] = true
	}
	if len(seen) != 16 {
		t.Errorf("SigmaKey is not a permutation of 0-15: %v", seen)
	}
	swapped := func(e int) (int, int) {
		if e == 1 || e == 2 {
			e = 3 - e
		}
		return AccToE4M3A(e)
	}
	if handOverErrors(swapped, SigmaKey) == 0 {
		t.Error("a hand-over with bytes 1 and 2 swapped passed")
	}
	if handOverErrors(AccToE4M3A, func(q int) int { return q }) == 0 {
		t.Error("the hand-over without the key permutation passed")
	}
}

// TestHardwareAccToE4M3A holds the hand-over to the hardware: the dump's
// outputs, computed on an H200 through FP8 tensor cores with every operand
// and the hand-over placed by the generated tables, equal (Q·Kᵀ)·V exactly
// (small integers), and the control (V in key order) differs.
func TestHardwareAccToE4M3A(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "wmma", "dump_acc_e4m3_compute_89.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	trials, err := ParseChain(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) == 0 {
		t.Fatal("no trials in the dump")
	}
	caught := false
	for k, tr := range trials {
		if len(tr.Q) != 16 || len(tr.K) != 32 || len(tr.V) != 32 || len(tr.O) != 16 || len(tr.X) != 16 {
			t.Fatalf("trial %d: malformed", k)
		}
		for i := 0; i < 16; i++ {
			for n := 0; n < 8; n++ {
				var want float64
				for j := 0; j < 32; j++ {
					var s float64
					for c := 0; c < 32; c++ {
						s += tr.Q[i][c] * tr.K[j][c]
					}
					want += s * tr.V[j][n]
				}
				if tr.O[i][n] != want {
					t.Errorf("trial %d: O[%d][%d] = %g, want %g", k, i, n, tr.O[i][n], want)
				}
				caught = caught || tr.X[i][n] != want
			}
		}
	}
	if !caught {
		t.Error("the control (V without the key permutation) matched: the trials cannot tell the permutation apart")
	}
}
