// paged/rescale.cuh: a cached block's codes re-encoded at another scale,
// as the append does when a block's scale grows and the prefill gather does
// when a sequence's pages differ in scale. Included by paged.cu, in its
// order, and by testkernels_sm90a.cu (TestRescaleAllCodes), so that the test
// runs these very functions.
#pragma once

// float_to_e4m3 is fp8.ToE4M3(x, fp8.SatFinite).
__device__ __forceinline__ uint8_t float_to_e4m3(float x) {
  return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// rescale4 is rescale16 of four codes, two at a time in half precision
// (sm_89 and newer), r2 holding r twice. A code's value has at most four
// significant bits, so its product by r (a power of two) is exact in half
// wherever it is at least 2^-20 (its last bit then at least 2^-24, half's
// smallest subnormal); a smaller product, which half may round or flush
// (r itself below 2^-24 included), rounds to a zero of its sign in E4M3
// either way. So the one rounding that matters, back to E4M3, gives the
// codes of the float path.
#if __CUDA_ARCH__ >= 890
__device__ __forceinline__ uint32_t rescale4(uint32_t x, uint32_t r2) {
  uint32_t y;
  asm("{\n\t.reg .b16 lo, hi;\n\t.reg .b32 a, b;\n\t"
      "mov.b32 {lo, hi}, %1;\n\t"
      "cvt.rn.f16x2.e4m3x2 a, lo;\n\tcvt.rn.f16x2.e4m3x2 b, hi;\n\t"
      "mul.rn.f16x2 a, a, %2;\n\tmul.rn.f16x2 b, b, %2;\n\t"
      "cvt.rn.satfinite.e4m3x2.f16x2 lo, a;\n\tcvt.rn.satfinite.e4m3x2.f16x2 hi, b;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(y)
      : "r"(x), "r"(r2));
  return y;
}
#endif

// rescale16 re-encodes 16 codes at a scale r times theirs (r a power of two
// at most 1): each value times r, rounded to nearest E4M3, as the append
// re-encodes a block whose scale grows.
__device__ __forceinline__ uint4 rescale16(uint4 x, float r) {
#if __CUDA_ARCH__ >= 890
  const uint32_t r2 = 0x10001u * __half_as_ushort(__float2half_rn(r));
  return make_uint4(rescale4(x.x, r2), rescale4(x.y, r2), rescale4(x.z, r2), rescale4(x.w, r2));
#else
  uint8_t* c = (uint8_t*)&x;
#pragma unroll
  for (int i = 0; i < 16; i++) c[i] = float_to_e4m3(e4m3_to_float(c[i]) * r);
  return x;
#endif
}
