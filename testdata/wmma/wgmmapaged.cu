// wgmmapaged.cu: holds to the hardware the two facts a stage-9 tile read
// straight from the paged FP8 cache rests on (docs/design/paged-decode.md,
// "One launch for an FP8 varlen step"). Hopper only (sm_90a), D 128:
//
//   nvcc -O2 -gencode arch=compute_90a,code=sm_90a wgmmapaged.cu -o wgp
//   ./wgp > dump_wgmma_paged_sm_90a.txt
//
// 1. K: a page's rows (backend/cuda's pagedKeyIndex layout: slot-major
//    rows of 128 bytes, 16-byte chunks XORed by a function of the slot),
//    each moved whole to row key_row(slot) (the order the decode kernel's
//    fragments read, within 16 keys 0,1,4,5,8,9,12,13, 2,3,...), are wgmma's
//    128-byte-swizzled K-major operand, and Q·Kᵀ then leaves, in the
//    accumulator registers a thread packs as one A register (elements 0,
//    1, 4, 5 of each 16 columns), keys 4t .. 4t+3 of the group in order.
// 2. V: the page's values (pagedValueIndex: per 32 slots, 128 rows of 32
//    bytes, the 16-byte halves swapped where bit 2 of the row is set),
//    read in place, are P·V's K-major B operand in the 32-byte swizzle.
//
// One warpgroup computes S = Q·Kᵀ (m64n64k32, A and B from shared memory),
// packs S into E4M3 A registers in the kernels' order (pack_weights), and
// runs O = P·V (m64n128k32, A from registers, two k32 steps: the page's
// two 32-slot groups). Operands are small integers, so every product and
// sum is exact: S is checked against Q·Kᵀ, O against S·V on the host.
// Negative controls (the program exits 1 if one of them does NOT change a
// result): K's rows moved in slot order, and the V page with its halves
// unswapped.
//
// Output: "# paged TRIAL: S wrong N of 4096, O wrong N of 8192" lines and
// the controls' counts.
//
// "./wgp rate" times P·V's wgmma instead (m64n128k32, A from registers,
// every SM's warpgroups issuing back to back) with B in the page's 32-byte
// swizzle and in the V image's 64-byte one, TFLOP/s, three rounds.
#include <cuda_fp8.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../wmma/include/fp8attn_wgmma.h"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int M = 64, KEYS = 64, D = 128;

// The cache's layout at D 128: copies of backend/cuda/kernels/paged/append.cuh's
// key_row, key_of_row, k_swizzle, v_off, k_index and v_index (that header
// also defines the append kernel, so it is not included here).
// key_row is the row key k takes within its 16 keys in the order the decode
// kernel's fragments read (0,1,4,5,8,9,12,13, 2,3,6,7,10,11,14,15), and
// key_of_row its inverse.
static int key_row(int k) { return (k & 16) + 8 * ((k >> 1) & 1) + 2 * ((k & 15) >> 2) + (k & 1); }
static int key_of_row(int r) { return (r & 16) | (r & 1) | (((r >> 3) & 1) << 1) | (((r >> 1) & 3) << 2); }
static int k_swizzle(int k, int nc) {
  const int s = (nc & -nc) < 8 ? (nc & -nc) : 8;
  return (key_row(k) & 7) * s >> 3;
}
static int v_off(int d, int c) { return d * 32 + 16 * (c ^ ((d >> 2) & 1)); }
static int k_index(int slot, int d) { return slot * D + 16 * ((d >> 4) ^ k_swizzle(slot & 31, D >> 4)) + (d & 15); }
static int v_index(int slot, int d) { return (slot >> 5) * D * 32 + v_off(d, (slot >> 4) & 1) + (slot & 15); }
// tile_row is the row of a tile in shared memory that key j of the page
// takes: key_row within each 32 keys (a whole number of 16-key groups).
static int tile_row(int j) { return (j & ~31) + key_row(j & 31); }
static int key_at(int r) { return (r & ~31) + key_of_row(r & 31); }

__device__ __forceinline__ uint64_t desc(uint32_t addr, int w) {  // K-major, swizzle of w-byte rows
  const uint64_t mode = w == 128 ? 1 : w == 64 ? 2 : 3;
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(8 * w >> 4) << 32) | (mode << 62);
}
__device__ __forceinline__ uint32_t pack4(float a, float b, float c, float d) {  // common.cuh's
  uint16_t lo, hi;
  uint32_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;\n" : "=h"(lo) : "f"(a), "f"(b));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;\n" : "=h"(hi) : "f"(c), "f"(d));
  asm("mov.b32 %0, {%1, %2};\n" : "=r"(r) : "h"(lo), "h"(hi));
  return r;
}

