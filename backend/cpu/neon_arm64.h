// NEON instructions that Go's arm64 assembler does not have, as WORD
// encodings (Arm ARM, Advanced SIMD "three same", "two-register misc",
// "vector x indexed element" and "across lanes" groups), on four float32
// lanes. Operands are register numbers, in Go's order: sources first,
// destination last (OP(m, n, d) is "OP Vd.4S, Vn.4S, Vm.4S"). Each
// encoding agrees with llvm-mc's for the mnemonic in its comment; the
// kernel tests run them (under qemu where no arm64 machine is at hand).

// FADD Vd.4S, Vn.4S, Vm.4S: d = n + m.
#define FADD4S(m, n, d) WORD $(0x4e20d400 | (m)<<16 | (n)<<5 | (d))

// FSUB Vd.4S, Vn.4S, Vm.4S: d = n - m.
#define FSUB4S(m, n, d) WORD $(0x4ea0d400 | (m)<<16 | (n)<<5 | (d))

// FMUL Vd.4S, Vn.4S, Vm.4S: d = n · m.
#define FMUL4S(m, n, d) WORD $(0x6e20dc00 | (m)<<16 | (n)<<5 | (d))

// FDIV Vd.4S, Vn.4S, Vm.4S: d = n / m.
#define FDIV4S(m, n, d) WORD $(0x6e20fc00 | (m)<<16 | (n)<<5 | (d))

// FMAX Vd.4S, Vn.4S, Vm.4S: d = max(n, m), NaN if either is.
#define FMAX4S(m, n, d) WORD $(0x4e20f400 | (m)<<16 | (n)<<5 | (d))

// FCMGT Vd.4S, Vn.4S, Vm.4S: d = all ones where n > m, else 0 (0 for NaN).
#define FCMGT4S(m, n, d) WORD $(0x6ea0e400 | (m)<<16 | (n)<<5 | (d))

// FADDP Vd.4S, Vn.4S, Vm.4S: d = (n0+n1, n2+n3, m0+m1, m2+m3).
#define FADDP4S(m, n, d) WORD $(0x6e20d400 | (m)<<16 | (n)<<5 | (d))

// FABS Vd.4S, Vn.4S: d = |n| (the sign bits cleared).
#define FABS4S(n, d) WORD $(0x4ea0f800 | (n)<<5 | (d))

// FRINTA Vd.4S, Vn.4S: d = n rounded to an integer, halves away from zero.
#define FRINTA4S(n, d) WORD $(0x6e218800 | (n)<<5 | (d))

// FCVTZS Vd.4S, Vn.4S: d = n converted to int32, toward zero.
#define FCVTZS4S(n, d) WORD $(0x4ea1b800 | (n)<<5 | (d))

// FMAXV Sd, Vn.4S: d = the largest of n's four lanes, NaN if one is.
#define FMAXV4S(n, d) WORD $(0x6e30f800 | (n)<<5 | (d))

// FMLA Vd.4S, Vn.4S, Vm.S[i]: d += n · lane i of m (one rounding).
#define FMLA4S_E(m, i, n, d) WORD $(0x4f801000 | ((i)&1)<<21 | (m)<<16 | ((i)>>1)<<11 | (n)<<5 | (d))

// FMUL Vd.4S, Vn.4S, Vm.S[i]: d = n · lane i of m.
#define FMUL4S_E(m, i, n, d) WORD $(0x4f809000 | ((i)&1)<<21 | (m)<<16 | ((i)>>1)<<11 | (n)<<5 | (d))
