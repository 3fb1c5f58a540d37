// wgmmars.cu: holds the register layout of wgmma's A operand for e4m3
// (wmma.WGMMAE4M3A, m64nNk32, A from registers) to the hardware. Hopper only
// (sm_90a):
//
//   nvcc -O2 -gencode arch=compute_90a,code=sm_90a wgmmars.cu -o wgr
//   ./wgr > dump_wgmma_rs_sm_90a.txt
//
// Each of the 128 threads of one warpgroup fills its four A registers with
// random E4M3 codes of small integers (no layout assumed), B (32 x 64) is
// placed in shared memory K-major with the 32-byte swizzle that
// wgmmaswizzle.cu verified, and one wgmma.mma_async.m64n64k32 with A from
// registers runs. The dump prints every thread's 16 A values (register j,
// byte k is element 4j + k), B as a 32 x 64 matrix and the accumulators;
// TestHardwareWGMMARS places A by the Go model and recomputes the product.
// The program also checks itself against the model (the same formula as
// wmma.WGMMAE4M3A) and exits 1 on any difference, and on a negative control
// (the model with registers 1 and 2 exchanged) that does NOT fail.
#include <cuda_fp8.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../wmma/include/fp8attn_swizzle.h"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int K = 32, N = 64;

__global__ void __launch_bounds__(128) wgmma_rs(const uint32_t* a, const uint8_t* bt, float* d) {
  __shared__ __align__(1024) uint8_t sb[N * K];
  for (int i = threadIdx.x; i < N * K; i += 128) {
    const int n = i / K, kb = i % K;
    sb[n * K + 16 * FP8ATTN_SWIZZLE32_CHUNK[n % 8][kb / 16] + kb % 16] = bt[i];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const uint64_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  const uint64_t db = ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(8 * K >> 4) << 32) | (FP8ATTN_SWIZZLE32_MODE << 62);
  uint32_t r0 = a[4 * threadIdx.x], r1 = a[4 * threadIdx.x + 1], r2 = a[4 * threadIdx.x + 2], r3 = a[4 * threadIdx.x + 3];
  float c[32];
  for (int i = 0; i < 32; i++) c[i] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  const int accumulate = 1;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]),
        "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]),
        "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]),
        "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31])
      : "r"(r0), "r"(r1), "r"(r2), "r"(r3), "l"(db), "r"(accumulate));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  for (int i = 0; i < 32; i++) d[threadIdx.x * 32 + i] = c[i];
}

// The model (wmma.WGMMAE4M3A): element e (register e/4, byte e%4) of
// thread T = 32w + 4g + t is A[16w + g + 8((e/4)%2)][4t + e%4 + 16(e/8)].
// swap exchanges registers 1 and 2 (the negative control).
static void model(int T, int e, bool swap, int* r, int* k) {
  int j = e / 4;
  if (swap && (j == 1 || j == 2)) j = 3 - j;
  const int w = T / 32, g = (T % 32) / 4, t = T % 4;
  *r = 16 * w + g + 8 * (j % 2);
  *k = 4 * t + e % 4 + 16 * (j / 2);
}

static int wrong(const std::vector<float>& av, const std::vector<float>& B, const std::vector<float>& d, bool swap) {
  std::vector<float> A(64 * K, 0.f);
  for (int T = 0; T < 128; T++)
    for (int e = 0; e < 16; e++) {
      int r, k;
      model(T, e, swap, &r, &k);
      A[r * K + k] = av[T * 16 + e];
    }
  int n = 0;
  for (int T = 0; T < 128; T++)
    for (int i = 0; i < 32; i++) {
      const int w = T / 32, g = (T % 32) / 4, t = T % 4;
      const int r = 16 * w + g + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * t + i % 2;
      float want = 0;
      for (int k = 0; k < K; k++) want += A[r * K + k] * B[k * N + c];
      n += d[T * 32 + i] != want;
    }
  return n;
}

int main() {
  srand(3);
  int failures = 0;
  for (int trial = 0; trial < 3; trial++) {
    std::vector<float> av(128 * 16), B(K * N);
    std::vector<uint32_t> a(128 * 4, 0);
    std::vector<uint8_t> bt(N * K);
    for (int i = 0; i < 128 * 16; i++) {
      av[i] = rand() % 9 - 4;
      a[i / 4] |= (uint32_t)__nv_fp8_e4m3(av[i]).__x << (8 * (i % 4));
    }
    for (int k = 0; k < K; k++)
      for (int n = 0; n < N; n++) {
        B[k * N + n] = rand() % 9 - 4;
        bt[n * K + k] = __nv_fp8_e4m3(B[k * N + n]).__x;
      }
    uint32_t* da;
    uint8_t* db;
    float* dd;
    CHECK(cudaMalloc(&da, a.size() * 4));
    CHECK(cudaMalloc(&db, bt.size()));
    CHECK(cudaMalloc(&dd, 128 * 32 * 4));
    CHECK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, bt.data(), bt.size(), cudaMemcpyHostToDevice));
    wgmma_rs<<<1, 128>>>(da, db, dd);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> d(128 * 32);
    CHECK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(da); cudaFree(db); cudaFree(dd);
    if (int n = wrong(av, B, d, false)) {
      fprintf(stderr, "trial %d: %d of 4096 elements differ from the model's product\n", trial, n);
      failures++;
    }
    const int control = wrong(av, B, d, true);
    printf("# control %d: %d of 4096 wrong with registers 1 and 2 exchanged\n", trial, control);
    if (control == 0) {
      fprintf(stderr, "trial %d: the control passed: the check cannot tell layouts apart\n", trial);
      failures++;
    }
    printf("mma wgmma_m64n64k32_e4m3_rs %d\n", trial);
    for (int T = 0; T < 128; T++) {
      printf("A %d", T);
      for (int e = 0; e < 16; e++) printf(" %g", av[T * 16 + e]);
      printf("\n");
    }
    for (int k = 0; k < K; k++) {
      printf("B %d", k);
      for (int n = 0; n < N; n++) printf(" %g", B[k * N + n]);
      printf("\n");
    }
    for (int T = 0; T < 128; T++) {
      printf("C %d", T);
      for (int i = 0; i < 32; i++) printf(" %g", d[T * 32 + i]);
      printf("\n");
    }
  }
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("# device %s sm_%d%d\n", p.name, p.major, p.minor);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
