package sdpa_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
)

// fuzzSizes are the sizes a fuzzed byte picks from: small ones that run,
// and zeros, negatives and products that overflow or pass the bound.
var fuzzSizes = [...]int{1, 2, 3, 4, 16, 64, 0, -1, 1 << 20, 1 << 31, math.MaxInt, math.MinInt, 17, 32, 8, 1}

// fuzzState is what FuzzDeviceOps's operations act on.
type fuzzState struct {
	dev     *sdpa.Device
	tensors []*sdpa.DeviceTensor
	caches  []*sdpa.KVCache
	seqs    []sdpa.SeqID
	graphs  []*sdpa.Graph
	rng     *rand.Rand
	// limitSet: the operation called SetMemoryLimit, itself or inside a
	// captured function; the fuzz bound is restored after it.
	limitSet bool
}

func (s *fuzzState) tensor(b byte) *sdpa.DeviceTensor {
	if len(s.tensors) == 0 || b == 255 {
		return nil
	}
	return s.tensors[int(b)%len(s.tensors)]
}

func (s *fuzzState) cache(b byte) *sdpa.KVCache {
	if len(s.caches) == 0 {
		return nil
	}
	return s.caches[int(b)%len(s.caches)]
}

func (s *fuzzState) ids(b byte) []sdpa.SeqID {
	if len(s.seqs) == 0 {
		return nil
	}
	ids := []sdpa.SeqID{s.seqs[int(b)%len(s.seqs)]}
	if b&0x80 != 0 {
		ids = append(ids, s.seqs[int(b/3)%len(s.seqs)])
	}
	return ids
}

func (s *fuzzState) add(t *sdpa.DeviceTensor, err error) error {
	if err == nil {
		s.tensors = append(s.tensors, t)
	}
	return err
}

// op runs operation a with arguments p (8 bytes) and returns its error.
func (s *fuzzState) op(a byte, p []byte) error {
	size := func(i int) int { return fuzzSizes[p[i]%16] }
	opts := &sdpa.Options{Precision: sdpa.Precision(p[5] % 3), Mask: sdpa.Mask(p[6] % 4)}
	switch a % 16 {
	case 0:
		return s.add(s.dev.NewTensor(size(0), size(1), size(2), size(3), sdpa.Layout(p[4]%3)))
	case 1:
		b, h, n, d := 1+int(p[0]%2), 1+int(p[1]%3), 1+int(p[2]%8), 16
		return s.add(s.dev.Upload(randLayout(s.rng, b, h, n, d, sdpa.Layout(p[4]%2))))
	case 2:
		return s.tensor(p[0]).Free()
	case 3:
		return s.add(s.dev.Quantize(s.tensor(p[0])))
	case 4:
		return s.dev.Attention(s.tensor(p[0]), s.tensor(p[7]), s.tensor(p[1]), s.tensor(p[2]), s.tensor(p[3]), opts)
	case 5:
		c, err := s.dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: size(0), HeadDim: size(1), MaxTokens: size(2) * 64, PageSize: 64 * int(p[3]%3), MaxSeqLen: size(4)})
		if err == nil {
			s.caches = append(s.caches, c)
		}
		return err
	case 6:
		id, err := s.cache(p[0]).AddSequence()
		if err == nil {
			s.seqs = append(s.seqs, id)
		}
		return err
	case 7:
		return s.cache(p[0]).Drop(sdpa.SeqID(p[1] % 8))
	case 8:
		return s.cache(p[0]).Append(s.ids(p[1]), s.tensor(p[2]), s.tensor(p[3]))
	case 9:
		return s.cache(p[0]).Attention(s.tensor(p[1]), s.tensor(p[7]), s.tensor(p[2]), s.ids(p[3]), opts)
	case 10:
		inner := append(p[1:8:8], p[0]) // the captured operation's arguments
		g, err := s.dev.Capture(func() error { return s.op(p[0], inner) })
		if err == nil {
			s.graphs = append(s.graphs, g)
		}
		return err
	case 11:
		if len(s.graphs) == 0 {
			return (*sdpa.Graph)(nil).Replay()
		}
		return s.graphs[int(p[0])%len(s.graphs)].Replay()
	case 12:
		if len(s.graphs) == 0 {
			return nil
		}
		return s.graphs[int(p[0])%len(s.graphs)].Close()
	case 13:
		return s.cache(p[0]).Close()
	case 14:
		x := s.tensor(p[0])
		b, h, n, d := x.Dims()
		host := &sdpa.Tensor{Data: make([]float32, max(0, b*h*n*d)), B: b, H: h, S: n, D: d, Layout: x.Layout()}
		if p[1]&1 == 0 {
			return x.CopyFrom(host)
		}
		return x.Download(host)
	}
	s.limitSet = true
	return s.dev.SetMemoryLimit(int64(size(0)) << 10)
}

// FuzzDeviceOps runs a fuzzed sequence of device, cache and graph calls on
// a cpu device bounded to 256 KiB: no call panics, every error wraps one of
// the package's sentinels, the device never holds more than its bound, and
// once every graph is closed, tensor freed and cache closed it holds
// nothing.
func FuzzDeviceOps(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 255})
	f.Add([]byte{5, 1, 3, 1, 1, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 1, 1, 0, 0, 0, 0, 0, 10, 4, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 8, 8, 8, 8, 0, 0, 0, 0, 0, 9, 9, 9, 9, 0, 0, 0, 0})
	f.Add([]byte{10, 10, 1, 0, 0, 0, 0, 0, 0, 10, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		dev, err := sdpa.Open("cpu")
		if err != nil {
			t.Fatal(err)
		}
		const limit = 256 << 10
		if err := dev.SetMemoryLimit(limit); err != nil {
			t.Fatal(err)
		}
		s := &fuzzState{dev: dev, rng: rand.New(rand.NewPCG(uint64(len(prog)), 58))}
		for i := 0; i+9 <= len(prog) && i < 9*32; i += 9 {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("operation %d (%v) panicked: %v", i/9, prog[i:i+9], r)
					}
				}()
				err = s.op(prog[i], prog[i+1:i+9])
			}()
			if err != nil && !errors.Is(err, sdpa.ErrInvalid) && !errors.Is(err, sdpa.ErrUnsupported) &&
				!errors.Is(err, sdpa.ErrOutOfMemory) && !errors.Is(err, sdpa.ErrCacheFull) {
				t.Fatalf("operation %d (%v): %v wraps none of the package's errors", i/9, prog[i:i+9], err)
			}
			set := s.limitSet
			if set { // SetMemoryLimit, also inside a capture: back to the fuzz bound
				dev.SetMemoryLimit(limit)
				s.limitSet = false
			}
			if h := dev.MemoryHeld(); h > limit && !set {
				t.Fatalf("operation %d: the device holds %d bytes, its bound is %d", i/9, h, limit)
			}
		}
		for _, g := range s.graphs {
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range s.tensors {
			x.Free()
		}
		for _, c := range s.caches {
			c.Close()
		}
		if h := dev.MemoryHeld(); h != 0 {
			t.Fatalf("everything freed and closed, the device still holds %d bytes", h)
		}
	})
}
