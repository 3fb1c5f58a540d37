// Package mutant proves that tests catch what they are meant to: each
// Mutant is a deliberately broken variant of one source file (one exact
// replacement), which Run builds through go's -overlay, without touching
// the file, and under which the named tests must fail.
//
// Mutants are slow (one build of the package's tests each): Run skips
// unless FP8ATTN_MUTANTS=1, and under -short. Mutants whose tests need a
// machine without a Go toolchain (the GPU tests) are built here with Build
// and their test binaries run there.
package mutant

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Env is the environment variable that turns the mutant runs on.
const Env = "FP8ATTN_MUTANTS"

// Mutant is one broken variant of one file.
type Mutant struct {
	// Name says what the variant breaks.
	Name string
	// File is the source file, relative to the module root; Old occurs in
	// it exactly once (All: at least once) and is replaced by New (All:
	// every occurrence).
	File, Old, New string
	All            bool
	// Pkg is the package whose tests run (relative to the module root,
	// "./sdpa"); Tests names them (the -run pattern, one ^Name$ per test).
	Pkg   string
	Tests []string
	// Arch "arm64" runs the tests built for arm64, with -short (a variant
	// of arm64 assembly, or of code only arm64's compiler breaks): on an
	// arm64 machine natively, elsewhere under qemu-aarch64-static, skipped
	// where it is missing. Empty: the machine's own. Build takes only
	// mutants without Arch.
	Arch string
	// Skip, when not empty, says why this machine cannot run the tests (a
	// CPU feature it lacks): the mutant is skipped, once Run has checked
	// that it applies.
	Skip string
}

// qemuARM64 runs arm64 test binaries (Mutant.Arch).
const qemuARM64 = "qemu-aarch64-static"

// RunPattern returns the -run pattern that selects m's tests.
func (m Mutant) RunPattern() string {
	var run []string
	for _, name := range m.Tests {
		run = append(run, "^"+regexp.QuoteMeta(name)+"$")
	}
	return strings.Join(run, "|")
}

// moduleRoot is the directory of the main module.
var moduleRoot = sync.OnceValues(func() (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("mutant: finding the module root: %w", err)
	}
	return strings.TrimSpace(string(root)), nil
})

// variant returns m's file with Old replaced by New, and the file's path.
func (m Mutant) variant(root string) (path, src string, err error) {
	path = filepath.Join(root, m.File)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	if n := strings.Count(string(b), m.Old); n != 1 && !(m.All && n > 1) {
		return "", "", fmt.Errorf("mutant %q: %s: the text to replace occurs %d times, want once: %q", m.Name, m.File, n, m.Old)
	}
	return path, strings.ReplaceAll(string(b), m.Old, m.New), nil
}

// overlay writes m's variant and an overlay that builds it in place of the
// file into dir, and returns the overlay's path (for go's -overlay).
func (m Mutant) overlay(root, dir string) (string, error) {
	path, src, err := m.variant(root)
	if err != nil {
		return "", err
	}
	broken := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(broken, []byte(src), 0o644); err != nil {
		return "", err
	}
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {path: broken}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, ov, 0o644)
}

// Check returns an error unless m applies to the sources: its Old occurs
// in its File exactly once. It builds nothing.
func Check(m Mutant) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	_, _, err = m.variant(root)
	return err
}

// Build compiles the test binary of m.Pkg with m's variant in place of
// m.File (go test -c -tags tags -o out, tags empty for none), for running
// m's tests (m.RunPattern) where no Go toolchain is: the binary must fail
// them. The sources are not touched. An error says that m does not apply
// or that the variant does not build.
func Build(m Mutant, tags, out string) error {
	if m.Arch != "" {
		return fmt.Errorf("mutant %q: Build makes binaries for this machine, not for %s", m.Name, m.Arch)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "mutant-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	overlay, err := m.overlay(root, tmp)
	if err != nil {
		return err
	}
	args := []string{"test", "-c", "-overlay", overlay, "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, m.Pkg)...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mutant %q: the variant of %s does not build: %w\n%s", m.Name, m.File, err, msg)
	}
	return nil
}

// Run runs each mutant's tests against its variant and fails t for a
// mutant that no test catches (the tests pass) or that does not apply
// (Old not found exactly once, the variant does not build); a skipped
// mutant that does not apply fails too.
func Run(t *testing.T, ms []Mutant) {
	if testing.Short() || os.Getenv(Env) != "1" {
		t.Skipf("mutant runs build the package once each: set %s=1 (and no -short)", Env)
	}
	dir, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			// A skipped mutant must still apply: where no machine of
			// the project's CI runs its tests, its text would go stale
			// unnoticed.
			overlay, err := m.overlay(dir, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if m.Skip != "" {
				t.Skip(m.Skip)
			}
			args := []string{"test", "-overlay", overlay, "-count=1", "-run", m.RunPattern()}
			var env []string
			switch m.Arch {
			case "":
			case "arm64":
				args = append(args, "-short")
				if runtime.GOARCH == "arm64" { // natively
					break
				}
				if _, err := exec.LookPath(qemuARM64); err != nil {
					t.Skipf("%s is not installed: no arm64 test runs here", qemuARM64)
				}
				args = append(args, "-exec", qemuARM64)
				env = append(os.Environ(), "GOARCH=arm64")
			default:
				t.Fatalf("no way to run tests for %s here", m.Arch)
			}
			cmd := exec.Command("go", append(args, m.Pkg)...)
			cmd.Dir, cmd.Env = dir, env
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
