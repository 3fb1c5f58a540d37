//go:build cuda && !kerneldev

package cuda

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNoOverrides: a production build loads the embedded module whatever
// the environment names, and launches with PDL even when told
// FP8ATTN_PDL=0. (Run on a -tags cuda,kerneldev build, the same checks
// fail: overrides_kerneldev_test.go is their counterpart there.)
func TestNoOverrides(t *testing.T) {
	f := filepath.Join(t.TempDir(), "module.ptx")
	if err := os.WriteFile(f, []byte("from the file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"FP8ATTN_PTX", "FP8ATTN_PTX80", "FP8ATTN_CUBIN", "FP8ATTN_PAGED_PTX", "FP8ATTN_PAGED_PTX80", "FP8ATTN_PAGED_CUBIN",
		"FP8ATTN_TEST_PTX", "FP8ATTN_TEST_CUBIN"} {
		t.Setenv(env, f)
		if got, err := moduleImage(env, "embedded"); err != nil || got != "embedded" {
			t.Errorf("%s set: moduleImage = %q, %v; want the embedded module", env, got, err)
		}
	}
	t.Setenv("FP8ATTN_PDL", "0")
	if !pdlDefault() {
		t.Error("FP8ATTN_PDL=0 turned PDL off in a production build")
	}
}
