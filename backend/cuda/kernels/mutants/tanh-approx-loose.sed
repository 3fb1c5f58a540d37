# module: testkernels.cu
# tests: TestTanhApprox
# The softcap's tanh a factor 1 + 2^-10 too large, twice the relative
# error the tolerances allow it: TestTanhApprox must see it.
/^__device__ __forceinline__ float tanh_approx(float x) {$/,/^}$/ s/^  return y;$/  return y * (1.f + 0x1p-10f);/
