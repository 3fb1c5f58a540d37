// Package poison holds the bit pattern that tests and the GPU backend's
// test hooks write into outputs before a kernel runs, so that an element
// the kernel never writes cannot pass a check on an old value.
package poison

// Bits is the float32 bit pattern: a quiet NaN with a payload no
// arithmetic produces.
const Bits = 0x7FC0BAD0

// HalfPair is two float16 quiet NaNs with a payload no conversion
// produces, as one 32-bit word: the poison of a float16 output.
const HalfPair = 0x7EAD7EAD
