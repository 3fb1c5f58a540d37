package ntcopy

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestCopyCatchesMutants: the streamed copy's blocks, head and tail,
// broken on purpose, fail TestCopy (FP8ATTN_MUTANTS=1).
func TestCopyCatchesMutants(t *testing.T) {
	const pkg, file, asm = "./internal/ntcopy", "internal/ntcopy/ntcopy.go", "internal/ntcopy/ntcopy_amd64.s"
	tests := []string{"TestCopy"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "the tail starts a block late", File: file, Pkg: pkg, Tests: tests,
			Old: "tail := head + blocks*64", New: "tail := head + blocks*64 + 64"},
		{Name: "the stream starts 8-byte aligned", File: file, Pkg: pkg, Tests: tests,
			Old: "head := int(-uintptr(unsafe.Pointer(&dst[0])) & 63)", New: "head := int(-uintptr(unsafe.Pointer(&dst[0])) & 7)"},
		{Name: "the stream's second quarter of a block left out", File: asm, Pkg: pkg, Tests: tests,
			Old: "\tMOVNTO X1, 16(DI)\n", New: ""},
		{Name: "the stream's blocks advance the source too little", File: asm, Pkg: pkg, Tests: tests,
			Old: "\tADDQ   $64, SI\n", New: "\tADDQ   $48, SI\n"},
	})
}
