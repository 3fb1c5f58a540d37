package sdpa_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// forkModel is what a cache's sequences must hold: each sequence's tokens,
// a key and a value row of [KVHeads][HeadDim] each.
type forkModel map[sdpa.SeqID][]forkToken

type forkToken struct{ k, v []float32 }

// tensors returns tokens as [1][H][n][D] key and value tensors.
func tensors(tokens []forkToken, h, d int) (k, v *sdpa.Tensor) {
	n := len(tokens)
	k = &sdpa.Tensor{Data: make([]float32, h*n*d), B: 1, H: h, S: n, D: d}
	v = &sdpa.Tensor{Data: make([]float32, h*n*d), B: 1, H: h, S: n, D: d}
	for t, tok := range tokens {
		for hd := range h {
			copy(k.Data[(hd*n+t)*d:(hd*n+t+1)*d], tok.k[hd*d:(hd+1)*d])
			copy(v.Data[(hd*n+t)*d:(hd*n+t+1)*d], tok.v[hd*d:(hd+1)*d])
		}
	}
	return k, v
}

func randTokens(rng *rand.Rand, n, h, d int, mag float32) []forkToken {
	tokens := make([]forkToken, n)
	for t := range tokens {
		tokens[t] = forkToken{make([]float32, h*d), make([]float32, h*d)}
		for i := range tokens[t].k {
			tokens[t].k[i] = float32(rng.NormFloat64()) * mag
			tokens[t].v[i] = float32(rng.NormFloat64()) * mag
		}
	}
	return tokens
}

// forkEnv is a device and a cache under test with its model.
type forkEnv struct {
	t          *testing.T
	dev        *sdpa.Device
	c          *sdpa.KVCache
	cfg        sdpa.KVCacheConfig
	model      forkModel
	hq, sq     int
	q          *sdpa.DeviceTensor
	out, lse   *sdpa.DeviceTensor
	outH, lseH *sdpa.Tensor
}

func newForkEnv(t *testing.T, devName string, cfg sdpa.KVCacheConfig, rng *rand.Rand) *forkEnv {
	t.Helper()
	dev, err := sdpa.Open(devName)
	if err != nil {
		t.Skipf("device %q: %v", devName, err)
	}
	c, err := dev.NewKVCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &forkEnv{t: t, dev: dev, c: c, cfg: cfg, model: forkModel{}, hq: 2 * cfg.KVHeads, sq: 1}
	q := randTensor(rng, 1, e.hq, e.sq, cfg.HeadDim)
	e.q = upload(t, dev, q)
	e.out, _ = dev.NewTensor(1, e.hq, e.sq, cfg.HeadDim, sdpa.BHSD)
	e.lse, _ = dev.NewTensor(1, e.hq, e.sq, 1, sdpa.BHSD)
	e.outH = &sdpa.Tensor{Data: make([]float32, e.hq*e.sq*cfg.HeadDim), B: 1, H: e.hq, S: e.sq, D: cfg.HeadDim}
	e.lseH = &sdpa.Tensor{Data: make([]float32, e.hq*e.sq), B: 1, H: e.hq, S: e.sq, D: 1}
	return e
}

// appendTo appends tokens to the sequences ids (the same tokens to each).
func (e *forkEnv) appendTo(ids []sdpa.SeqID, tokens []forkToken) error {
	k, v := tensors(tokens, e.cfg.KVHeads, e.cfg.HeadDim)
	n := len(tokens)
	kb := &sdpa.Tensor{Data: slices.Repeat(k.Data, len(ids)), B: len(ids), H: k.H, S: n, D: k.D}
	vb := &sdpa.Tensor{Data: slices.Repeat(v.Data, len(ids)), B: len(ids), H: v.H, S: n, D: v.D}
	kd, vd := upload(e.t, e.dev, kb), upload(e.t, e.dev, vb)
	defer kd.Free()
	defer vd.Free()
	if err := e.c.Append(ids, kd, vd); err != nil {
		return err
	}
	for _, id := range ids {
		e.model[id] = append(e.model[id], tokens...)
	}
	return nil
}

