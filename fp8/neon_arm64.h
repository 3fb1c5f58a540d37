// NEON instructions that Go's arm64 assembler does not have, as WORD
// encodings (Arm ARM, "Advanced SIMD three same" and "across lanes"
// groups), on four float32 or uint32 lanes. Operands are register numbers,
// in Go's order: sources first, destination last (OP(m, n, d) is
// "OP Vd.4S, Vn.4S, Vm.4S"). Each encoding agrees with llvm-mc's for the
// mnemonic in its comment; the routines' tests run them (under qemu where
// no arm64 machine is at hand).

// FDIV Vd.4S, Vn.4S, Vm.4S: d = n / m, IEEE division.
#define FDIV4S(m, n, d) WORD $(0x6e20fc00 | (m)<<16 | (n)<<5 | (d))

// FMUL Vd.4S, Vn.4S, Vm.4S: d = n · m.
#define FMUL4S(m, n, d) WORD $(0x6e20dc00 | (m)<<16 | (n)<<5 | (d))

// FADD Vd.4S, Vn.4S, Vm.4S: d = n + m.
#define FADD4S(m, n, d) WORD $(0x4e20d400 | (m)<<16 | (n)<<5 | (d))

// FSUB Vd.4S, Vn.4S, Vm.4S: d = n - m.
#define FSUB4S(m, n, d) WORD $(0x4ea0d400 | (m)<<16 | (n)<<5 | (d))

// FMAX Vd.4S, Vn.4S, Vm.4S: d = max(n, m), NaN if either is.
#define FMAX4S(m, n, d) WORD $(0x4e20f400 | (m)<<16 | (n)<<5 | (d))

// CMHI Vd.4S, Vn.4S, Vm.4S: d = all ones where n > m as unsigned, else 0.
#define CMHI4S(m, n, d) WORD $(0x6ea03400 | (m)<<16 | (n)<<5 | (d))

// UMAXV Sd, Vn.4S: d = the largest of n's four lanes as unsigned.
#define UMAXV4S(n, d) WORD $(0x6eb0a800 | (n)<<5 | (d))
