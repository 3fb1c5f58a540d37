package kernels

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPTXFresh: the embedded PTX was built from the current sources.
func TestPTXFresh(t *testing.T) {
	var src []byte
	for _, f := range []string{"attention.cu", "../../../wmma/include/fp8attn_fragments.h"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(src)); got != SourceHash {
		t.Fatalf("attention.cu or the fragment header changed since the PTX was built (hash %s, PTX built from %s): run go generate ./backend/cuda/kernels on a machine with nvcc", got, SourceHash)
	}
	for _, stage := range []string{"1", "2", "3", "4", "5", "6", "7"} {
		for _, d := range []string{"64", "128"} {
			name := "fp8attn_stage" + stage + "_d" + d
			if !strings.Contains(PTX, ".entry "+name+"(") {
				t.Errorf("PTX lacks %s", name)
			}
		}
	}
	if !strings.Contains(Resources, "sm_89") || !strings.Contains(Resources, "sm_90") {
		t.Error("resource report incomplete")
	}
}
