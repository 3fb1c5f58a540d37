// Package kernels holds the CUDA sources of the attention kernel stages and
// the PTX built from them (by gen.sh, with nvcc, on a GPU machine), embedded
// so that `go build -tags cuda` needs no CUDA toolkit. The package has no
// cgo and builds everywhere; TestPTXFresh fails when the sources changed
// without the PTX being rebuilt.
package kernels

//go:generate ./gen.sh

import _ "embed"

// PTX is attention_compute_89.ptx: stages 1-4 for compute capability 8.9 and
// newer (the driver JIT-compiles it for the GPU at hand).
//
//go:embed attention_compute_89.ptx
var PTX string

// Resources is the ptxas report (registers, shared memory, spills) of every
// kernel for sm_89 and sm_90.
//
//go:embed resources.txt
var Resources string
