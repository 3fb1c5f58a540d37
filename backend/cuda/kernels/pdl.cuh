// pdl.cuh: programmatic dependent launch (PTX ISA griddepcontrol, sm_90 and
// newer). The host launches a kernel of the sm_90a modules with
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (backend/cuda:
// launchStruct), so that its blocks may be scheduled, and run up to
// pdl_wait, while the kernel before it in the stream is still running.
//
// The contract every entry point of those modules keeps:
//   - pdl_wait() runs in every thread before its first access to global
//     memory (a read of what the kernel before may write, or a write to what
//     it may still read), and before any return: griddepcontrol.wait blocks
//     until the grids this one depends on have completed and their memory
//     operations are visible. A grid whose blocks all passed it completes
//     only after those grids, so the ordering is transitive along a chain
//     of such launches. Shared-memory set-up (mbarrier initialisation,
//     setmaxnreg) may come before it, and so may reads of what only the
//     host writes, through copies in stream order (paged.cu's ws kernel
//     reads the call's sequence lengths and block table before it: a copy
//     is never overlapped by a programmatic launch, and no kernel writes
//     them).
//   - pdl_launch_dependents() in every thread, at the entry: the next
//     kernel's blocks may be scheduled once every block of this grid has
//     issued it or exited. They only occupy what this grid leaves free,
//     and wait in their own pdl_wait.
// One pair keeps another order: the head start's V pack
// (fp8attn_pack9vth) launches its dependents only past its own pdl_wait,
// so that when the attention after it (fp8attn_stage9th) starts, every
// kernel before the pack has completed. That attention reads the
// caller's Q, K and V, the scales and the sinks (none of which the pack
// writes) and may set the score-factor flag (which only the host clears)
// before its pdl_wait, and waits before the V image's first read, before
// its rows' stores and before any return (hopper::produce_tensors). The
// host launches the two only as a pair (launchTensors): after a pack that
// lets its dependents in at its entry, fp8attn_stage9th would race it.
// Without the launch attribute, and on an older architecture (the compute_80
// and compute_89 builds of paged.cu), both are no-ops.
// The mutant mutants/pdl-no-wait.sed builds the wait away: the tests must
// fail it.
#pragma once

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// pdl_entry is both, at a kernel's entry (the kernels with no shared-memory
// set-up worth overlapping).
__device__ __forceinline__ void pdl_entry() {
  pdl_launch_dependents();
  pdl_wait();
}