// attend returns the output and LSE of the queries against sequence id of
// cache c, as bits.
func (e *forkEnv) attend(c *sdpa.KVCache, id sdpa.SeqID) []uint32 {
	e.t.Helper()
	if err := c.Attention(e.out, e.lse, e.q, []sdpa.SeqID{id}, &sdpa.Options{Mask: sdpa.CausalLowerRight}); err != nil {
		e.t.Fatal(err)
	}
	if err := errors.Join(e.out.Download(e.outH), e.lse.Download(e.lseH)); err != nil {
		e.t.Fatal(err)
	}
	var bits []uint32
	for _, x := range append(slices.Clone(e.outH.Data), e.lseH.Data...) {
		bits = append(bits, math.Float32bits(x))
	}
	return bits
}

// verify holds every sequence to the model: its length, and its attention
// bit for bit that of a fresh cache holding the model's tokens, appended at
// once (a page's codes depend only on its own tokens, in order, and the
// tokens here never grow a page's scale); and the pool's count of free
// pages to what the sequences can hold.
func (e *forkEnv) verify(rng *rand.Rand) {
	e.t.Helper()
	used := 0
	for id, tokens := range e.model {
		if n, err := e.c.Len(id); err != nil || n != len(tokens) {
			e.t.Fatalf("sequence %d: Len %d (%v), the model holds %d tokens", id, n, err, len(tokens))
		}
		used = max(used, (len(tokens)+e.cfg.PageSize-1)/e.cfg.PageSize)
		if len(tokens) < e.sq || rng.IntN(3) != 0 { // a third of them, at random
			continue
		}
		fresh, err := e.dev.NewKVCache(e.cfg)
		if err != nil {
			e.t.Fatal(err)
		}
		fid, _ := fresh.AddSequence()
		k, v := tensors(tokens, e.cfg.KVHeads, e.cfg.HeadDim)
		kd, vd := upload(e.t, e.dev, k), upload(e.t, e.dev, v)
		if err := fresh.Append([]sdpa.SeqID{fid}, kd, vd); err != nil {
			e.t.Fatal(err)
		}
		want := e.attend(fresh, fid)
		if got := e.attend(e.c, id); !slices.Equal(got, want) {
			e.t.Fatalf("sequence %d of %d tokens: attention differs from a fresh cache holding its tokens", id, len(tokens))
		}
		errs := errors.Join(fresh.Close(), kd.Free(), vd.Free())
		if errs != nil {
			e.t.Fatal(errs)
		}
	}
	u := e.c.Usage()
	if u.Pages-u.FreePages < used || u.Sequences != len(e.model) {
		e.t.Fatalf("%d of %d pages free, %d sequences; the longest sequence needs %d, the model has %d sequences", u.FreePages, u.Pages, u.Sequences, used, len(e.model))
	}
}

// testForkTruncate drives a cache on device devName through random
// AddSequence, Append (to one or two sequences at once), Fork, Truncate
// and Drop calls, holding it to the model after each, and then drops
// everything: every page must be back in the pool.
func testForkTruncate(t *testing.T, devName string) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	for i, c := range []struct {
		name           string
		heads, d, page int
		ops            int
	}{
		{"page64", 2, 64, 64, 120},
		{"page128-d128", 1, 128, 128, 80},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(sd, uint64(60+i)))
			e := newForkEnv(t, devName, sdpa.KVCacheConfig{KVHeads: c.heads, HeadDim: c.d, PageSize: c.page, MaxTokens: 400 * c.page}, rng)
			defer e.c.Close()
			var ids []sdpa.SeqID
			for range c.ops {
				pick := func() sdpa.SeqID { return ids[rng.IntN(len(ids))] }
				switch op := rng.IntN(10); {
				case len(ids) == 0 || op == 0:
					id, err := e.c.AddSequence()
					if err != nil {
						t.Fatal(err)
					}
					ids, e.model[id] = append(ids, id), nil
				case op <= 3:
					batch := []sdpa.SeqID{pick()}
					if other := pick(); other != batch[0] && rng.IntN(2) == 0 {
						batch = append(batch, other)
					}
					if err := e.appendTo(batch, randTokens(rng, 1+rng.IntN(c.page+30), c.heads, c.d, 1)); err != nil {
						t.Fatal(err)
					}
				case op <= 5:
					src := pick()
					id, err := e.c.Fork(src)
					if err != nil {
						t.Fatal(err)
					}
					ids, e.model[id] = append(ids, id), slices.Clone(e.model[src])
				case op <= 8:
					id := pick()
					n := rng.IntN(len(e.model[id]) + 1)
					if err := e.c.Truncate(id, n); err != nil {
						t.Fatal(err)
					}
					e.model[id] = e.model[id][:n]
				default:
					id := pick()
					if err := e.c.Drop(id); err != nil {
						t.Fatal(err)
					}
					ids = slices.DeleteFunc(ids, func(x sdpa.SeqID) bool { return x == id })
					delete(e.model, id)
				}
				e.verify(rng)
			}
			for _, id := range ids {
				if err := e.c.Drop(id); err != nil {
					t.Fatal(err)
				}
			}
			if u := e.c.Usage(); u.FreePages != u.Pages || u.Tokens != 0 {
				t.Fatalf("after dropping every sequence: %d of %d pages free, %d tokens", u.FreePages, u.Pages, u.Tokens)
			}
		})
	}
}

