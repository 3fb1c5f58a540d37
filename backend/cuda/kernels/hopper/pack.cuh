// hopper/pack.cuh: the images' geometry and the pack kernels that write Q,
// K and V images. Included by hopper.cuh only, inside namespace hopper, in
// its order.
#pragma once

// Geometry is the tiles of head dim D's kernel with a ring of R slots
// (HopperTiles' RING; the paged forms' PAGED_RING).
template <int D, int R = HopperTiles<D>::RING> struct Geometry {
  using T = HopperTiles<D>;
  static constexpr int DK = T::DK, BM = T::BM, BN = T::BN, RING = R;
  static constexpr int WK = DK < 128 ? DK : 128;  // Q and K panel width (swizzle row)
  static constexpr int WV = BN;                   // V image row width
  static constexpr int QB = 64 * DK;              // one consumer's Q block, bytes
  static constexpr int KT = BN * DK, VT = D * BN; // K and V tiles, bytes
  static_assert(T::THREADS == 384 && BM == 128, "one producer and two consumer warpgroups of 64 rows");
  // The one-tile form's blocks: one producer and one consumer warpgroup.
  static constexpr int ONE_BM = T::ONE_BM;
  static_assert(T::ONE_THREADS == 256 && ONE_BM == 64, "the one-tile form: one producer and one consumer warpgroup of 64 rows");
  // The quantizing one-tile form's cluster (quantize_one_tile): its
  // blocks' shares of the keys, ONE_BM each, make the one tile of 2·BN.
  static constexpr int ONE_CLUSTER = T::ONE_CLUSTER;
  static constexpr int ONES = 1024;               // E4M3 ones: B of the row sums (the normalizer)
  static_assert(R != T::RING || T::SMEM >= BM * DK + RING * (KT + VT) + ONES + 8 * (1 + 3 * RING) + 1023, "shared memory budget");
};

// The image of one head's Q (R = 64) or K (R = BN) rows: byte (row, col)
// sits at (row / R)·R·DK + (col / WK)·R·WK + swizzle(row % R · WK + col % WK).
template <int D, int R> __device__ __forceinline__ long long qk_image_offset(int row, int col) {
  using G = Geometry<D>;
  return (long long)(row / R) * R * G::DK + (col / G::WK) * R * G::WK +
         swizzle<G::WK>((row % R) * G::WK + col % G::WK);
}

// negate_if flips the sign of the 16 E4M3 codes in v where neg (exact).
__device__ __forceinline__ uint4 negate_if(uint4 v, bool neg) {
  const uint32_t m = neg ? 0x80808080u : 0u;
  return make_uint4(v.x ^ m, v.y ^ m, v.z ^ m, v.w ^ m);
}

// pack_qk writes the Q (IS_Q) or K image of every head: one thread per 16
// bytes of the image, zeros past the rows and the head dimension (p.d, up
// to D: a kernel runs the head dims below its own on zero columns).
template <int D, bool IS_Q> __device__ __forceinline__ void pack_qk(const Params& p) {
  using G = Geometry<D>;
  constexpr int R = IS_Q ? 64 : G::BN, PAD = IS_Q ? G::BM : G::BN, CH = G::DK / 16;
  const int heads = (int)(IS_Q ? p.b * p.hq : p.b * p.hkv), h_per_b = (int)(IS_Q ? p.hq : p.hkv);
  const int rows = (int)(IS_Q ? p.sq : p.sk), rows_p = (rows + PAD - 1) / PAD * PAD;
  const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)heads * rows_p * CH) return;
  const int c = (int)(idx % CH), row = (int)(idx / CH % rows_p), head = (int)(idx / CH / rows_p);
  const int b = head / h_per_b, h = head % h_per_b, col = 16 * c;
  uint4 v = make_uint4(0, 0, 0, 0);
  if (row < rows && col < p.d) {
    const uint8_t* src = IS_Q ? p.q + b * p.q_batch_stride + h * p.q_head_stride + row * p.q_row_stride
                              : p.k + b * p.kv_batch_stride + h * p.kv_head_stride + row * p.kv_row_stride;
    // A negative score factor (a negative softmax scale) is folded into Q:
    // flipping the sign bit of every code is exact, so that the kernel
    // works with a positive factor and can take row maxima on raw scores.
    v = negate_if(*(const uint4*)(src + col), IS_Q && p.score_scale[b * p.hq + h] < 0.f);
  }
  uint8_t* dst = (IS_Q ? p.qi : p.ki) + (long long)head * rows_p * G::DK;
  *(uint4*)(dst + qk_image_offset<D, R>(row, col)) = v;
}

// pack_v writes the V image (pack_v_image, common.cuh), swizzled with rows
// of BN bytes.
template <int D> __device__ __forceinline__ void pack_v(const Params& p) {
  using G = Geometry<D>;
  pack_v_image<D, G::BN>(p, [](int o) { return swizzle<G::BN>(o); });
}
