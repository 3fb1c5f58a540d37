// Package kernels holds the CUDA sources of the attention kernel stages and
// the PTX built from them (by gen.sh, with nvcc, on a GPU machine), embedded
// so that `go build -tags cuda` needs no CUDA toolkit. The package has no
// cgo and builds everywhere; TestPTXFresh fails when the sources changed
// without the PTX being rebuilt.
//
// Sources: attention.cu (the entry points) includes common.cuh (what every
// kernel shares), the ladder of stages 1-8 (ladder/: a frozen, validated
// progression, docs/design/ladder.md) and tiles.h, the geometry generated
// from internal/tiles; ada.cuh (the sm89 kernel, stage 10) is part of
// attention.cu's module too. attention_sm90a.cu is the Hopper module
// (hopper/), built for sm_90a; paged.cu the paged KV cache's (paged/).
// profile.cuh holds the one profiling flag's events (FP8ATTN_PROFILE);
// mutants/ the deliberately broken builds scripts/gpu-mutants.sh runs.
// testkernels.cu and testkernels_sm90a.cu are the test modules: kernels
// only backend/cuda's tests launch, built beside the others
// (testkernels_compute_80.ptx, testkernels_sm_90a.cubin) but embedded by
// the tests alone.
package kernels

//go:generate ./gen.sh

import _ "embed"

// PTX is attention_compute_89.ptx: every stage for compute capability 8.9
// and newer (the driver JIT-compiles it for the GPU at hand).
//
//go:embed attention_compute_89.ptx
var PTX string

// PTX80 is attention_compute_80.ptx: stages 1-6 (those that decode FP8 to
// f16 before the MMA) for Ampere GPUs (compute capability 8.0-8.8), which
// have no FP8 tensor cores.
//
//go:embed attention_compute_80.ptx
var PTX80 string

// Resources is the ptxas report (registers, shared memory, spills) of every
// kernel for sm_89 and sm_90.
//
//go:embed resources.txt
var Resources string

// PagedPTX is paged_compute_89.ptx: the paged FP8 KV cache's kernels
// (append, split-KV attention, merge) for compute capability 8.9 and newer.
//
//go:embed paged_compute_89.ptx
var PagedPTX string

// PagedCubin is paged_sm_90a.cubin: the paged cache's kernels as sm_90a
// machine code, with the warp-specialized attention kernel (bulk copies,
// mbarriers), loaded on compute capability 9.0.
//
//go:embed paged_sm_90a.cubin
var PagedCubin []byte

// PagedPTX80 is paged_compute_80.ptx: the paged cache's kernels for Ampere.
//
//go:embed paged_compute_80.ptx
var PagedPTX80 string

// HopperCubin is attention_sm_90a.cubin: the Hopper module (stage 9 and its
// pack kernels) as sm_90a machine code, loaded on compute capability 9.0.
//
//go:embed attention_sm_90a.cubin
var HopperCubin []byte

// HopperPTX is the same module as compute_90a PTX, for a driver that
// cannot load the cubin.
//
//go:embed attention_compute_90a.ptx
var HopperPTX string