// q: Q as the 128-byte-swizzled K-major A operand (64 x 128); ktile: the K
// tile as placed in shared memory (64 x 128); vpage: the V page (8 KB);
// s: 128 x 32 accumulators of S; o: 128 x 64 of O.
__global__ void __launch_bounds__(128) chain(const uint8_t* q, const uint8_t* ktile, const uint8_t* vpage, float* s_out, float* o_out) {
  __shared__ __align__(1024) uint8_t sq[M * D];
  __shared__ __align__(1024) uint8_t sk[KEYS * D];
  __shared__ __align__(1024) uint8_t sv[KEYS * D];
  for (int i = threadIdx.x; i < M * D; i += 128) sq[i] = q[i], sk[i] = ktile[i], sv[i] = vpage[i];
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const uint32_t qa = (uint32_t)__cvta_generic_to_shared(sq), ka = (uint32_t)__cvta_generic_to_shared(sk),
                 va = (uint32_t)__cvta_generic_to_shared(sv);
  float s[KEYS / 2], o[D / 2];
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int kk = 0; kk < D / 32; kk++) WGMMA<KEYS>::ss(s, desc(qa + 32 * kk, 128), desc(ka + 32 * kk, 128), kk);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < KEYS / 2; i++) s_out[threadIdx.x * (KEYS / 2) + i] = s[i];
  uint32_t a[KEYS / 32][4];
  for (int k = 0; k < KEYS / 32; k++) {  // pack_weights (hopper/softmax.cuh)
    const int j = 16 * k;
    a[k][0] = pack4(s[j + 0], s[j + 1], s[j + 4], s[j + 5]);
    a[k][1] = pack4(s[j + 2], s[j + 3], s[j + 6], s[j + 7]);
    a[k][2] = pack4(s[j + 8], s[j + 9], s[j + 12], s[j + 13]);
    a[k][3] = pack4(s[j + 10], s[j + 11], s[j + 14], s[j + 15]);
  }
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int k = 0; k < KEYS / 32; k++) WGMMA<D>::rs(o, a[k], desc(va + k * D * 32, 32), k);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < D / 2; i++) o_out[threadIdx.x * (D / 2) + i] = o[i];
}

