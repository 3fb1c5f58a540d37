package cuda

import "github.com/fp8attn/fp8attn/backend"

// Params mirrors struct Params in kernels/attention.cu field for field; the
// kernels receive it by value (one __grid_constant__ parameter). Pointers
// are device addresses.
type Params struct {
	Q, K, V                                  uint64
	QScale, KScale, VScale                   uint64
	Out, LSE                                 uint64 // LSE may be 0
	QBatchStride, QHeadStride, QRowStride    int64
	KVBatchStride, KVHeadStride, KVRowStride int64
	OBatchStride, OHeadStride, ORowStride    int64
	B, Hq, Hkv, Sq, Sk, D, Group             int64
	Mask                                     int64
	ScaleLog2                                float32
	pad                                      float32
}

// ParamsSize is sizeof(Params) in attention.cu.
const ParamsSize = 208

// DeviceBuffers are the device addresses of one problem's tensors.
type DeviceBuffers struct {
	Q, K, V, QScale, KScale, VScale, Out, LSE uint64
}

// NewParams fills the parameter block for a validated problem whose tensors
// sit, densely packed [B][H][S][D], at the given device addresses.
func NewParams(p *backend.Problem, buf DeviceBuffers) Params {
	s := p.Shape
	d := int64(s.D)
	return Params{
		Q: buf.Q, K: buf.K, V: buf.V, QScale: buf.QScale, KScale: buf.KScale, VScale: buf.VScale,
		Out: buf.Out, LSE: buf.LSE,
		QBatchStride: int64(s.Hq*s.Sq) * d, QHeadStride: int64(s.Sq) * d, QRowStride: d,
		KVBatchStride: int64(s.Hkv*s.Sk) * d, KVHeadStride: int64(s.Sk) * d, KVRowStride: d,
		OBatchStride: int64(s.Hq*s.Sq) * d, OHeadStride: int64(s.Sq) * d, ORowStride: d,
		B: int64(s.B), Hq: int64(s.Hq), Hkv: int64(s.Hkv), Sq: int64(s.Sq), Sk: int64(s.Sk), D: d,
		Group: int64(s.Group()), Mask: int64(p.Mask),
		ScaleLog2: p.Scale * 1.4426950408889634,
	}
}
