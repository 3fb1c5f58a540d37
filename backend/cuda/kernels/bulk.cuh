// bulk.cuh: mbarriers, the 1-D bulk copy (cp.async.bulk, the
// tensor-memory accelerator without a tensor map) and the tensor copy of a
// tensor map's box (cp.async.bulk.tensor), PTX ISA 8.0, sm_90 and newer.
// Shared by the Hopper module (hopper.cuh) and the paged cache's
// warp-specialized decode kernel (paged.cu, built for sm_90a); unused
// inline functions emit nothing, so including it in an older build is
// harmless.
#pragma once
#include <stdint.h>

namespace hopper {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// cluster_map is the shared::cluster address of p's shared-memory location
// in block rank of this thread block's cluster (mapa).
__device__ __forceinline__ uint32_t cluster_map(const void* p, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
  return r;
}

// mbarrier and bulk-copy primitives (PTX ISA: mbarrier, cp.async.bulk), on
// 32-bit shared-memory addresses (the _at forms: a warp whose regions are
// constant offsets from one base keeps one register for them, as the
// tensor form's producer must in the 24 registers setmaxnreg leaves it)
// and on pointers.
__device__ __forceinline__ void mbar_expect_tx_at(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive_at(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait_at(uint32_t bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load_at(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src),
               "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void mbar_init_at(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) { mbar_init_at(smem_u32(bar), count); }
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) { mbar_expect_tx_at(smem_u32(bar), bytes); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { mbar_arrive_at(smem_u32(bar)); }
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) { mbar_wait_at(smem_u32(bar), parity); }
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  bulk_load_at(smem_u32(dst), src, bytes, smem_u32(bar));
}

// bulk_copy_peer copies bytes of this block's shared memory at src into
// block rank of its cluster, at the address dst has in this block, and
// completes them on that block's mbarrier at bar's address (cp.async.bulk
// from shared::cta to shared::cluster: the async proxy end to end, as a
// bulk load is; src written by threads must have been fenced with
// fence.proxy.async.shared::cta before).
__device__ __forceinline__ void bulk_copy_peer(void* dst, const void* src, uint32_t bytes, uint64_t* bar, int rank) {
  const uint32_t rdst = cluster_map(dst, rank), rbar = cluster_map(bar, rank);
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(rdst),
               "r"(smem_u32(src)), "r"(bytes), "r"(rbar)
               : "memory");
}

// bulk_load_hinted is bulk_load with an L2 cache policy (createpolicy's
// 64-bit handle, for example evict_first_policy's).
__device__ __forceinline__ void bulk_load_hinted(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                 uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}

// tensor_load_4d_at copies the box at coordinates (c0, c1, c2, c3) of the
// tensor map at tmap (a CUtensorMap in parameter, constant or global
// memory, by its generic address) into shared memory at dst, completing
// its bytes on bar (cp.async.bulk.tensor, PTX ISA 8.0). The map's swizzle
// mode lays the box out; elements outside the tensor arrive as zeros, and
// the transaction counts the whole box.
__device__ __forceinline__ void tensor_load_4d_at(uint32_t dst, const void* tmap, int c0, int c1, int c2, int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// tensor_load_5d_at is tensor_load_4d_at for a map of five dimensions.
__device__ __forceinline__ void tensor_load_5d_at(uint32_t dst, const void* tmap, int c0, int c1, int c2, int c3, int c4, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}

// fence_async_shared orders this thread's shared-memory writes before
// later reads by the async proxy (wgmma, bulk copies out).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// evict_first_policy: an L2 policy under which the lines a copy brings in
// are the first to go (data read once, streamed past the cache).
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

}  // namespace hopper
