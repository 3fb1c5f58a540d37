package sdpatest

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/backend"
)

// copyPage is CopyPage on the model.
func (m *pagedModel) copyPage(dst, src int) {
	H := m.cfg.KVHeads
	for h := range H {
		copy(m.k[dst*H+h], m.k[src*H+h])
		copy(m.v[dst*H+h], m.v[src*H+h])
		m.ks[dst*H+h], m.vs[dst*H+h] = m.ks[src*H+h], m.vs[src*H+h]
	}
}

// runPagedFork drives a storage as a cache's Fork and Truncate do (package
// sdpa): sequence 1 shares sequence 0's full pages and gets a copy
// (CopyPage) of its partial last page; both then grow, sequence 1 with
// values twenty times larger, so that its copied page's scales grow;
// sequence 1 is cut back into a page it still shares, which is copied
// before a token is written to it (copy-on-write), and grows again with
// the larger values. The queries are scaled by 1/20, so that keys of both
// magnitudes keep weights that matter. Both sequences are then held to the model: a storage that
// wrote through to a shared page, or whose copy missed codes or scales,
// fails sequence 0 or 1.
func runPagedFork(nb backend.PagedBackend, rng *rand.Rand) error {
	const P = 64
	c := PagedCase{Name: "fork-truncate-copy", KVHeads: 2, Group: 2, D: 64, PageSize: P, Sq: 3,
		Mask: backend.CausalLowerRight, Layout: backend.BHSD}
	cfg := backend.PagedConfig{KVHeads: c.KVHeads, HeadDim: c.D, PageSize: P, Pages: 12}
	kv, err := nb.NewPagedKV(cfg)
	if errors.Is(err, backend.ErrUnsupported) {
		return errPagedSkip
	}
	if err != nil {
		return err
	}
	defer kv.Close()
	r := &pagedRun{c: c, kv: kv, model: newPagedModel(cfg), pages: make([][]int32, 2)}
	free := rng.Perm(cfg.Pages)
	lens := []int{0, 0}
	// grow appends n tokens to sequence s, taking fresh pages as it needs
	// them, with values of magnitude mag.
	grow := func(s, n int, mag float32) error {
		a := &backend.PagedAppend{B: 1, N: n, Layout: c.Layout,
			K: randRows(rng, n*c.KVHeads*c.D), V: randRows(rng, n*c.KVHeads*c.D)}
		for i := range a.K {
			a.K[i] *= mag
			a.V[i] *= mag
		}
		for t := lens[s]; t < lens[s]+n; t++ {
			if t/P == len(r.pages[s]) {
				r.pages[s] = append(r.pages[s], int32(free[0]))
				free = free[1:]
			}
			a.Page, a.Slot = append(a.Page, r.pages[s][t/P]), append(a.Slot, int32(t%P))
		}
		if err := kv.Append(a); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		r.model.append(a)
		lens[s] += n
		return nil
	}
	// own gives sequence s a copy of its page i.
	own := func(s, i int) error {
		dst := int32(free[0])
		free = free[1:]
		if err := kv.CopyPage(int(dst), int(r.pages[s][i])); err != nil {
			return fmt.Errorf("CopyPage: %w", err)
		}
		r.model.copyPage(int(dst), int(r.pages[s][i]))
		r.pages[s][i] = dst
		return nil
	}
	if err := grow(0, 150, 1); err != nil { // pages 0, 1 full, page 2 holds 22 tokens
		return err
	}
	r.pages[1], lens[1] = append([]int32(nil), r.pages[0]...), lens[0] // the fork
	if err := own(1, 2); err != nil {
		return err
	}
	if err := errors.Join(grow(0, 30, 1), grow(1, 70, 20)); err != nil {
		return err
	}
	r.pages[1], lens[1] = r.pages[1][:2], 100 // truncated into shared page 1
	if err := own(1, 1); err != nil {
		return err
	}
	if err := grow(1, 40, 20); err != nil {
		return err
	}
	if r.pages[0][1] == r.pages[1][1] || r.pages[0][2] == r.pages[1][2] {
		return fmt.Errorf("the scenario shares a page it writes: %v and %v", r.pages[0], r.pages[1])
	}
	r.c.Lens = lens
	r.finish(rng)
	for i := range r.p.Q {
		r.p.Q[i] /= 20
	}
	if err := r.p.Validate(cfg); err != nil {
		return err
	}
	if err := kv.Attention(r.p); err != nil {
		return err
	}
	if err := r.check(); err != nil {
		return err
	}
	for _, bad := range [][2]int{{3, 3}, {-1, 0}, {0, cfg.Pages}} {
		if err := kv.CopyPage(bad[0], bad[1]); !errors.Is(err, backend.ErrInvalid) {
			return fmt.Errorf("CopyPage(%d, %d): %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
	return nil
}
