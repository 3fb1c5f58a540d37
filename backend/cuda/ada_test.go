//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
	"github.com/fp8attn/fp8attn/wmma"
)

// TestAdaVImage: the V image the pack kernel writes for the Ada kernel is
// the layout of the Go model (per KV head, per tile of BlockN keys, D rows
// of BlockN bytes, the keys of each 16-key group in wmma.SigmaKey order,
// zeros past sk), byte for byte; and the kernel's output depends on it: the
// same image written in plain key order (a doctored layout) must move the
// output more than 4x farther (relative L2) from the CPU FP8 path than the
// packed one, which passes the tier.
func TestAdaVImage(t *testing.T) {
	if !runnable(t, tiles.AdaStage) {
		t.Skip("no FP8 mma.sync")
	}
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 10))
	for _, s := range []backend.Shape{{B: 2, Hq: 4, Hkv: 2, Sq: 50, Sk: 77, D: 64}, {B: 1, Hq: 1, Hkv: 1, Sq: 33, Sk: 40, D: 256}} {
		t.Run(fmt.Sprintf("D%d", s.D), func(t *testing.T) {
			in := sdpatest.RandomInputs(rng, s, 1)
			ref, _, _ := sdpatest.NewProblem(s, in, 0.125, backend.NoMask, backend.FP8E4M3)
			if err := cpu.New(0).Attention(ref); err != nil {
				t.Fatal(err)
			}
			p, _, _ := sdpatest.NewProblem(s, in, 0.125, backend.NoMask, backend.FP8E4M3)
			r, err := d.Upload(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Free()
			run := func() []float32 {
				if err := r.Poison(); err != nil {
					t.Fatal(err)
				}
				if err := r.Run(tiles.AdaStage); err != nil {
					t.Fatal(err)
				}
				out := make([]float32, len(p.Out))
				if err := r.Download(out, nil); err != nil {
					t.Fatal(err)
				}
				return out
			}
			tol := tolerance(tiles.AdaStage)(p)
			good := sdpatest.Compare(run(), ref.Out, tol)
			if good.Beyond > 0 {
				t.Fatalf("%d elements beyond tolerance", good.Beyond)
			}
			cfg, _ := tiles.Ada(s.D)
			bn, tilesPerHead := cfg.BlockN, tiles.Pad(s.Sk, cfg.BlockN)/cfg.BlockN
			want := make([]byte, s.B*s.Hkv*cfg.VImageBytes(s.Sk))
			plain := make([]byte, len(want))
			for h := range s.B * s.Hkv {
				for tile := range tilesPerHead {
					for col := range s.D {
						for q := range bn {
							at := (h*tilesPerHead+tile)*s.D*bn + col*bn + q
							sigma := tile*bn + 16*(q/16) + wmma.SigmaKey(q%16)
							if key := sigma; key < s.Sk {
								want[at] = byte(p.V8[(h*s.Sk+key)*s.D+col])
							}
							if key := tile*bn + q; key < s.Sk {
								plain[at] = byte(p.V8[(h*s.Sk+key)*s.D+col])
							}
						}
					}
				}
			}
			img := cu.DevicePtr(r.images[tiles.AdaStage][2])
			got := make([]byte, len(want))
			err = d.do(func() error {
				if err := d.stream.Synchronize(); err != nil {
					return err
				}
				return cu.MemcpyDtoH(unsafe.Pointer(&got[0]), img, int64(len(got)))
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("V image byte %d is %#x, the model says %#x", i, got[i], want[i])
				}
			}
			// The doctored image: keys in plain order.
			if err := d.do(func() error { return cu.MemcpyHtoD(img, unsafe.Pointer(&plain[0]), int64(len(plain))) }); err != nil {
				t.Fatal(err)
			}
			// The tier is a worst case, loose enough to let a permutation
			// within 16-key groups through; the relative L2 distance to the
			// CPU path is the sharp check: rounding P and the tensor cores'
			// sums leave a few percent, a wrong pairing of weights and values
			// changes the output itself.
			bad := sdpatest.Compare(run(), ref.Out, tol)
			t.Logf("relative L2 against the CPU FP8 path: image %.3g, plain key order %.3g", good.RelL2, bad.RelL2)
			if !(bad.RelL2 > 4*good.RelL2) {
				t.Errorf("the output with V in plain key order is %.3g from the CPU path, the right image's %.3g: the check cannot see the permutation", bad.RelL2, good.RelL2)
			}
		})
	}
}

// TestAmpereModule runs the compute_80 build (attention_compute_80.ptx and
// paged_compute_80.ptx, what sm_80-sm_88 GPUs load) on the GPU at hand:
// stages 1-6 and the paged cache pass the conformance suites, and the FP8
// mma.sync stages (7, 8, 10) and the Hopper kernel answer ErrUnsupported.
func TestAmpereModule(t *testing.T) {
	defer reopenWith(t, &forceCompute80)()
	p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 4, Sk: 4, D: 64}, Precision: backend.FP8E4M3}
	for _, st := range []int{7, 8, tiles.HopperStage, tiles.AdaStage} {
		if err := testBackend(st).Supports(p); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("stage %d on the compute_80 build: %v, want ErrUnsupported", st, err)
		}
	}
	if got := runnableStages(t); len(got) != 6 {
		t.Fatalf("the compute_80 build runs stages %v, want 1-6", got)
	}
	for st := 1; st <= 6; st++ {
		be := testBackend(st)
		t.Run(be.Name(), func(t *testing.T) {
			sdpatest.Run(t, sdpatest.Config{Backend: be, Precision: backend.FP8E4M3, Tol: tolerance(st), LSETol: lseTolerance(st),
				LoadedKeys: loadedKeys(st)})
		})
	}
	t.Run("cuda", func(t *testing.T) {
		sdpatest.Run(t, sdpatest.Config{Backend: testBackend(0), Precision: backend.FP8E4M3, Tol: sdpatest.F16PTolerance,
			LoadedKeys: func(s backend.Shape, m backend.Mask, i int) int {
				return loadedKeys(bestStage(s, 80))(s, m, i)
			}})
	})
	t.Run("paged", func(t *testing.T) { sdpatest.RunPaged(t, testBackend(0)) })
}
