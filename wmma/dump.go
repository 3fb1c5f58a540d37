package wmma

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Dump is a parsed fragment dump (testdata/wmma/dump_*.txt).
type Dump struct {
	// Frags: fragment name -> [lane][element] value; each value encodes
	// row·16 + col of the element the lane holds.
	Frags map[string][][]float64
	// Trials: mma name -> trials, each with every lane's A, B and C
	// elements in register order.
	Trials map[string][]Trial
}

// Trial is one mma.sync execution: operands and the hardware's result.
type Trial struct {
	A, B, C [][]float64 // [lane][element]
}

// ParseDump reads a dump written by testdata/wmma/fragdump.cu.
func ParseDump(r io.Reader) (*Dump, error) {
	d := &Dump{Frags: map[string][][]float64{}, Trials: map[string][]Trial{}}
	sc := bufio.NewScanner(r)
	var frag string
	var trial *Trial
	var trialName string
	flush := func() {
		if trial != nil {
			d.Trials[trialName] = append(d.Trials[trialName], *trial)
			trial = nil
		}
	}
	nums := func(fs []string) ([]float64, error) {
		v := make([]float64, len(fs))
		for i, f := range fs {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, err
			}
			v[i] = x
		}
		return v, nil
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "frag":
			flush()
			frag = f[1]
			d.Frags[frag] = nil
		case "mma":
			flush()
			frag, trialName = "", f[1]
			trial = &Trial{}
		case "A", "B", "C":
			if trial == nil {
				return nil, fmt.Errorf("operand line outside an mma section: %q", sc.Text())
			}
			v, err := nums(f[2:])
			if err != nil {
				return nil, err
			}
			switch f[0] {
			case "A":
				trial.A = append(trial.A, v)
			case "B":
				trial.B = append(trial.B, v)
			default:
				trial.C = append(trial.C, v)
			}
		default:
			if frag == "" {
				return nil, fmt.Errorf("unexpected line %q", sc.Text())
			}
			v, err := nums(f[1:])
			if err != nil {
				return nil, err
			}
			d.Frags[frag] = append(d.Frags[frag], v)
		}
	}
	flush()
	return d, sc.Err()
}

// CheckFrag compares a layout with a fragment dump whose values encode
// row·w + col, w = max(16, L.Cols): row·16 + col for the 16x16 tiles,
// row·64 + col for the wgmma m64n64 accumulator.
func CheckFrag(L Layout, lanes [][]float64) error {
	w := max(16, L.Cols)
	if len(lanes) != L.Lanes {
		return fmt.Errorf("%s: dump has %d lanes, model %d", L.Name, len(lanes), L.Lanes)
	}
	for l, elems := range lanes {
		if len(elems) != L.Elems {
			return fmt.Errorf("%s: lane %d has %d elements, model %d", L.Name, l, len(elems), L.Elems)
		}
		for i, v := range elems {
			r, c := L.At(l, i)
			if want := float64(r*w + c); v != want {
				return fmt.Errorf("%s: lane %d element %d holds (%d,%d) on the GPU, model says (%d,%d)",
					L.Name, l, i, int(v)/w, int(v)%w, r, c)
			}
		}
	}
	return nil
}

// CheckMMA recomputes a trial's product on the CPU, placing operands and
// result by the layouts a, b, c, and compares with the hardware result.
// Small integer operands make every product exact.
func CheckMMA(a, b, c Layout, tr Trial) error {
	A := scatter(a, tr.A)
	B := scatter(b, tr.B)
	for l := 0; l < c.Lanes; l++ {
		for i := 0; i < c.Elems; i++ {
			r, n := c.At(l, i)
			var want float64
			for k := 0; k < a.Cols; k++ {
				want += A[r][k] * B[k][n]
			}
			if got := tr.C[l][i]; got != want {
				return fmt.Errorf("C lane %d element %d (%d,%d): GPU %g, model %g", l, i, r, n, got, want)
			}
		}
	}
	return nil
}

func scatter(L Layout, lanes [][]float64) [][]float64 {
	m := make([][]float64, L.Rows)
	for r := range m {
		m[r] = make([]float64, L.Cols)
	}
	for l := 0; l < L.Lanes && l < len(lanes); l++ {
		for i := 0; i < L.Elems && i < len(lanes[l]); i++ {
			r, c := L.At(l, i)
			m[r][c] = lanes[l][i]
		}
	}
	return m
}

// Swapped returns L with the (row, col) of two (lane, element) slots
// exchanged: a perturbed layout for proving that the tests catch errors.
func Swapped(L Layout, l1, i1, l2, i2 int) Layout {
	at := L.At
	L.Name += "_perturbed"
	L.At = func(l, i int) (int, int) {
		switch {
		case l == l1 && i == i1:
			return at(l2, i2)
		case l == l2 && i == i2:
			return at(l1, i1)
		}
		return at(l, i)
	}
	return L
}

// ChainTrial is one run of testdata/wmma/accfp8.cu: S = Q·Kᵀ on the FP8
// tensor cores, handed to P·V's A registers by AccToE4M3A with V read in
// SigmaKey order (O), and with V read in key order (X, the control).
type ChainTrial struct {
	Q, K, V, O, X [][]float64 // Q 16x32, K 32x32 (keys x d), V 32x8, O and X 16x8
}

// ParseChain reads a dump written by testdata/wmma/accfp8.cu.
func ParseChain(r io.Reader) ([]ChainTrial, error) {
	var out []ChainTrial
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] == "chain" {
			out = append(out, ChainTrial{})
			continue
		}
		if len(out) == 0 || len(f) < 2 {
			return nil, fmt.Errorf("unexpected line %q", sc.Text())
		}
		v := make([]float64, len(f)-2)
		for i, s := range f[2:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, err
			}
			v[i] = x
		}
		t := &out[len(out)-1]
		switch f[0] {
		case "Q":
			t.Q = append(t.Q, v)
		case "K":
			t.K = append(t.K, v)
		case "V":
			t.V = append(t.V, v)
		case "O":
			t.O = append(t.O, v)
		case "X":
			t.X = append(t.X, v)
		default:
			return nil, fmt.Errorf("unexpected line %q", sc.Text())
		}
	}
	return out, sc.Err()
}
