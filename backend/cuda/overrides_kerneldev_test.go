//go:build cuda && kerneldev

package cuda

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOverrides: a kernel development build loads the module file the
// environment names (the embedded one when it names none), fails on a
// missing file, and turns PDL off for FP8ATTN_PDL=0.
func TestOverrides(t *testing.T) {
	f := filepath.Join(t.TempDir(), "module.ptx")
	if err := os.WriteFile(f, []byte("from the file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"FP8ATTN_PTX", "FP8ATTN_PTX80", "FP8ATTN_CUBIN", "FP8ATTN_PAGED_PTX", "FP8ATTN_PAGED_PTX80", "FP8ATTN_PAGED_CUBIN",
		"FP8ATTN_TEST_PTX", "FP8ATTN_TEST_CUBIN"} {
		t.Setenv(env, "")
		if got, err := moduleImage(env, "embedded"); err != nil || got != "embedded" {
			t.Errorf("%s empty: moduleImage = %q, %v; want the embedded module", env, got, err)
		}
		t.Setenv(env, f)
		if got, err := moduleImage(env, "embedded"); err != nil || got != "from the file" {
			t.Errorf("%s set: moduleImage = %q, %v; want the file's", env, got, err)
		}
		t.Setenv(env, f+".missing")
		if _, err := moduleImage(env, "embedded"); err == nil {
			t.Errorf("%s naming a missing file: no error", env)
		}
	}
	t.Setenv("FP8ATTN_PDL", "0")
	if pdlDefault() {
		t.Error("FP8ATTN_PDL=0 left PDL on")
	}
	t.Setenv("FP8ATTN_PDL", "")
	if !pdlDefault() {
		t.Error("PDL off without FP8ATTN_PDL=0")
	}
}
