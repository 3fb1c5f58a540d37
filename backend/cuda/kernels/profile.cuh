// profile.cuh: the kernels' timelines, built only with -DFP8ATTN_PROFILE (a
// diagnostic module, never embedded; docs/DEVELOPING.md). Without it every
// macro here is an empty statement and the kernels are the production ones.
//
// One event format: a 32-bit word in the module's table fp8attn_profile,
// addressed by (kernel, block, row, slot):
//   fp8attn_profile[((kernel·PROFILE_BLOCKS + block)·PROFILE_ROWS + row)·PROFILE_SLOTS + slot]
// with block the linear block index (events of blocks past PROFILE_BLOCKS
// are dropped) and the geometry exported as fp8attn_profile_layout =
// {PROFILE_KERNELS, PROFILE_BLOCKS, PROFILE_ROWS, PROFILE_SLOTS}. A word
// holds the low 32 bits of %globaltimer (ns: PROFILE_TIME), of the SM's
// %clock (cycles: PROFILE_CYCLES), or a value (PROFILE_VALUE: the SM,
// a flag). The last launch overwrites earlier ones. internal/profile
// decodes the table; what each (kernel, row, slot) means is the kernel's:
//   attention_sm90a.cu: kernel PROFILE_QUANT (quant_pack9, the quantizing
//     one-tile form's quantization) and PROFILE_ATTENTION (the fused
//     attention), row 0, slot 7 the SM; PROFILE_LOOP (the tiled kernel's
//     main loop, SM cycles), row 64·warpgroup + tile (warpgroup 2: the
//     producer), slots 0-7 (hopper.cuh, loop_stamp).
//   paged.cu: kernel 0 (the warp-specialized decode kernel), row 0, slots
//     0-20 (paged.cu, the comment above paged_ws).
#pragma once

#ifdef FP8ATTN_PROFILE
constexpr int PROFILE_QUANT = 0, PROFILE_ATTENTION = 1, PROFILE_LOOP = 2;
constexpr int PROFILE_KERNELS = 3, PROFILE_BLOCKS = 1024, PROFILE_ROWS = 192, PROFILE_SLOTS = 24;
extern "C" {
__device__ unsigned fp8attn_profile[PROFILE_KERNELS * PROFILE_BLOCKS * PROFILE_ROWS * PROFILE_SLOTS];
__device__ const int fp8attn_profile_layout[4] = {PROFILE_KERNELS, PROFILE_BLOCKS, PROFILE_ROWS, PROFILE_SLOTS};
}
namespace profile {
// now is %globaltimer's low 32 bits (ns).
__device__ __forceinline__ unsigned now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t)::"memory");
  return (unsigned)t;
}
// cycles is the SM's %clock.
__device__ __forceinline__ unsigned cycles() {
  unsigned c;
  asm volatile("mov.u32 %0, %%clock;\n" : "=r"(c)::"memory");
  return c;
}
__device__ __forceinline__ unsigned sm() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
  return s;
}
// put stores v as this block's event (kernel, row, slot).
__device__ __forceinline__ void put(int kernel, int row, int slot, unsigned v) {
  const unsigned blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (blk < PROFILE_BLOCKS && row < PROFILE_ROWS)
    fp8attn_profile[((kernel * PROFILE_BLOCKS + blk) * PROFILE_ROWS + row) * PROFILE_SLOTS + slot] = v;
}
}  // namespace profile
#define PROFILE_TIME(cond, kernel, row, slot)                    \
  do {                                                           \
    if (cond) profile::put(kernel, row, slot, profile::now());   \
  } while (0)
#define PROFILE_CYCLES(cond, kernel, row, slot)                  \
  do {                                                           \
    if (cond) profile::put(kernel, row, slot, profile::cycles()); \
  } while (0)
#define PROFILE_VALUE(cond, kernel, row, slot, v)  \
  do {                                             \
    if (cond) profile::put(kernel, row, slot, v);  \
  } while (0)
// PROFILE_CLOCK keeps the time now in var (a register), for an event taken
// before pdl_wait and stored (PROFILE_VALUE) after it, so that no global
// store comes before the set-up's memory barrier.
#define PROFILE_CLOCK(var) var = profile::now()
// PROFILE_ONLY(...) is code that exists only in a profile build (fences that
// keep the events in place, a barrier that makes one meaningful).
#define PROFILE_ONLY(...) __VA_ARGS__
#else
#define PROFILE_TIME(cond, kernel, row, slot) \
  do {                                        \
  } while (0)
#define PROFILE_CYCLES(cond, kernel, row, slot) \
  do {                                          \
  } while (0)
#define PROFILE_VALUE(cond, kernel, row, slot, v) \
  do {                                            \
  } while (0)
#define PROFILE_CLOCK(var) \
  do {                     \
  } while (0)
#define PROFILE_ONLY(...)
#endif
