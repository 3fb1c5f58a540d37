// wgmmadump.cu: dumps what the Hopper warpgroup MMA leaves in each thread's
// accumulator registers, so that wmma.WGMMAAcc can be held to the hardware.
// Hopper only (sm_90a):
//
//   nvcc -O2 -gencode arch=compute_90a,code=sm_90a wgmmadump.cu -o wgd
//   ./wgd > dump_wgmma_sm_90a.txt
//
// One warpgroup (128 threads) runs wgmma.mma_async m64n64k32 f32.e4m3.e4m3
// with A (64x32) and B (32x64, stored N x K) in shared memory, both K-major
// without swizzle: 8-row x 16-byte core matrices, LBO (between core matrices
// along K) = 128 bytes, SBO (between groups of 8 rows) = 256 bytes.
//
// Output, in the format of fragdump.cu:
//   "frag wgmma_m64n64k32_acc_f32 32": 128 lines "THREAD v0 .. v31", register
//     i of THREAD after D = A*B with operands chosen so that D[r][c] = 64r+c
//     (every operand a small integer, exact in e4m3; every sum exact in f32).
//   "mma wgmma_m64n64k32_e4m3 TRIAL": "A ROW a0..a31" (64 lines),
//     "B K b0..b63" (32 lines) with random integers in [-4, 4], and
//     "C THREAD d0..d31" (128 lines): the product the hardware computed.
#include <cuda_fp8.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int M = 64, N = 64, K = 32, LBO = 128, SBO = 256;

// Byte offset of element (row, k) of a K-major operand in the no-swizzle
// canonical layout.
__host__ __device__ int kmajor(int row, int k) { return (row / 8) * SBO + (k / 16) * LBO + (row % 8) * 16 + k % 16; }

__device__ uint64_t desc(const void* smem) {
  uint64_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return ((a & 0x3FFFF) >> 4) | (uint64_t((LBO & 0x3FFFF) >> 4) << 16) | (uint64_t((SBO & 0x3FFFF) >> 4) << 32);
}

// a: A row-major (M x K codes); bt: B transposed (N x K codes); d: 128 x 32.
__global__ void __launch_bounds__(128) wgmma_e4m3(const uint8_t* a, const uint8_t* bt, float* d) {
  __shared__ __align__(128) uint8_t sa[M * K];
  __shared__ __align__(128) uint8_t sb[N * K];
  for (int i = threadIdx.x; i < M * K; i += 128) sa[kmajor(i / K, i % K)] = a[i];
  for (int i = threadIdx.x; i < N * K; i += 128) sb[kmajor(i / K, i % K)] = bt[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  uint64_t da = desc(sa), db = desc(sb);
  float r[32];
  for (int i = 0; i < 32; i++) r[i] = -1.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
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
      : "l"(da), "l"(db), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  for (int i = 0; i < 32; i++) d[threadIdx.x * 32 + i] = r[i];
}

static uint8_t e4m3(float x) { return __nv_fp8_e4m3(x).__x; }

// run computes D = A*B on the device for logical A[M][K], B[K][N] (floats
// exactly representable in e4m3) and returns the 128 x 32 registers.
static std::vector<float> run(const std::vector<float>& A, const std::vector<float>& B) {
  std::vector<uint8_t> a(M * K), bt(N * K);
  for (int i = 0; i < M * K; i++) a[i] = e4m3(A[i]);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) bt[n * K + k] = e4m3(B[k * N + n]);
  uint8_t *da, *db;
  float* dd;
  CHECK(cudaMalloc(&da, M * K));
  CHECK(cudaMalloc(&db, N * K));
  CHECK(cudaMalloc(&dd, 128 * 32 * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), M * K, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, bt.data(), N * K, cudaMemcpyHostToDevice));
  wgmma_e4m3<<<1, 128>>>(da, db, dd);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> d(128 * 32);
  CHECK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(da); cudaFree(db); cudaFree(dd);
  return d;
}

int main() {
  // Coded product: D[r][c] = 64r + c = 64(r%8) + 512(r/8) + c%8 + 8(c/8).
  std::vector<float> A(M * K, 0.f), B(K * N, 0.f);
  for (int r = 0; r < M; r++) {
    A[r * K + 0] = r % 8;
    A[r * K + 1] = 8 * (r / 8);
    A[r * K + 2] = 1;
    A[r * K + 3] = 8;
  }
  for (int c = 0; c < N; c++) {
    B[0 * N + c] = 64;
    B[1 * N + c] = 64;
    B[2 * N + c] = c % 8;
    B[3 * N + c] = c / 8;
  }
  std::vector<float> d = run(A, B);
  std::vector<int> seen(M * N, 0);
  printf("frag wgmma_m64n64k32_acc_f32 32\n");
  for (int t = 0; t < 128; t++) {
    printf("%d", t);
    for (int i = 0; i < 32; i++) {
      float v = d[t * 32 + i];
      printf(" %g", v);
      int code = int(v);
      if (v == float(code) && code >= 0 && code < M * N) seen[code]++;
    }
    printf("\n");
  }
  for (int i = 0; i < M * N; i++)
    if (seen[i] != 1) {
      fprintf(stderr, "coded product: element (%d,%d) appears %d times: wrong operand layout?\n", i / 64, i % 64, seen[i]);
      return 1;
    }
  srand(1);
  for (int trial = 0; trial < 3; trial++) {
    for (auto& x : A) x = rand() % 9 - 4;
    for (auto& x : B) x = rand() % 9 - 4;
    d = run(A, B);
    printf("mma wgmma_m64n64k32_e4m3 %d\n", trial);
    for (int r = 0; r < M; r++) {
      printf("A %d", r);
      for (int k = 0; k < K; k++) printf(" %g", A[r * K + k]);
      printf("\n");
    }
    for (int k = 0; k < K; k++) {
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
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("# device %s sm_%d%d\n", p.name, p.major, p.minor);
  return 0;
}
