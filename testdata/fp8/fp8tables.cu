// fp8tables.cu: run-length tables of cuda_fp8.h's __nv_cvt_float_to_fp8 over
// all 2^32 float32 bit patterns, computed on the device (sm_89+ takes the
// hardware cvt.rn.satfinite path for __NV_SATFINITE) and on the host (the
// header's software path), plus the fp8 -> half -> float decode tables.
//
// Build and run (see gen.sh):
//   nvcc -O2 -arch=sm_90 -Xcompiler -fopenmp fp8tables.cu -o fp8tables
//   ./fp8tables OUTDIR
//
// Output format (*.rle): one line per run, "START CODE" in hex: every input
// bit pattern from START up to the next line's START converts to CODE.
#include <cuda_fp8.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <vector>
#include <string>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

struct Kind { const char* name; __nv_saturation_t sat; __nv_fp8_interpretation_t fmt; };
static const Kind kinds[] = {
  {"e4m3_satfinite", __NV_SATFINITE, __NV_E4M3},
  {"e4m3_nosat", __NV_NOSAT, __NV_E4M3},
  {"e5m2_satfinite", __NV_SATFINITE, __NV_E5M2},
  {"e5m2_nosat", __NV_NOSAT, __NV_E5M2},
};

__global__ void convert(uint32_t base, uint8_t* out, int sat, int fmt) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  float x = __uint_as_float(base + i);
  out[i] = __nv_cvt_float_to_fp8(x, (__nv_saturation_t)sat, (__nv_fp8_interpretation_t)fmt);
}


struct RLE {
  FILE* f; int last = -1; uint64_t runs = 0;
  explicit RLE(const std::string& path) { f = fopen(path.c_str(), "w"); if (!f) { perror(path.c_str()); exit(1); } }
  void add(uint32_t start, const uint8_t* v, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) if (v[i] != last) { fprintf(f, "%08x %02x\n", start + i, v[i]); last = v[i]; runs++; }
  }
  ~RLE() { fclose(f); }
};

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  const uint32_t chunk = 1u << 28;
  uint8_t* d; CHECK(cudaMalloc(&d, chunk));
  std::vector<uint8_t> h(chunk), hh(chunk);
  for (const Kind& k : kinds) {
    RLE dev(dir + "/cuda_device_" + k.name + ".rle"), host(dir + "/cuda_host_" + k.name + ".rle");
    uint64_t diff = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += chunk) {
      convert<<<chunk / 256, 256>>>((uint32_t)base, d, k.sat, k.fmt);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpy(h.data(), d, chunk, cudaMemcpyDeviceToHost));
      #pragma omp parallel for schedule(static) reduction(+:diff)
      for (int64_t i = 0; i < (int64_t)chunk; i++) {
        uint32_t u = (uint32_t)base + (uint32_t)i; float x; memcpy(&x, &u, 4);
        hh[i] = __nv_cvt_float_to_fp8(x, k.sat, k.fmt);
        diff += hh[i] != h[i];
      }
      dev.add((uint32_t)base, h.data(), chunk);
      host.add((uint32_t)base, hh.data(), chunk);
    }
    printf("%-16s device runs %llu, host runs %llu, host!=device on %llu inputs\n", k.name,
           (unsigned long long)dev.runs, (unsigned long long)host.runs, (unsigned long long)diff);
  }
  // Decode tables: fp8 -> half (the header's conversion) -> float.
  for (int fmt = 0; fmt < 2; fmt++) {
    std::string p = dir + (fmt == 0 ? "/cuda_decode_e4m3.txt" : "/cuda_decode_e5m2.txt");
    FILE* f = fopen(p.c_str(), "w");
    for (int c = 0; c < 256; c++) {
      __half_raw hr = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, fmt == 0 ? __NV_E4M3 : __NV_E5M2);
      float x = __half2float(__half(hr)); uint32_t u; memcpy(&u, &x, 4);
      fprintf(f, "%02x %08x\n", c, u);
    }
    fclose(f);
  }
  CHECK(cudaFree(d));
  return 0;
}
