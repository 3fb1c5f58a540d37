// Package mutant proves that tests catch what they are meant to: each
// Mutant is a deliberately broken variant of one source file (one exact
// replacement), which Run builds through go's -overlay, without touching
// the file, and under which the named tests must fail.
//
// Mutants are slow (one build of the package's tests each): Run skips
// unless FP8ATTN_MUTANTS=1, and under -short.
package mutant

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Env is the environment variable that turns the mutant runs on.
const Env = "FP8ATTN_MUTANTS"

// Mutant is one broken variant of one file.
type Mutant struct {
	// Name says what the variant breaks.
	Name string
	// File is the source file, relative to the module root; Old occurs in
	// it exactly once and is replaced by New.
	File, Old, New string
	// Pkg is the package whose tests run (relative to the module root,
	// "./sdpa"); Tests names them (the -run pattern, one ^Name$ per test).
	Pkg   string
	Tests []string
}

// Run runs each mutant's tests against its variant and fails t for a
// mutant that no test catches (the tests pass) or that does not apply
// (Old not found exactly once, the variant does not build).
func Run(t *testing.T, ms []Mutant) {
	if testing.Short() || os.Getenv(Env) != "1" {
		t.Skipf("mutant runs build the package once each: set %s=1 (and no -short)", Env)
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(string(root))
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			path := filepath.Join(dir, m.File)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), m.Old); n != 1 {
				t.Fatalf("%s: the text to replace occurs %d times, want once: %q", m.File, n, m.Old)
			}
			tmp := t.TempDir()
			broken := filepath.Join(tmp, filepath.Base(m.File))
			if err := os.WriteFile(broken, []byte(strings.Replace(string(src), m.Old, m.New, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			ov, _ := json.Marshal(map[string]map[string]string{"Replace": {path: broken}})
			overlay := filepath.Join(tmp, "overlay.json")
			if err := os.WriteFile(overlay, ov, 0o644); err != nil {
				t.Fatal(err)
			}
			var run []string
			for _, name := range m.Tests {
				run = append(run, "^"+regexp.QuoteMeta(name)+"$")
			}
			cmd := exec.Command("go", "test", "-overlay", overlay, "-count=1", "-run", strings.Join(run, "|"), m.Pkg)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if strings.Contains(string(out), "[build failed]") || strings.Contains(string(out), "[setup failed]") {
				t.Fatalf("the variant does not build:\n%s", out)
			}
			if err == nil {
				t.Fatalf("no test caught the variant: %v pass with %s's %q replaced by %q", m.Tests, m.File, m.Old, m.New)
			}
			// Only the named tests ran: a failure of one of them, or the
			// test process ending (a fatal error the variant let through)
			// while they ran.
			caught := strings.Contains(string(out), "fatal error: ")
			for _, name := range m.Tests {
				caught = caught || strings.Contains(string(out), "--- FAIL: "+name)
			}
			if !caught {
				t.Fatalf("the run failed, but not in %v:\n%s", m.Tests, out)
			}
		})
	}
}
