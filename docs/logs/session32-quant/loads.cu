// loads.cu: how long a grid takes to read the mission call's 3 MB of
// float32 inputs (L2-resident, as in graph replay) and take their amax,
// by how many SMs share the bytes, in CUDA-graph replay with programmatic
// dependent launch; and how many clusters of 4 and 8 one-block-an-SM
// blocks the GPU holds at once. Session 32's question (docs/PERF.md): does
// the quantizing one-tile form's load phase shorten with more SMs a head?
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o loads loads.cu && ./loads
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

constexpr int THREADS = 256, SMEM = 120 * 1024;  // one block an SM, as stage 9's
constexpr long N4 = 3L * 1024 * 1024 / 16;        // float4s in 3 MB

__device__ __forceinline__ float amax_add(float m, float x) { return fmaxf(m, fabsf(x)); }

// The patterns of a block's loads, in float4 j of a thread (PT a multiple
// of 4 for the last two; groups of 4 float4 a thread = 1024 float4 a block):
//   COALESCED: float4 256j + tid (each instruction 4 KB contiguous);
//   ROWS: the quantizing form's Q and K as committed, thread tid/4 of a
//     64-float row, float4s 4(tid%4) + j%4: each instruction takes 16 bytes
//     of every 32-byte sector it touches;
//   SECTORS: the same rows, float4 4(j%4) + tid%4: whole sectors.
enum Pattern { COALESCED, ROWS, SECTORS };

template <int PT, int PAT>
__global__ void __launch_bounds__(THREADS, 1) load_amax(const float4* x, float* out) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const float4* p = x + (long)blockIdx.x * PT * THREADS;
  const int t = threadIdx.x;
  float4 v[PT];
#pragma unroll
  for (int j = 0; j < PT; j++)
    v[j] = PAT == COALESCED ? p[j * THREADS + t]
           : PAT == ROWS    ? p[(j / 4) * 1024 + (t / 4) * 16 + 4 * (t % 4) + j % 4]
                            : p[(j / 4) * 1024 + (t / 4) * 16 + 4 * (j % 4) + t % 4];
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < PT; j++) m = amax_add(amax_add(amax_add(amax_add(m, v[j].x), v[j].y), v[j].z), v[j].w);
  m = __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m)));
  __shared__ float w[8];
  if (threadIdx.x % 32 == 0) w[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; i++) m = fmaxf(m, w[i]);
    out[blockIdx.x] = m;
  }
}

__global__ void __launch_bounds__(THREADS, 1) empty(const float4*, float*) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// per_call times a graph of `calls` launches of f (PDL on), replayed
// `reps` times: the median a launch.
template <typename F>
double per_call(F f, int blocks, int cluster, const float4* x, float* out, bool spread = false, int calls = 1000, int reps = 7) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(THREADS), cfg.dynamicSmemBytes = SMEM, cfg.stream = s;
  cudaLaunchAttribute at[3];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = cluster, at[1].val.clusterDim.y = 1, at[1].val.clusterDim.z = 1;
  at[2].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  at[2].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
  cfg.attrs = at, cfg.numAttrs = cluster > 1 ? (spread ? 3 : 2) : 1;
  CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  if (cluster > 1) CK(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; i++) CK(cudaLaunchKernelEx(&cfg, f, x, out));
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

template <int PT, int PAT = COALESCED>
void row(const float4* x, float* out, int cluster, bool spread = false) {
  const int blocks = (int)(N4 / (PT * THREADS));
  const double e = per_call(empty, blocks, cluster, x, out, spread), l = per_call(load_amax<PT, PAT>, blocks, cluster, x, out, spread);
  const char* pat[] = {"coalesced", "rows", "sectors"};
  printf("%3d blocks, cluster %d%s, %5.1f KB a block, %-9s: empty %.3f us, loads+amax %.3f us, above empty %.3f us (%.1f GB/s a block)\n",
         blocks, cluster, spread ? " spread" : "", PT * THREADS * 16 / 1024.0, pat[PAT], e, l, l - e, PT * THREADS * 16 / ((l - e) * 1e3));
}

template <typename F>
void clusters(F f, int size) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1024), cfg.blockDim = dim3(THREADS), cfg.dynamicSmemBytes = SMEM;
  cudaLaunchAttribute at;
  at.id = cudaLaunchAttributeClusterDimension;
  at.val.clusterDim.x = size, at.val.clusterDim.y = 1, at.val.clusterDim.z = 1;
  cfg.attrs = &at, cfg.numAttrs = 1;
  CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  CK(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  int n = 0;
  CK(cudaOccupancyMaxActiveClusters(&n, f, &cfg));
  printf("clusters of %2d, one block an SM: at most %d active (%d SMs)\n", size, n, n * size);
}

int main() {
  cudaDeviceProp pr;
  CK(cudaGetDeviceProperties(&pr, 0));
  printf("%s, %d SMs, L2 %d MB\n", pr.name, pr.multiProcessorCount, pr.l2CacheSize >> 20);
  for (int c : {2, 4, 8, 16}) clusters(load_amax<12, COALESCED>, c);
  float4* x;
  float* out;
  CK(cudaMalloc(&x, N4 * 16));
  CK(cudaMalloc(&out, 4096 * 4));
  std::vector<float> h(N4 * 4);
  for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) - 500.f;
  CK(cudaMemcpy(x, h.data(), N4 * 16, cudaMemcpyHostToDevice));
  for (int round = 0; round < 2; round++) {
    row<12>(x, out, 1);
    row<12, ROWS>(x, out, 1);
    row<12, SECTORS>(x, out, 1);
    row<12>(x, out, 4);
    row<12, ROWS>(x, out, 4);
    row<12, SECTORS>(x, out, 4);
    row<12>(x, out, 4, true);
    row<12>(x, out, 2);
    row<8>(x, out, 1);
    row<8, ROWS>(x, out, 1);
    row<8>(x, out, 2);
    row<8>(x, out, 4);
    row<4>(x, out, 1);
    row<4>(x, out, 2);
  }
  return 0;
}