// rate: each warpgroup issues n m64n128k32 wgmmas, A from registers, B a
// 64-key tile in swizzle w (32: the page's two 32-slot groups, 4 KB apart;
// 64: the V image's rows of 64 keys), 16 a commit group.
__global__ void __launch_bounds__(128) rate(int w, int n, float* sink) {
  __shared__ __align__(1024) uint8_t sv[KEYS * D];
  for (int i = threadIdx.x; i < KEYS * D; i += 128) sv[i] = (uint8_t)(0x30 + (i * 7) % 16);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float acc[D / 2];
  for (int i = 0; i < D / 2; i++) acc[i] = 0.f;
  const uint32_t a[4] = {0x38383838u, 0x30383038u, 0x38303830u, 0x30303838u};
  const uint32_t vb = (uint32_t)__cvta_generic_to_shared(sv);
  const uint64_t d0 = desc(vb, w), d1 = w == 32 ? desc(vb + D * 32, 32) : desc(vb + 32, w);
  for (int it = 0; it < n; it += 16) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
      WGMMA<D>::rs(acc, a, d0, 1);
      WGMMA<D>::rs(acc, a, d1, 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  float t = 0;
  for (int i = 0; i < D / 2; i++) t += acc[i];
  if (t == 12345.f) sink[threadIdx.x] = t;
}

static int rates() {
  float* sink;
  CHECK(cudaMalloc(&sink, 128 * sizeof(float)));
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int n = 1 << 16;
  for (int round = 0; round < 3; round++)
    for (int w : {64, 32})
      for (int per : {1, 2, 4}) {
        rate<<<sms * per, 128>>>(w, 1024, sink);
        CHECK(cudaEventRecord(e0));
        rate<<<sms * per, 128>>>(w, n, sink);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        const double flops = 2.0 * M * D * 32 * (double)n * sms * per;
        printf("round %d swizzle %3d B, %d warpgroups an SM: %.1f TFLOP/s\n", round, w, per, flops / ms / 1e9);
      }
  return 0;
}

static uint8_t e4m3(float x) { return __nv_fp8_e4m3(x).__x; }
static int sw128(int r, int b) { return r * 128 + 16 * ((b >> 4) ^ (r & 7)) + (b & 15); }
// acc_place is the wgmma accumulator layout (wmma.WGMMAAcc, verified by
// wgmmadump.cu): thread T's register i holds (row, column).
static void acc_place(int T, int i, int& row, int& col) {
  const int w = T / 32, g = (T % 32) / 4, t = T % 4;
  row = 16 * w + g + 8 * ((i / 2) % 2);
  col = 8 * (i / 4) + 2 * t + i % 2;
}

struct Result {
  int s_wrong, o_wrong;
};

// run places the operands (K's rows in key_row order, or in slot order for the
// control; V's page as the cache holds it, or unswapped for the control),
// runs chain and counts the wrong elements of S (keys at their columns'
// places) and of O.
static Result run(const std::vector<int>& Q, const std::vector<int>& K, const std::vector<int>& V, bool k_rows, bool v_swapped) {
  std::vector<uint8_t> q(M * D), page_k(KEYS * D), ktile(KEYS * D), vpage(KEYS * D);
  for (int r = 0; r < M; r++)
    for (int d = 0; d < D; d++) q[sw128(r, d)] = e4m3(Q[r * D + d]);
  for (int j = 0; j < KEYS; j++)
    for (int d = 0; d < D; d++) {
      page_k[k_index(j, d)] = e4m3(K[j * D + d]);
      const int vi = v_swapped ? v_index(j, d) : (j >> 5) * D * 32 + d * 32 + (j & 31);
      vpage[vi] = e4m3(V[j * D + d]);
    }
  for (int j = 0; j < KEYS; j++) {  // each page row moved whole
    const int r = k_rows ? tile_row(j) : j;
    for (int b = 0; b < D; b++) ktile[r * D + b] = page_k[j * D + b];
  }
  uint8_t *dq, *dk, *dv;
  float *ds, *dout;
  CHECK(cudaMalloc(&dq, M * D));
  CHECK(cudaMalloc(&dk, KEYS * D));
  CHECK(cudaMalloc(&dv, KEYS * D));
  CHECK(cudaMalloc(&ds, 128 * (KEYS / 2) * sizeof(float)));
  CHECK(cudaMalloc(&dout, 128 * (D / 2) * sizeof(float)));
  CHECK(cudaMemcpy(dq, q.data(), M * D, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, ktile.data(), KEYS * D, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, vpage.data(), KEYS * D, cudaMemcpyHostToDevice));
  chain<<<1, 128>>>(dq, dk, dv, ds, dout);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> s(128 * (KEYS / 2)), o(128 * (D / 2));
  CHECK(cudaMemcpy(s.data(), ds, s.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(o.data(), dout, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(ds); cudaFree(dout);
  // S by key: column c of the accumulator holds key key_at(c).
  std::vector<int> S(M * KEYS);
  for (int r = 0; r < M; r++)
    for (int j = 0; j < KEYS; j++) {
      int x = 0;
      for (int d = 0; d < D; d++) x += Q[r * D + d] * K[j * D + d];
      S[r * KEYS + j] = x;
    }
  Result res{0, 0};
  for (int T = 0; T < 128; T++)
    for (int i = 0; i < KEYS / 2; i++) {
      int row, col;
      acc_place(T, i, row, col);
      res.s_wrong += s[T * (KEYS / 2) + i] != (float)S[row * KEYS + key_at(col)];
    }
  for (int T = 0; T < 128; T++)
    for (int i = 0; i < D / 2; i++) {
      int row, col;
      acc_place(T, i, row, col);
      int want = 0;
      for (int j = 0; j < KEYS; j++) want += S[row * KEYS + j] * V[j * D + col];
      res.o_wrong += o[T * (D / 2) + i] != (float)want;
    }
  return res;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "rate") return rates();
  srand(1);
  int failures = 0;
  std::vector<int> Q(M * D), K(KEYS * D), V(KEYS * D);
  for (int trial = 0; trial < 3; trial++) {
    // Q nonzero in its first four columns only, entries in [-1, 1]: every
    // score in [-4, 4], exact in E4M3, so that P is S itself.
    for (int r = 0; r < M; r++)
      for (int d = 0; d < D; d++) Q[r * D + d] = d < 4 ? rand() % 3 - 1 : 0;
    for (auto& x : K) x = rand() % 3 - 1;
    for (auto& x : V) x = rand() % 9 - 4;
    const Result r = run(Q, K, V, true, true);
    printf("# paged %d: S wrong %d of %d, O wrong %d of %d\n", trial, r.s_wrong, M * KEYS, r.o_wrong, M * D);
    if (r.s_wrong || r.o_wrong) failures++;
  }
  const Result ck = run(Q, K, V, false, true), cv = run(Q, K, V, true, false);
  printf("# control: K's rows in slot order: S wrong %d, O wrong %d\n", ck.s_wrong, ck.o_wrong);
  printf("# control: V's halves unswapped: S wrong %d, O wrong %d\n", cv.s_wrong, cv.o_wrong);
  if (ck.s_wrong == 0) {
    fprintf(stderr, "control: K in slot order passed: the check cannot tell the orders apart\n");
    failures++;
  }
  if (cv.o_wrong == 0) {
    fprintf(stderr, "control: an unswapped V page passed: the check cannot tell the layouts apart\n");
    failures++;
  }
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("# device %s sm_%d%d\n", p.name, p.major, p.minor);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