func TestKVCacheForkTruncate(t *testing.T) { testForkTruncate(t, "cpu") }

// testForkGrowth: a page's scale growth never reaches a page another
// sequence holds. Sequence b forks a (a partly filled last page) and
// receives values a thousand times larger, which grow its copied page's
// scales; a and b are cut back into a page they share and both then
// receive large values in one call (each gets its own copy); a's
// attention is unchanged by everything b does, and each sequence still
// equals a fresh cache holding its tokens, within the float32 tier (the
// grown pages were re-encoded). The pool ends where it began.
func testForkGrowth(t *testing.T, devName string) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 66))
	const h, d, P = 2, 64, 64
	e := newForkEnv(t, devName, sdpa.KVCacheConfig{KVHeads: h, HeadDim: d, PageSize: P, MaxTokens: 20 * P}, rng)
	defer e.c.Close()
	a, _ := e.c.AddSequence()
	e.model[a] = nil
	if err := e.appendTo([]sdpa.SeqID{a}, randTokens(rng, 150, h, d, 1)); err != nil {
		t.Fatal(err)
	}
	before := e.attend(e.c, a)
	b, err := e.c.Fork(a)
	if err != nil {
		t.Fatal(err)
	}
	e.model[b] = slices.Clone(e.model[a])
	if err := e.appendTo([]sdpa.SeqID{b}, randTokens(rng, 20, h, d, 1e3)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.attend(e.c, a), before) {
		t.Fatal("appending to a fork changed the sequence it forked")
	}
	for _, id := range []sdpa.SeqID{a, b} {
		if err := e.c.Truncate(id, 100); err != nil { // into page 1, which both hold
			t.Fatal(err)
		}
		e.model[id] = e.model[id][:100]
	}
	free := e.c.Usage().FreePages
	if err := e.appendTo([]sdpa.SeqID{b, a}, randTokens(rng, 10, h, d, 1e3)); err != nil {
		t.Fatal(err)
	}
	if got := e.c.Usage().FreePages; got != free-1 { // two copies taken, the shared page returned
		t.Fatalf("%d pages free after both sequences copied their shared page, want %d", got, free-1)
	}
	e.verify(rand.New(rand.NewPCG(0, 0))) // lengths and page counts
	for _, id := range []sdpa.SeqID{a, b} {
		fresh, _ := e.dev.NewKVCache(e.cfg)
		fid, _ := fresh.AddSequence()
		k, v := tensors(e.model[id], h, d)
		if err := fresh.Append([]sdpa.SeqID{fid}, upload(t, e.dev, k), upload(t, e.dev, v)); err != nil {
			t.Fatal(err)
		}
		want, got := e.attend(fresh, fid), e.attend(e.c, id)
		for i := range got {
			g, w := math.Float32frombits(got[i]), math.Float32frombits(want[i])
			if math.Abs(float64(g-w)) > 1e-3*(1+math.Abs(float64(w))) || g != g {
				t.Fatalf("sequence %d: element %d is %g, a fresh cache gives %g", id, i, g, w)
			}
		}
		fresh.Close()
	}
	for _, id := range []sdpa.SeqID{a, b} {
		if err := e.c.Drop(id); err != nil {
			t.Fatal(err)
		}
	}
	if u := e.c.Usage(); u.FreePages != u.Pages {
		t.Fatalf("%d of %d pages free after dropping both", u.FreePages, u.Pages)
	}
}

