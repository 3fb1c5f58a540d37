package mutant

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// probe breaks the constant TestAnswer of testdata/probe holds.
var probe = Mutant{
	Name: "another answer", File: "internal/mutant/testdata/probe/probe.go",
	Old: "const Answer = 42", New: "const Answer = 41",
	Pkg: "./internal/mutant/testdata/probe", Tests: []string{"TestAnswer"},
}

// TestCheck: Check accepts a mutant whose text occurs once (All: at least
// once) and refuses one whose text is absent or occurs more than once
// without All, or whose file is not there.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		old     string
		file    string
		all     bool
		applies bool
	}{
		{"once", probe.Old, probe.File, false, true},
		{"absent", "const Answer = 43", probe.File, false, false},
		{"twice", "Answer", probe.File, false, false},
		{"twice, all", "Answer", probe.File, true, true},
		{"absent, all", "const Answer = 43", probe.File, true, false},
		{"no file", probe.Old, "internal/mutant/testdata/probe/absent.go", false, false},
	} {
		m := probe
		m.Old, m.File, m.All = c.old, c.file, c.all
		if err := Check(m); (err == nil) != c.applies {
			t.Errorf("%s: Check: %v, want applies=%v", c.name, err, c.applies)
		}
	}
	if got, want := probe.RunPattern(), "^TestAnswer$"; got != want {
		t.Errorf("RunPattern: %q, want %q", got, want)
	}
}

// TestBuild: the binary Build writes runs the variant (the probe's test
// fails), a variant that changes nothing passes (the control), and a
// variant that does not compile or does not apply, or one for another
// architecture, is an error.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary three times")
	}
	dir := t.TempDir()
	control := probe
	control.New = control.Old
	for _, c := range []struct {
		m    Mutant
		pass bool
	}{{probe, false}, {control, true}} {
		bin := filepath.Join(dir, c.m.Name+".test")
		if err := Build(c.m, "", bin); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-test.run", c.m.RunPattern(), "-test.v").CombinedOutput()
		if (err == nil) != c.pass || !c.pass && !strings.Contains(string(out), "--- FAIL: TestAnswer") {
			t.Errorf("%q %q: the binary exited with %v, want pass=%v:\n%s", c.m.Old, c.m.New, err, c.pass, out)
		}
	}
	for _, m := range []Mutant{
		{Name: "no compile", File: probe.File, Old: probe.Old, New: "const Answer =", Pkg: probe.Pkg},
		{Name: "absent", File: probe.File, Old: "const Answer = 43", New: probe.New, Pkg: probe.Pkg},
		{Name: "for arm64", File: probe.File, Old: probe.Old, New: probe.New, Pkg: probe.Pkg, Arch: "arm64"},
	} {
		if err := Build(m, "", filepath.Join(dir, "bad.test")); err == nil {
			t.Errorf("Build of %q: no error", m.Name)
		}
	}
}

// TestRunChecksSkipped: Run fails a skipped mutant whose text does not
// apply (so that a mutant skipped on every machine CI runs on cannot go
// stale there unnoticed) and skips one that applies. Each case runs Run in
// a child process of this test binary, whose exit status says whether it
// failed.
func TestRunChecksSkipped(t *testing.T) {
	const probeEnv = "FP8ATTN_MUTANT_SKIP_PROBE"
	if c := os.Getenv(probeEnv); c != "" {
		m := probe
		m.Skip = "a probe"
		if c == "absent" {
			m.Old = "const Answer = 43"
		}
		Run(t, []Mutant{m})
		return
	}
	if testing.Short() {
		t.Skip("runs this test binary again (not under an emulator's -exec)")
	}
	for _, c := range []struct {
		name  string
		fails bool
	}{{"applies", false}, {"absent", true}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRunChecksSkipped$", "-test.v")
		cmd.Env = append(os.Environ(), probeEnv+"="+c.name, Env+"=1")
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.fails {
			t.Errorf("a skipped mutant that %s: Run exited with %v, want failed=%v:\n%s", c.name, err, c.fails, out)
		}
		if !c.fails && !strings.Contains(string(out), "--- SKIP") {
			t.Errorf("a skipped mutant that applies: not skipped:\n%s", out)
		}
	}
}

// TestRunCatchesMutants: Run with its check after the skip, as it once
// was, fails TestRunChecksSkipped (FP8ATTN_MUTANTS=1).
func TestRunCatchesMutants(t *testing.T) {
	Run(t, []Mutant{{Name: "a skipped mutant not checked", File: "internal/mutant/mutant.go", Pkg: "./internal/mutant",
		Old:   "\t\t\toverlay, err := m.overlay(dir, t.TempDir())\n\t\t\tif err != nil {\n\t\t\t\tt.Fatal(err)\n\t\t\t}\n\t\t\tif m.Skip != \"\" {\n\t\t\t\tt.Skip(m.Skip)\n\t\t\t}\n",
		New:   "\t\t\tif m.Skip != \"\" {\n\t\t\t\tt.Skip(m.Skip)\n\t\t\t}\n\t\t\toverlay, err := m.overlay(dir, t.TempDir())\n\t\t\tif err != nil {\n\t\t\t\tt.Fatal(err)\n\t\t\t}\n",
		Tests: []string{"TestRunChecksSkipped"}}})
}
