// place.cu: where clusters of one-block-an-SM blocks land, and whether the
// loads of 16 clusters of 4 (the quantizing form's mission grid) go faster
// when they are spread over more of the GPU: 30 clusters launched (the most
// the H200 holds at once), 16 of them working, chosen by a mask, the rest
// exiting at once. Session 32 (docs/PERF.md).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o place place.cu && ./place
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

constexpr int THREADS = 256, SMEM = 120 * 1024, PT = 12;
constexpr long N4 = 3L * 1024 * 1024 / 16;

// Block b of the grid (clusters of `cs`) works where bit b / cs of mask is
// set: it loads chunk popcount(mask below its cluster) * cs + rank, 48 KB.
__global__ void __launch_bounds__(THREADS, 1) load_amax(const float4* x, float* out, int* sm, unsigned long long mask, int cs) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int c = blockIdx.x / cs, r = blockIdx.x % cs;
  if (threadIdx.x == 0) {
    int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    sm[blockIdx.x] = (mask >> c) & 1ull ? id : -1 - id;
  }
  if (!((mask >> c) & 1ull)) return;
  const int chunk = __popcll(mask & ((1ull << c) - 1)) * cs + r;
  const float4* p = x + (long)chunk * PT * THREADS + threadIdx.x;
  float4 v[PT];
#pragma unroll
  for (int j = 0; j < PT; j++) v[j] = p[j * THREADS];
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < PT; j++) m = fmaxf(fmaxf(fmaxf(fmaxf(m, fabsf(v[j].x)), fabsf(v[j].y)), fabsf(v[j].z)), fabsf(v[j].w));
  m = __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m)));
  __shared__ float w[8];
  if (threadIdx.x % 32 == 0) w[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; i++) m = fmaxf(m, w[i]);
    out[chunk] = m;
  }
}

__global__ void __launch_bounds__(THREADS, 1) empty(const float4*, float*, int*, unsigned long long, int) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

template <typename F>
double per_call(F f, int blocks, int cs, unsigned long long mask, const float4* x, float* out, int* sm, int calls = 1000, int reps = 7) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(THREADS), cfg.dynamicSmemBytes = SMEM, cfg.stream = s;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = cs, at[1].val.clusterDim.y = 1, at[1].val.clusterDim.z = 1;
  cfg.attrs = at, cfg.numAttrs = cs > 1 ? 2 : 1;
  CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; i++) CK(cudaLaunchKernelEx(&cfg, f, x, out, sm, mask, cs));
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaGraphLaunch(ge, s));
  std::vector<double> t;
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / calls);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  return t[t.size() / 2];
}

void row(const char* name, int clusters, int cs, unsigned long long mask, const float4* x, float* out, int* sm, bool show) {
  const int blocks = clusters * cs;
  const double e = per_call(empty, blocks, cs, mask, x, out, sm), l = per_call(load_amax, blocks, cs, mask, x, out, sm);
  printf("%-28s %3d blocks, clusters of %d: empty %.3f us, loads+amax %.3f us, above empty %.3f us\n", name, blocks, cs, e, l, l - e);
  if (!show) return;
  std::vector<int> h(blocks);
  CK(cudaMemcpy(h.data(), sm, blocks * 4, cudaMemcpyDeviceToHost));
  printf("  SM of each block (last call; negative: -1-SM of an idle block):");
  for (int i = 0; i < blocks; i++) printf("%s%d", i % cs ? "," : " ", h[i]);
  printf("\n");
}

int main() {
  float4* x;
  float* out;
  int* sm;
  CK(cudaMalloc(&x, N4 * 16));
  CK(cudaMalloc(&out, 4096 * 4));
  CK(cudaMalloc(&sm, 4096 * 4));
  std::vector<float> h(N4 * 4);
  for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) - 500.f;
  CK(cudaMemcpy(x, h.data(), N4 * 16, cudaMemcpyHostToDevice));
  unsigned alt = 0;
  for (int c = 0; c < 30 && __builtin_popcount(alt) < 16; c += 2) alt |= 1u << c;
  alt |= 1u << 29;
  unsigned third = 0;  // every other cluster of the first 24, then the last 4... 16 in all
  for (int c = 0; c < 30 && __builtin_popcount(third) < 16; c++) if (c % 15 < 8) third |= 1u << c;
  for (int round = 0; round < 2; round++) {
    const bool show = round == 0;
    row("64 blocks, no cluster", 64, 1, ~0ull, x, out, sm, show);
    row("32 clusters of 2", 32, 2, ~0ull, x, out, sm, show);
    row("16 clusters of 4", 16, 4, 0xFFFFu, x, out, sm, show);
    row("30 of 4, first 16 work", 30, 4, 0xFFFFu, x, out, sm, show);
    row("30 of 4, every other works", 30, 4, alt, x, out, sm, show);
    row("30 of 4, 8 of each 15 work", 30, 4, third, x, out, sm, show);
    row("30 of 4, last 16 work", 30, 4, 0x3FFF0000u | 0x3u << 14, x, out, sm, show);
  }
  return 0;
}
