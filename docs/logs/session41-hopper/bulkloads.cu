// bulkloads.cu (session 41, from session 32's loads.cu): how long a grid takes to read the mission call's 3 MB of
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


// bulk_amax: the same 48 KB a block (12 float4 a thread), PT_LD float4 a
// thread by per-thread loads (COALESCED) and the rest by CHUNKS bulk copies
// (cp.async.bulk, the tensor-memory accelerator) into shared memory, all
// completing on one mbarrier; then the amax over both. Session 41's
// question: do many bulk copies in flight, or both paths at once, read a
// block's bytes faster than the per-thread loads alone (session 21: one
// 32 KB copy took twice as long)?
template <int CHUNKS, int PT_LD>
__global__ void __launch_bounds__(THREADS, 1) bulk_amax(const float4* x, float* out) {
  extern __shared__ __align__(128) float4 sm[];
  __shared__ __align__(8) unsigned long long bar;
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const unsigned b = (unsigned)__cvta_generic_to_shared(&bar), s0 = (unsigned)__cvta_generic_to_shared(sm);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int PT = 12, t = threadIdx.x;
  const float4* p = x + (long)blockIdx.x * PT * THREADS;
  constexpr unsigned BULK = (PT - PT_LD) * THREADS * 16, CH = BULK / CHUNKS;
  static_assert(CHUNKS <= 32 && BULK % CHUNKS == 0 && CH % 16 == 0, "chunks");
  if (t < 32) {
    if (t == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(BULK) : "memory");
    __syncwarp();
    if (t < CHUNKS)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(s0 + t * CH),
                   "l"((const char*)(p + PT_LD * THREADS) + (long)t * CH), "r"(CH), "r"(b)
                   : "memory");
  }
  float4 v[PT_LD > 0 ? PT_LD : 1];
#pragma unroll
  for (int j = 0; j < PT_LD; j++) v[j] = p[j * THREADS + t];
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < PT_LD; j++) m = amax_add(amax_add(amax_add(amax_add(m, v[j].x), v[j].y), v[j].z), v[j].w);
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], 0; selp.u32 %0, 1, 0, q; }\n" : "=r"(done) : "r"(b) : "memory");
#pragma unroll
  for (int j = 0; j < PT - PT_LD; j++) {
    const float4 w = sm[j * THREADS + t];
    m = amax_add(amax_add(amax_add(amax_add(m, w.x), w.y), w.z), w.w);
  }
  m = __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m)));
  __shared__ float w8[8];
  if (threadIdx.x % 32 == 0) w8[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; i++) m = fmaxf(m, w8[i]);
    out[blockIdx.x] = m;
  }
}


// path_amax: the same 48 KB a block through other load paths, 12 float4 a
// thread (COALESCED): PATH 0 ld.global.nc.L1::no_allocate (the read-only
// path), 1 ld.global with the .L2::256B prefetch hint, 2 cp.async.cg
// (LDGSTS, 16 bytes a thread an instruction, L1 bypassed) into shared memory,
// then read back.
template <int PATH>
__global__ void __launch_bounds__(THREADS, 1) path_amax(const float4* x, float* out) {
  extern __shared__ __align__(128) float4 sm[];
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int PT = 12, t = threadIdx.x;
  const float4* p = x + (long)blockIdx.x * PT * THREADS;
  float4 v[PT];
#pragma unroll
  for (int j = 0; j < PT; j++) {
    const float4* a = p + j * THREADS + t;
    if constexpr (PATH == 0)
      asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v[j].x), "=f"(v[j].y), "=f"(v[j].z), "=f"(v[j].w) : "l"(a));
    else if constexpr (PATH == 1)
      asm volatile("ld.global.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v[j].x), "=f"(v[j].y), "=f"(v[j].z), "=f"(v[j].w) : "l"(a));
    else
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(sm + j * THREADS + t)), "l"(a) : "memory");
  }
  if constexpr (PATH == 2) {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < PT; j++) v[j] = sm[j * THREADS + t];
  }
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < PT; j++) m = amax_add(amax_add(amax_add(amax_add(m, v[j].x), v[j].y), v[j].z), v[j].w);
  m = __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m)));
  __shared__ float w8[8];
  if (threadIdx.x % 32 == 0) w8[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; i++) m = fmaxf(m, w8[i]);
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


template <int CHUNKS, int PT_LD>
void brow(const float4* x, float* out, int cluster) {
  const int blocks = (int)(N4 / (12 * THREADS));
  const double e = per_call(empty, blocks, cluster, x, out), l = per_call(bulk_amax<CHUNKS, PT_LD>, blocks, cluster, x, out);
  printf("%3d blocks, cluster %d, 48 KB a block: %2d float4 a thread loaded, the rest in %2d bulk copies: empty %.3f us, loads+amax %.3f us, above empty %.3f us\n",
         blocks, cluster, PT_LD, CHUNKS, e, l, l - e);
}

template <int PATH>
void prow(const float4* x, float* out, int cluster) {
  const int blocks = (int)(N4 / (12 * THREADS));
  const double e = per_call(empty, blocks, cluster, x, out), l = per_call(path_amax<PATH>, blocks, cluster, x, out);
  const char* name[] = {"ld.global.nc.L1::no_allocate", "ld.global.L2::256B", "cp.async.cg"};
  printf("%3d blocks, cluster %d, 48 KB a block, %-28s: empty %.3f us, loads+amax %.3f us, above empty %.3f us\n", blocks, cluster, name[PATH], e, l, l - e);
}

int main() {
  cudaDeviceProp pr;
  CK(cudaGetDeviceProperties(&pr, 0));
  printf("%s, %d SMs, L2 %d MB\n", pr.name, pr.multiProcessorCount, pr.l2CacheSize >> 20);
  float4* x;
  float* out;
  CK(cudaMalloc(&x, N4 * 16));
  CK(cudaMalloc(&out, 4096 * 4));
  std::vector<float> h(N4 * 4);
  for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) - 500.f;
  CK(cudaMemcpy(x, h.data(), N4 * 16, cudaMemcpyHostToDevice));
  for (int round = 0; round < 2; round++) {
    for (int c : {1, 4}) {
      row<12>(x, out, c);
      prow<0>(x, out, c);
      prow<1>(x, out, c);
      prow<2>(x, out, c);
      brow<1, 0>(x, out, c);
      brow<4, 0>(x, out, c);
      brow<8, 0>(x, out, c);
      brow<16, 0>(x, out, c);
      brow<32, 0>(x, out, c);
      brow<8, 4>(x, out, c);
      brow<16, 4>(x, out, c);
      brow<8, 6>(x, out, c);
      brow<16, 6>(x, out, c);
      brow<8, 8>(x, out, c);
      brow<4, 8>(x, out, c);
    }
  }
  return 0;
}