func TestKVCacheForkGrowth(t *testing.T) { testForkGrowth(t, "cpu") }

// TestKVCacheForkTruncateErrors: nil and closed caches, unknown
// sequences, lengths out of range and a full pool are errors that change
// nothing.
func TestKVCacheForkTruncateErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 67))
	var nilCache *sdpa.KVCache
	if _, err := nilCache.Fork(0); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("nil Fork: %v", err)
	}
	if err := nilCache.Truncate(0, 0); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("nil Truncate: %v", err)
	}
	e := newForkEnv(t, "cpu", sdpa.KVCacheConfig{KVHeads: 1, HeadDim: 64, PageSize: 64, MaxTokens: 3 * 64}, rng)
	a, _ := e.c.AddSequence()
	e.model[a] = nil
	if err := e.appendTo([]sdpa.SeqID{a}, randTokens(rng, 130, 1, 64, 1)); err != nil { // all three pages
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Fork of an unknown sequence", func() error { _, err := e.c.Fork(a + 7); return err }(), sdpa.ErrInvalid},
		{"Truncate of an unknown sequence", e.c.Truncate(a+7, 0), sdpa.ErrInvalid},
		{"Truncate to -1", e.c.Truncate(a, -1), sdpa.ErrInvalid},
		{"Truncate past the end", e.c.Truncate(a, 131), sdpa.ErrInvalid},
		{"Fork of a partly filled page, no page free", func() error { _, err := e.c.Fork(a); return err }(), sdpa.ErrCacheFull},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	e.verify(rng)
	if u := e.c.Usage(); u.Sequences != 1 || u.FreePages != 0 {
		t.Fatalf("the errors changed the cache: %+v", u)
	}
	// A shared partly filled page needs a copy before an append: none is
	// free, so the append fails and changes nothing.
	if err := e.c.Truncate(a, 128); err != nil { // page 2 back to the pool
		t.Fatal(err)
	}
	e.model[a] = e.model[a][:128]
	b, err := e.c.Fork(a) // full pages only: shared, no copy
	if err != nil {
		t.Fatal(err)
	}
	e.model[b] = slices.Clone(e.model[a])
	for _, id := range []sdpa.SeqID{a, b} {
		if err := e.c.Truncate(id, 100); err != nil {
			t.Fatal(err)
		}
		e.model[id] = e.model[id][:100]
	}
	if err := e.appendTo([]sdpa.SeqID{a, b}, randTokens(rng, 1, 1, 64, 1)); !errors.Is(err, sdpa.ErrCacheFull) {
		t.Fatalf("two copies with one page free: %v, want ErrCacheFull", err)
	}
	e.verify(rng)
	if err := e.appendTo([]sdpa.SeqID{a}, randTokens(rng, 1, 1, 64, 1)); err != nil { // one copy fits
		t.Fatal(err)
	}
	e.verify(rng)
	var ferr, terr error
	g, _ := e.dev.Capture(func() error {
		_, ferr = e.c.Fork(a)
		terr = e.c.Truncate(a, 1)
		return nil
	})
	if !errors.Is(ferr, sdpa.ErrUnsupported) || !errors.Is(terr, sdpa.ErrUnsupported) {
		t.Errorf("inside a capture: Fork %v, Truncate %v; want ErrUnsupported", ferr, terr)
	}
	if g != nil {
		g.Close()
	}
	e.verify(rng)
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Fork(a); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("Fork on a closed cache: %v", err)
	}
	if err := e.c.Truncate(a, 0); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("Truncate on a closed cache: %v", err)
	}
}
