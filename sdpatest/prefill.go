package sdpatest

import (
	"fmt"

	"github.com/fp8attn/fp8attn/backend"
)

// PrefillShape is one row of the GPU prefill table of docs/BENCHMARKS.md:
// a shape, its mask and the layout of Q, K, V and the output.
type PrefillShape struct {
	Shape  backend.Shape
	Mask   backend.Mask
	Layout backend.Layout
}

// Spec spells p as cmd/sdpabench and the peers' scripts in bench/ take it:
// BxHxSqxSkxD (BxHqxHkvxSqxSkxD where heads are grouped), then ":causal" or
// ":causal-lr" for a mask and ":bshd" for the BSHD layout.
func (p PrefillShape) Spec() string {
	s := p.Shape
	spec := fmt.Sprintf("%dx%dx%dx%dx%d", s.B, s.Hq, s.Sq, s.Sk, s.D)
	if s.Hkv != s.Hq {
		spec = fmt.Sprintf("%dx%dx%dx%dx%dx%d", s.B, s.Hq, s.Hkv, s.Sq, s.Sk, s.D)
	}
	if p.Mask != backend.NoMask {
		spec += ":" + p.Mask.String()
	}
	if p.Layout != backend.BHSD {
		spec += ":" + p.Layout.String()
	}
	return spec
}

// PrefillShapes are the GPU prefill table's rows, in its order: the
// mission and long shapes (timed in µs), then the large ones (TFLOP/s).
// The causal row has Sq = Sk, where the upper-left and lower-right masks
// are one mask (the peers' causal is upper-left).
var PrefillShapes = []PrefillShape{
	{Shape: backend.Shape{B: 2, Hq: 8, Hkv: 8, Sq: 256, Sk: 256, D: 64}},
	{Shape: backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 2048, Sk: 2048, D: 64}},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 64}},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 96}},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, Layout: backend.BSHD},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128}},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, Mask: backend.CausalUpperLeft},
	{Shape: backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 256}},
	{Shape: backend.Shape{B: 2, Hq: 16, Hkv: 16, Sq: 16384, Sk: 16384, D: 128}},
}
