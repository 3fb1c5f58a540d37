// NEON instructions that Go's arm64 assembler does not have, as WORD
// encodings (Arm ARM, "Advanced SIMD two-register miscellaneous" and
// "three same" groups). Operands are register numbers, sources first,
// destination last, as in fp8/neon_arm64.h.

// FCVTL Vd.4S, Vn.4H: the four float16 of n's lower half to float32,
// exactly (a NaN quieted, its payload kept).
#define FCVTL4S(n, d) WORD $(0x0e217800 | (n)<<5 | (d))

// FCVTL2 Vd.4S, Vn.8H: the same for n's upper half.
#define FCVTL24S(n, d) WORD $(0x4e217800 | (n)<<5 | (d))

// FMUL Vd.4S, Vn.4S, Vm.4S: d = n · m.
#define FMUL4S(m, n, d) WORD $(0x6e20dc00 | (m)<<16 | (n)<<5 | (d))
