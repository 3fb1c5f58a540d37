package kernels

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/internal/tiles"
)

// sourceFiles are the files SourceHash covers, in gen.sh's order: every
// *.cu, *.cuh and *.h here in byte order of name, then the fragment and
// wgmma headers.
func sourceFiles(t *testing.T) []string {
	var files []string
	for _, pat := range []string{"*.cu", "*.cuh", "*.h"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	return append(files, "../../../wmma/include/fp8attn_fragments.h", "../../../wmma/include/fp8attn_wgmma.h")
}

// TestPTXFresh: the embedded PTX was built from the current sources, and has
// every kernel of the stage list in internal/tiles.
func TestPTXFresh(t *testing.T) {
	var src []byte
	for _, f := range sourceFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(src)); got != SourceHash {
		t.Fatalf("the kernel sources changed since the PTX was built (hash %s, PTX built from %s): run go generate ./backend/cuda/kernels on a machine with nvcc", got, SourceHash)
	}
	for _, st := range tiles.Stages {
		for _, d := range tiles.HeadDims {
			name := tiles.KernelName(st, d)
			for _, sym := range []string{".entry " + name + "(", name + "_config["} {
				if !strings.Contains(PTX, sym) {
					t.Errorf("PTX lacks %s", sym)
				}
			}
		}
	}
	if !strings.Contains(Resources, "sm_89") || !strings.Contains(Resources, "sm_90") {
		t.Error("resource report incomplete")
	}
}
