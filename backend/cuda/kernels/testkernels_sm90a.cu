// testkernels_sm90a.cu: the sm_90a kernels only backend/cuda's tests launch,
// built by gen.sh into testkernels_sm_90a.cubin and embedded by the tests
// alone, not by the Hopper module. They include the Hopper and paged
// modules' sources and call their device functions, so that they test the
// production code (mutants/qp-encode-no-remainder.sed, applied to
// hopper/quant_pack.cuh, fails TestFastEncodeAllFloats through this module).
#include "common.cuh"
#include "hopper.cuh"
#include "paged/rescale.cuh"

// EncodeCheckParams is fp8attn_encode_check's (mirrored by backend/cuda's
// encodeCheckParams, checked against fp8attn_encode_check_params_layout
// when the tests load this module).
struct EncodeCheckParams {
  const float* amax;
  unsigned* result;
  int n;
};

// fp8attn_encode_check is TestFastEncodeAllFloats's kernel: for each of the
// n amax values, every float x with |x| <= amax or not finite (bit
// patterns grid-strided) through quant_pack9's hopper::Encoder and through
// encode4 with the scale fp8.ScaleForAmax gives; result[2k] counts the x
// whose codes differ, result[2k+1] holds one such x's bits. With n = 0 it
// passes pdl_entry and returns (BenchmarkDeviceLaunchFloor's empty kernel).
extern "C" __global__ void __launch_bounds__(256) fp8attn_encode_check(const __grid_constant__ EncodeCheckParams p) {
  pdl_entry();
  const float* amax = p.amax;
  unsigned* result = p.result;
  const int n = p.n;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int k = 0; k < n; k++) {
    const float a = amax[k];
    const hopper::Encoder enc(scale_for_amax(a));
    unsigned bad = 0, which = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += 4 * stride) {
      float4 x;
      x.x = __uint_as_float((unsigned)i);
      x.y = __uint_as_float((unsigned)(i + stride));
      x.z = __uint_as_float((unsigned)(i + 2 * stride));
      x.w = __uint_as_float((unsigned)(i + 3 * stride));
      const uint32_t got = enc(x), want = encode4(x, enc.s);
      const float xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const bool in = !(fabsf(xs[j]) <= 3.40282347e38f) || fabsf(xs[j]) <= a;
        if (in && ((got >> (8 * j)) & 0xFFu) != ((want >> (8 * j)) & 0xFFu)) bad++, which = __float_as_uint(xs[j]);
      }
    }
    if (bad) {
      atomicAdd(&result[2 * k], bad);
      result[2 * k + 1] = which;
    }
  }
}

#define ECP_OFF(f) (int)offsetof(EncodeCheckParams, f)
extern "C" __device__ const int fp8attn_encode_check_params_layout[] = {(int)sizeof(EncodeCheckParams), ECP_OFF(amax), ECP_OFF(result),
                                                                        ECP_OFF(n)};

// fp8attn_rescale_check is TestRescaleAllCodes's kernel: block i writes
// out[256i + c], every code c re-encoded at the ratio r[i] by rescale16
// (the prefill gather's re-encode of a page below its sequence's scale, on
// sm_89 and newer in half precision), thread t the codes 16t .. 16t+15.
// Blocks of 16 threads, n blocks.
extern "C" __global__ void fp8attn_rescale_check(const float* r, uint8_t* out, int n) {
  const int i = blockIdx.x, t = threadIdx.x;
  if (i >= n || t >= 16) return;
  uint4 x;
  uint8_t* c = (uint8_t*)&x;
#pragma unroll
  for (int j = 0; j < 16; j++) c[j] = (uint8_t)(16 * t + j);
  *(uint4*)(out + 256ll * i + 16 * t) = rescale16(x, r[i]);
}
