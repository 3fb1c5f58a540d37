// hopper/wgmma.cuh: the warpgroup primitives: wgmma ordering and fences,
// shared-memory descriptors and the swizzle, turns on named barriers, the
// main loop's profile event. Included by hopper.cuh only, inside namespace
// hopper, in its order.
#pragma once

// loop_stamp is the tiled kernel's main-loop event (profile.cuh, kernel
// PROFILE_LOOP, SM cycles): lane 0 of each consumer warpgroup's first warp
// records step `slot` of each of its first 64 tiles t in row 64·wg + t: 0
// the step begins, 1 the previous P·V waited for, 2 folded (before its
// turn), 3 its turn, 4 Q·K(t)ᵀ and P(t-1)·V(t-1) issued, 5 Q·K(t)ᵀ waited
// for, 6 the softmax done, 7 P packed (and the later column parts issued).
// Warpgroup index 2 is the producer: 0 before its wait for tile t's ring
// slot, 1 tile t's copies issued. backend/cuda's TestStage9LoopTimeline
// reads them.
__device__ __forceinline__ void loop_stamp(bool cond, int wg, int t, int slot) {
  PROFILE_CYCLES(cond && t < 64, PROFILE_LOOP, 64 * wg + t, slot);
}

// Part<P> names a column part of P·V at compile time.
template <int P> struct Part {
  static constexpr int value = P;
};

// Turns<ON, B> is two consumer warpgroups taking turns on named barriers B
// (warpgroup 0's) and B + 1 (warpgroup 1's), 256 threads each: take waits
// for warpgroup cw's turn, pass hands the turn to the other. Nothing when
// !ON.
template <bool ON, int B> struct Turns {
  int cw;
  __device__ __forceinline__ void take() const {
    if constexpr (ON) asm volatile("bar.sync %0, 256;\n" ::"r"(B + cw) : "memory");
  }
  __device__ __forceinline__ void pass() const {
    if constexpr (ON) asm volatile("bar.arrive %0, 256;\n" ::"r"(B + 1 - cw) : "memory");
  }
};

// wgmma ordering.
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wg_wait waits until at most N committed wgmma groups are pending.
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// fence_regs keeps the compiler from moving accesses of accumulator
// registers across the asynchronous wgmma that owns them.
template <int R> __device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R, int C> __device__ __forceinline__ void fence_regs(uint32_t (&d)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; i++)
#pragma unroll
    for (int j = 0; j < C; j++) asm volatile("" : "+r"(d[i][j])::"memory");
}

// desc is the wgmma shared-memory descriptor of a K-major operand whose
// rows are W bytes, swizzled (W = 32, 64 or 128; the tile base aligned to
// 1024 bytes): stride byte offset 8·W between 8-row groups, leading byte
// offset unused (one k32 step stays inside a swizzle row).
// wmma.WGMMADescriptor encodes the same, and testdata/wmma/wgmmaswizzle.cu
// verified it. (W = 32: the paged cache's V blocks, hopper/paged.cuh.)
template <int W> __device__ __forceinline__ uint64_t desc(uint32_t addr) {
  static_assert(W == 32 || W == 64 || W == 128, "swizzle width");
  constexpr uint64_t mode = W == 128 ? 1 : W == 64 ? 2 : 3;
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(8 * W >> 4) << 32) | (mode << 62);
}

// swizzle is wmma.KMajorOffset for an offset o inside a tile of W-byte
// rows: the 16-byte chunk XORed with address bits 7 and up. It is its own
// inverse.
template <int W> __host__ __device__ __forceinline__ int swizzle(int o) { return o ^ (((o >> 7) & (W / 16 - 1)) << 4); }
