// fragdump.cu: dumps, lane by lane, what tensor-core fragments hold on the
// GPU it runs on, so that the Go model in package wmma can be held to it.
//
//   nvcc -O2 -gencode arch=compute_89,code=compute_89 fragdump.cu -o fd89   (PTX, JIT on the device)
//   nvcc -O2 -gencode arch=compute_90,code=sm_90 fragdump.cu -o fd90
//   ./fd89 > dump_compute_89.txt; ./fd90 > dump_sm_90.txt
//
// Output, in sections:
//   "frag NAME ELEMS": 32 lines "LANE v0 v1 ...": element i of lane LANE after
//     loading a 16x16 tile whose logical (row, col) holds row*16+col
//     (WMMA load_matrix_sync, ldmatrix), or after an mma whose product is
//     that tile (identity times the coded tile).
//   "mma NAME TRIAL": lines "A LANE ...", "B LANE ...", "C LANE ..." with
//     each lane's operand elements (random small integers, in register order)
//     and the accumulator elements the hardware computed from them.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <vector>
using namespace nvcuda;

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int MAXE = 16;  // most elements per lane of any fragment dumped

template <typename Frag>
__device__ void put(const Frag& f, float* out) {
  int lane = threadIdx.x;
  for (int i = 0; i < MAXE; i++) out[lane * MAXE + i] = i < Frag::num_elements ? float(f.x[i]) : -1.f;
}

// codes: 16x16 half tile, logical (r,c) = r*16+c, stored row-major at
// codes_row and column-major at codes_col; codes_f: the same as float.
__global__ void wmma_loads(const half* codes_row, const half* codes_col, const float* codes_f,
                           const half* ident, float* out, int* nelem) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> ar;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> ac;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> br;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> bc;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, prod;
  wmma::load_matrix_sync(ar, codes_row, 16);
  wmma::load_matrix_sync(ac, codes_col, 16);
  wmma::load_matrix_sync(br, codes_row, 16);
  wmma::load_matrix_sync(bc, codes_col, 16);
  wmma::load_matrix_sync(acc, codes_f, 16, wmma::mem_row_major);
  // prod = I * codes: the accumulator layout as the mma itself produces it.
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> id;
  wmma::load_matrix_sync(id, ident, 16);
  wmma::fill_fragment(prod, 0.f);
  wmma::mma_sync(prod, id, br, prod);
  put(ar, out + 0 * 32 * MAXE); put(ac, out + 1 * 32 * MAXE);
  put(br, out + 2 * 32 * MAXE); put(bc, out + 3 * 32 * MAXE);
  put(acc, out + 4 * 32 * MAXE); put(prod, out + 5 * 32 * MAXE);
  if (threadIdx.x == 0) {
    nelem[0] = ar.num_elements; nelem[1] = ac.num_elements; nelem[2] = br.num_elements;
    nelem[3] = bc.num_elements; nelem[4] = acc.num_elements; nelem[5] = prod.num_elements;
  }
}

// ldmatrix.x4 of the row-major coded tile, each lane giving the address of
// row lane%16, column block lane/16 (the usual addressing for an mma A tile).
__global__ void ldmatrix_x4(const half* codes_row, float* out) {
  __shared__ half tile[16 * 16];
  int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) tile[i] = codes_row[i];
  __syncwarp();
  const half* p = tile + (lane % 16) * 16 + (lane / 16) * 8;
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
  uint32_t r[4];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  for (int i = 0; i < 8; i++) {
    half2 h = *reinterpret_cast<half2*>(&r[i / 2]);
    out[lane * MAXE + i] = float(i % 2 ? h.y : h.x);
  }
}

// mma.sync m16n8k16 f16 x f16 -> f32: a[lane][4 regs], b[lane][2], c[lane][4].
__global__ void mma_f16(const uint32_t* a, const uint32_t* b, float* c) {
  int l = threadIdx.x;
  float d[4];
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[l * 4]), "r"(a[l * 4 + 1]), "r"(a[l * 4 + 2]), "r"(a[l * 4 + 3]),
                 "r"(b[l * 2]), "r"(b[l * 2 + 1]), "f"(0.f));
  for (int i = 0; i < 4; i++) c[l * 4 + i] = d[i];
}

// mma.sync m16n8k32 e4m3 x e4m3 -> f32 (sm_89+).
__global__ void mma_e4m3(const uint32_t* a, const uint32_t* b, float* c) {
  int l = threadIdx.x;
  float d[4];
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[l * 4]), "r"(a[l * 4 + 1]), "r"(a[l * 4 + 2]), "r"(a[l * 4 + 3]),
                 "r"(b[l * 2]), "r"(b[l * 2 + 1]), "f"(0.f));
  for (int i = 0; i < 4; i++) c[l * 4 + i] = d[i];
}

