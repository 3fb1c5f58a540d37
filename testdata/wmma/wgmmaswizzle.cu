// wgmmaswizzle.cu: holds the swizzled K-major wgmma operand layouts of
// package wmma (wmma.KMajorOffset, generated into fp8attn_swizzle.h) to the
// hardware. Hopper only (sm_90a):
//
//   nvcc -O2 -gencode arch=compute_90a,code=sm_90a wgmmaswizzle.cu -o wgs
//   ./wgs > dump_wgmma_swizzle_sm_90a.txt
//
// For each swizzle width W (32, 64, 128 bytes), one warpgroup places A
// (64 x W e4m3 codes, K-major) and B (stored N x K, 64 x W) in shared memory
// through the generated chunk tables, builds descriptors with the swizzle
// mode and stride byte offset 8*W, and accumulates W/32 wgmma.mma_async
// m64n64k32 steps over the whole swizzle row, advancing both descriptors'
// start address by 32 bytes a step, as a kernel iterating K does. It checks
// the product exactly against the host (random integers in [-4, 4]: every
// product and sum exact) through the hardware-verified accumulator layout,
// and exits 1 on any difference. A negative control then places the same
// operands linearly under the same swizzled descriptors: the program exits 1
// if that does NOT change the product (a check that cannot fail proves
// nothing).
//
// Output, in the format of fragdump.cu: "mma wgmma_m64n64k32_e4m3_swW TRIAL",
// "A ROW a0..a(W-1)" (64 lines), "B K b0..b63" (W lines), "C THREAD d0..d31"
// (128 lines); then "# control swW: N of 4096 wrong" lines.
#include <cuda_fp8.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../wmma/include/fp8attn_swizzle.h"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int M = 64, N = 64;

// The physical chunk of logical chunk c of row r (r < 8), read from the
// __constant__ tables directly: a generic pointer cannot address constant
// memory.
template <int W> __device__ int chunk(int r, int c) {
  if constexpr (W == 128) return FP8ATTN_SWIZZLE128_CHUNK[r][c];
  else if constexpr (W == 64) return FP8ATTN_SWIZZLE64_CHUNK[r][c];
  else return FP8ATTN_SWIZZLE32_CHUNK[r][c];
}
template <int W> __host__ __device__ constexpr unsigned long long swizzle_mode() {
  return W == 128 ? FP8ATTN_SWIZZLE128_MODE : W == 64 ? FP8ATTN_SWIZZLE64_MODE : FP8ATTN_SWIZZLE32_MODE;
}

// place is the byte offset of (row r, byte kb): the generated table, or,
// for the negative control, the plain linear offset.
template <int W> __device__ int place(int r, int kb, bool swizzled) {
  if (!swizzled) return r * W + kb;
  return r * W + 16 * chunk<W>(r % 8, kb / 16) + kb % 16;
}

template <int W> __device__ uint64_t desc(const void* smem) {
  uint64_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint64_t lbo = 16, sbo = 8 * W;  // LBO unused: K spans one swizzle row
  return ((a & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (swizzle_mode<W>() << 62);
}

// One m64n64k32 step; accumulate selects D += A*B (else D = A*B).
__device__ __forceinline__ void wgmma_step(float (&r)[32], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1;\n}\n"
      : "+f"(r[0]), "+f"(r[1]), "+f"(r[2]), "+f"(r[3]), "+f"(r[4]), "+f"(r[5]), "+f"(r[6]), "+f"(r[7]),
        "+f"(r[8]), "+f"(r[9]), "+f"(r[10]), "+f"(r[11]), "+f"(r[12]), "+f"(r[13]), "+f"(r[14]), "+f"(r[15]),
        "+f"(r[16]), "+f"(r[17]), "+f"(r[18]), "+f"(r[19]), "+f"(r[20]), "+f"(r[21]), "+f"(r[22]), "+f"(r[23]),
        "+f"(r[24]), "+f"(r[25]), "+f"(r[26]), "+f"(r[27]), "+f"(r[28]), "+f"(r[29]), "+f"(r[30]), "+f"(r[31])
      : "l"(da), "l"(db), "r"(accumulate));
}

// a: A row-major (M x W codes); bt: B transposed (N x W codes); d: 128 x 32;
// bad: set when the tiles are not 1024-byte aligned.
template <int W>
__global__ void __launch_bounds__(128) wgmma_swizzled(const uint8_t* a, const uint8_t* bt, float* d, int swizzled, int* bad) {
  __shared__ __align__(1024) uint8_t sa[M * W];
  __shared__ __align__(1024) uint8_t sb[N * W];
  if (threadIdx.x == 0 && ((static_cast<uint32_t>(__cvta_generic_to_shared(sa)) | static_cast<uint32_t>(__cvta_generic_to_shared(sb))) & 1023))
    *bad = 1;
  for (int i = threadIdx.x; i < M * W; i += 128) sa[place<W>(i / W, i % W, swizzled)] = a[i];
  for (int i = threadIdx.x; i < N * W; i += 128) sb[place<W>(i / W, i % W, swizzled)] = bt[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const uint64_t da = desc<W>(sa), db = desc<W>(sb);
  float r[32];
  for (int i = 0; i < 32; i++) r[i] = -1.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int j = 0; j < W / 32; j++) wgmma_step(r, da + 2 * j, db + 2 * j, j);  // +32 bytes: +2 in 16-byte units
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  for (int i = 0; i < 32; i++) d[threadIdx.x * 32 + i] = r[i];
}

