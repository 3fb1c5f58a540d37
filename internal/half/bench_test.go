package half

import "testing"

// BenchmarkDecode: the F16C kernel (where the CPU has it) and the Go loop
// on 128 KB of float16, a pipe piece's worth of a host-slice call's
// output, values of about 1 in magnitude (MB/s of float16 read).
func BenchmarkDecode(b *testing.B) {
	src := make([]byte, 128<<10)
	for i := 0; i < len(src); i += 2 { // outputs of about 1 in magnitude, both signs
		h := FromFloat32(float32(i%1000-500) / 300)
		src[i], src[i+1] = byte(h), byte(h>>8)
	}
	dst := make([]float32, len(src)/2)
	for _, c := range []struct {
		name string
		fn   func([]float32, []byte, float32)
	}{{"Decode", Decode}, {"Go", decodeGo}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				c.fn(dst, src, 0.25)
			}
		})
	}
}