static void print_frag(const char* name, int n, const std::vector<float>& v, int off) {
  printf("frag %s %d\n", name, n);
  for (int l = 0; l < 32; l++) {
    printf("%d", l);
    for (int i = 0; i < n; i++) printf(" %g", v[off + l * MAXE + i]);
    printf("\n");
  }
}

template <typename T> T* dev(const std::vector<T>& h) {
  T* d; CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); return d;
}
template <typename T> std::vector<T> host(const T* d, size_t n) {
  std::vector<T> h(n); CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost)); return h;
}

int main() {
  std::vector<half> row(256), col(256), ident(256);
  std::vector<float> codes_f(256);
  for (int r = 0; r < 16; r++) for (int c = 0; c < 16; c++) {
    row[r * 16 + c] = __float2half(r * 16 + c);
    col[c * 16 + r] = __float2half(r * 16 + c);
    codes_f[r * 16 + c] = r * 16 + c;
    ident[r * 16 + c] = __float2half(r == c ? 1.f : 0.f);
  }
  half *d_row = dev(row), *d_col = dev(col), *d_id = dev(ident);
  float* d_cf = dev(codes_f);
  float* d_out; CHECK(cudaMalloc(&d_out, 6 * 32 * MAXE * sizeof(float)));
  int* d_n; CHECK(cudaMalloc(&d_n, 6 * sizeof(int)));
  wmma_loads<<<1, 32>>>(d_row, d_col, d_cf, d_id, d_out, d_n);
  CHECK(cudaGetLastError()); CHECK(cudaDeviceSynchronize());
  auto out = host(d_out, 6 * 32 * MAXE);
  auto n = host(d_n, 6);
  const char* names[] = {"wmma_m16n16k16_a_row_f16", "wmma_m16n16k16_a_col_f16", "wmma_m16n16k16_b_row_f16",
                         "wmma_m16n16k16_b_col_f16", "wmma_m16n16k16_acc_f32_load", "wmma_m16n16k16_acc_f32_mma"};
  for (int k = 0; k < 6; k++) print_frag(names[k], n[k], out, k * 32 * MAXE);

  ldmatrix_x4<<<1, 32>>>(d_row, d_out);
  CHECK(cudaGetLastError()); CHECK(cudaDeviceSynchronize());
  out = host(d_out, 32 * MAXE);
  print_frag("ldmatrix_x4_b16", 8, out, 0);

  srand(12345);
  uint32_t *d_a, *d_b; float* d_c;
  CHECK(cudaMalloc(&d_a, 32 * 4 * 4)); CHECK(cudaMalloc(&d_b, 32 * 2 * 4)); CHECK(cudaMalloc(&d_c, 32 * 4 * 4));
  for (int kind = 0; kind < 2; kind++) {
    int per = kind == 0 ? 2 : 4;  // elements per 32-bit register
    for (int trial = 0; trial < 4; trial++) {
      std::vector<uint32_t> a(32 * 4), b(32 * 2);
      std::vector<float> av(32 * 4 * per), bv(32 * 2 * per);
      auto fill = [&](std::vector<uint32_t>& regs, std::vector<float>& vals) {
        for (size_t e = 0; e < vals.size(); e++) {
          float v = (float)(rand() % 9 - 4);
          vals[e] = v;
          size_t reg = e / per, sub = e % per;
          uint32_t bits;
          if (kind == 0) { __half h = __float2half(v); bits = *reinterpret_cast<uint16_t*>(&h); }
          else bits = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
          regs[reg] |= bits << (sub * (32 / per));
        }
      };
      fill(a, av); fill(b, bv);
      CHECK(cudaMemcpy(d_a, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(d_b, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
      if (kind == 0) mma_f16<<<1, 32>>>(d_a, d_b, d_c); else mma_e4m3<<<1, 32>>>(d_a, d_b, d_c);
      CHECK(cudaGetLastError()); CHECK(cudaDeviceSynchronize());
      auto c = host(d_c, 32 * 4);
      printf("mma %s %d\n", kind == 0 ? "mma_m16n8k16_f16" : "mma_m16n8k32_e4m3", trial);
      for (int l = 0; l < 32; l++) {
        printf("A %d", l); for (int i = 0; i < 4 * per; i++) printf(" %g", av[l * 4 * per + i]); printf("\n");
        printf("B %d", l); for (int i = 0; i < 2 * per; i++) printf(" %g", bv[l * 2 * per + i]); printf("\n");
        printf("C %d", l); for (int i = 0; i < 4; i++) printf(" %g", c[l * 4 + i]); printf("\n");
      }
    }
  }
  cudaDeviceProp p; CHECK(cudaGetDeviceProperties(&p, 0));
  printf("# device %s sm_%d%d\n", p.name, p.major, p.minor);
  return 0;
}