static uint8_t e4m3(float x) { return __nv_fp8_e4m3(x).__x; }

// run returns the 128 x 32 accumulator registers of A*B (A is M x W, B is
// W x N), with the operands placed swizzled or linearly.
template <int W> static std::vector<float> run(const std::vector<float>& A, const std::vector<float>& B, bool swizzled) {
  std::vector<uint8_t> a(M * W), bt(N * W);
  for (int i = 0; i < M * W; i++) a[i] = e4m3(A[i]);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < W; k++) bt[n * W + k] = e4m3(B[k * N + n]);
  uint8_t *da, *db;
  float* dd;
  int* bad;
  CHECK(cudaMalloc(&da, M * W));
  CHECK(cudaMalloc(&db, N * W));
  CHECK(cudaMalloc(&dd, 128 * 32 * sizeof(float)));
  CHECK(cudaMalloc(&bad, sizeof(int)));
  CHECK(cudaMemset(bad, 0, sizeof(int)));
  CHECK(cudaMemcpy(da, a.data(), M * W, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, bt.data(), N * W, cudaMemcpyHostToDevice));
  wgmma_swizzled<W><<<1, 128>>>(da, db, dd, swizzled, bad);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> d(128 * 32);
  int hbad = 0;
  CHECK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&hbad, bad, sizeof(int), cudaMemcpyDeviceToHost));
  if (hbad) {
    fprintf(stderr, "sw%d: shared tiles not 1024-byte aligned\n", W);
    exit(1);
  }
  cudaFree(da); cudaFree(db); cudaFree(dd); cudaFree(bad);
  return d;
}

// wrong counts the accumulator registers that differ from A*B, placed by
// the wgmma m64n64 accumulator layout verified by wgmmadump.cu (wmma.WGMMAAcc:
// thread T = 32w + 4g + t, register i holds row 16w + g + 8((i/2)%2),
// column 8(i/4) + 2t + i%2).
template <int W> static int wrong(const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& d) {
  int n = 0;
  for (int T = 0; T < 128; T++)
    for (int i = 0; i < 32; i++) {
      const int w = T / 32, g = (T % 32) / 4, t = T % 4;
      const int r = 16 * w + g + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * t + i % 2;
      float want = 0;
      for (int k = 0; k < W; k++) want += A[r * W + k] * B[k * N + c];
      n += d[T * 32 + i] != want;
    }
  return n;
}

template <int W> static int trials(int count) {
  std::vector<float> A(M * W), B(W * N);
  int failures = 0;
  for (int trial = 0; trial < count; trial++) {
    for (auto& x : A) x = rand() % 9 - 4;
    for (auto& x : B) x = rand() % 9 - 4;
    std::vector<float> d = run<W>(A, B, true);
    if (int n = wrong<W>(A, B, d)) {
      fprintf(stderr, "sw%d trial %d: %d of 4096 elements differ from A*B\n", W, trial, n);
      failures++;
    }
    printf("mma wgmma_m64n64k32_e4m3_sw%d %d\n", W, trial);
    for (int r = 0; r < M; r++) {
      printf("A %d", r);
      for (int k = 0; k < W; k++) printf(" %g", A[r * W + k]);
      printf("\n");
    }
    for (int k = 0; k < W; k++) {
      printf("B %d", k);
      for (int n = 0; n < N; n++) printf(" %g", B[k * N + n]);
      printf("\n");
    }
    for (int t = 0; t < 128; t++) {
      printf("C %d", t);
      for (int i = 0; i < 32; i++) printf(" %g", d[t * 32 + i]);
      printf("\n");
    }
  }
  // Negative control: linear placement under the swizzled descriptors.
  const int n = wrong<W>(A, B, run<W>(A, B, false));
  printf("# control sw%d: %d of 4096 wrong with linear placement under the swizzled descriptor\n", W, n);
  if (n == 0) {
    fprintf(stderr, "sw%d: the control passed: the check cannot tell layouts apart\n", W);
    failures++;
  }
  return failures;
}

int main() {
  srand(1);
  int failures = trials<32>(2) + trials<64>(2) + trials<128>(2);
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("# device %s sm_%d%d\n", p.name, p.major, p.minor);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
