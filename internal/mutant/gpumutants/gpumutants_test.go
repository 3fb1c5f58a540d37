package gpumutants

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestMutantsApply: every GPU mutant applies to the sources (its text
// occurs once; nothing is built), names tests its package has, and has a
// binary name of its own.
func TestMutantsApply(t *testing.T) {
	word := regexp.MustCompile(`^[a-z0-9]+$`)
	bins := map[string]bool{}
	for _, m := range List {
		if err := mutant.Check(m); err != nil {
			t.Error(err)
		}
		if !word.MatchString(m.Name) {
			t.Errorf("mutant %q: the name is not one lower-case word", m.Name)
		}
		if bin := BinName(m); bins[bin] {
			t.Errorf("mutant %q: the binary %s is another mutant's", m.Name, bin)
		} else {
			bins[bin] = true
		}
		if len(m.Tests) == 0 {
			t.Errorf("mutant %q names no test", m.Name)
		}
		var src strings.Builder
		files, err := filepath.Glob(filepath.Join("..", "..", "..", m.Pkg, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("mutant %q: the tests of %s: %v", m.Name, m.Pkg, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
		for _, name := range m.Tests {
			if !strings.Contains(src.String(), "\nfunc "+name+"(t *testing.T) {") {
				t.Errorf("mutant %q: %s has no test %s", m.Name, m.Pkg, name)
			}
		}
	}
}

// TestBinName: the cuda backend's mutants and another package's.
func TestBinName(t *testing.T) {
	for _, c := range []struct{ pkg, want string }{
		{"./backend/cuda", "broken-x.test"},
		{"./sdpa", "sdpa-broken-x.test"},
	} {
		if got := BinName(mutant.Mutant{Name: "x", Pkg: c.pkg}); got != c.want {
			t.Errorf("%s: %s, want %s", c.pkg, got, c.want)
		}
	}
}
