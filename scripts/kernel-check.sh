#!/usr/bin/env bash
# kernel-check.sh: a compile check of the kernel sources without CUDA. Each
# module build gen.sh runs (attention.cu for compute_89 and compute_80,
# attention_sm90a.cu for sm_90a, paged.cu for all three, and the test
# modules testkernels.cu for compute_80 and testkernels_sm90a.cu for sm_90a)
# is parsed and its templates instantiated by g++ -fsyntax-only, with the CUDA keywords,
# types and intrinsics the sources use declared by the stub below (no
# code is generated: PTX inline assembly is not checked). EXTRA adds
# options (EXTRA=-DFP8ATTN_PROFILE checks the profile build). A name the
# stub lacks shows as an error too: declare it below. Exits non-zero on an
# error.
set -uo pipefail
root=$(git rev-parse --show-toplevel)
stub=$(mktemp -d); trap 'rm -rf "$stub"' EXIT
cat > "$stub/cuda_stub.h" <<'STUB'
#pragma once
#include <stdint.h>
#include <stddef.h>
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __constant__
#define __grid_constant__
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__
struct uint3 { unsigned x, y, z; };
extern uint3 threadIdx, blockIdx, blockDim, gridDim;
extern int warpSize;
struct float2 { float x, y; }; struct float4 { float x, y, z, w; };
struct uint4 { unsigned x, y, z, w; }; struct uint2 { unsigned x, y; }; struct int4 { int x, y, z, w; }; struct int2 { int x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
float __int_as_float(int); int __float_as_int(float); float __uint_as_float(unsigned); unsigned __float_as_uint(float);
float __fmaf_rn(float, float, float); float __fmul_rn(float, float); float __fadd_rn(float, float); float __frcp_rn(float); float __fdiv_rn(float, float);
float __fsub_rn(float, float); double __dmul_rn(double,double);
unsigned __byte_perm(unsigned, unsigned, unsigned); int __popc(unsigned); int __clz(int); int __ffs(int); unsigned __umulhi(unsigned, unsigned);
template <class T> T __shfl_sync(unsigned, T, int, int = 32); template <class T> T __shfl_xor_sync(unsigned, T, int, int = 32);
template <class T> T __shfl_down_sync(unsigned, T, int, int = 32);
int __any_sync(unsigned, int); int __all_sync(unsigned, int); unsigned __ballot_sync(unsigned, int);
unsigned __reduce_max_sync(unsigned, unsigned); unsigned __reduce_or_sync(unsigned, unsigned);
void __syncthreads(); void __syncwarp(unsigned = 0xffffffff); int __syncthreads_or(int); int __syncthreads_count(int);
void __threadfence(); void __threadfence_block(); void __nanosleep(unsigned);
size_t __cvta_generic_to_shared(const void*);
template <class T> T __ldg(const T*); template <class T> T __ldcg(const T*); template <class T> T __ldcs(const T*); template <class T> void __stcg(T*, T); template <class T> void __stcs(T*, T);
int atomicAdd(int*, int); unsigned atomicAdd(unsigned*, unsigned); float atomicAdd(float*, float); int atomicOr(int*, int); int atomicMax(int*, int); int atomicExch(int*, int); unsigned atomicInc(unsigned*, unsigned);
int atomicCAS(int*, int, int);
float fmaxf(float, float); float fminf(float, float); float fabsf(float); float exp2f(float); float log2f(float); float sqrtf(float); float rsqrtf(float); float fmaf(float, float, float); float ldexpf(float, int); float frexpf(float, int*); float floorf(float); float ceilf(float); float expf(float); float logf(float); float copysignf(float, float); float tanhf(float);
double fabs(double); double ldexp(double, int); double frexp(double, int*);
int isnan(float); int isinf(float); int isfinite(float);
template <class T> T min(T, T); template <class T> T max(T, T);
long long min(long long, int); long long min(int, long long);
long long clock64();
struct __half_raw { unsigned short x; };
struct __half { unsigned short x; __half() = default; __half(__half_raw r) : x(r.x) {} }; 
struct __half2_raw { unsigned short x, y; };
struct __half2 { __half x, y; __half2() = default; __half2(__half2_raw r) {} };
typedef unsigned short __nv_fp8x2_storage_t; typedef unsigned char __nv_fp8_storage_t;
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 }; enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
__half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t, __nv_fp8_interpretation_t);
__half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t, __nv_fp8_interpretation_t);
__nv_fp8_storage_t __nv_cvt_float_to_fp8(float, __nv_saturation_t, __nv_fp8_interpretation_t);
__nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2, __nv_saturation_t, __nv_fp8_interpretation_t);
__half __float2half_rn(float); float __half2float(__half); __half2 __floats2half2_rn(float, float); __half2 __halves2half2(__half, __half);
float __low2float(__half2); float __high2float(__half2); unsigned short __half_as_ushort(__half);
namespace nvcuda { namespace wmma {
struct row_major {}; struct col_major {}; struct matrix_a {}; struct matrix_b {}; struct accumulator {}; enum layout_t { mem_row_major, mem_col_major };
template <class U, int M, int N, int K, class T, class L = void> struct fragment { T x[16]; static const int num_elements = 8; };
template <class F, class T> void load_matrix_sync(F&, const T*, unsigned);
template <class F, class T> void load_matrix_sync(F&, const T*, unsigned, layout_t);
template <class F, class T> void store_matrix_sync(T*, const F&, unsigned, layout_t);
template <class A, class B, class C, class D> void mma_sync(D&, const A&, const B&, const C&);
template <class F, class T> void fill_fragment(F&, T);
}}
typedef __half half;
double __dadd_rn(double, double); double __ddiv_rn(double, double); double __dsub_rn(double, double); __half __float2half(float);
float2 __half22float2(__half2); unsigned atomicMax(unsigned*, unsigned); unsigned atomicOr(unsigned*, unsigned); unsigned atomicExch(unsigned*, unsigned); unsigned atomicCAS(unsigned*, unsigned, unsigned);
STUB
for h in cuda_fp16.h cuda_fp8.h mma.h cuda_runtime.h; do echo '#include "cuda_stub.h"' > "$stub/$h"; done
status=0
cd "$root/backend/cuda/kernels"
for cfg in attention.cu:890 attention.cu:800 attention_sm90a.cu:900 paged.cu:890 paged.cu:800 paged.cu:900 \
  testkernels.cu:800 testkernels_sm90a.cu:900; do
  f=${cfg%%:*} a=${cfg##*:}
  # shellcheck disable=SC2086
  if out=$(g++ -std=c++17 -fsyntax-only -x c++ -I"$stub" -include "$stub/cuda_stub.h" -D__CUDACC__ -D__CUDA_ARCH__=$a \
    ${EXTRA:-} -Wno-attributes "$f" 2>&1) && ! grep -q error <<< "$out"; then
    echo "ok     $f __CUDA_ARCH__=$a ${EXTRA:-}"
  else
    echo "FAILED $f __CUDA_ARCH__=$a ${EXTRA:-}"; grep -E 'error' <<< "$out" | sort -u | head -20; status=1
  fi
done
exit $status
