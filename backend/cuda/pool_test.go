//go:build cuda

package cuda

import (
	"errors"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
)

// TestMemoryLimit: the device reports the memory it holds, and a bound on
// it makes allocations fail with ErrOutOfMemory once idle pooled buffers
// are released; freeing brings allocations back; a paged cache counts.
func TestMemoryLimit(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.SetMemoryLimit(0)
	// What earlier calls left in the pool goes first: a limit trims it, so
	// pooled bytes counted in held0 would make room under the limit.
	if err := errors.Join(d.do(func() error { return d.stream.Synchronize() }), d.SetMemoryLimit(1)); err != nil {
		t.Fatal(err)
	}
	held0 := d.MemoryHeld()
	if held0 <= 0 {
		t.Fatalf("an open device holds %d bytes", held0)
	}
	limit := held0 + 64<<20
	if err := d.SetMemoryLimit(limit); err != nil {
		t.Fatal(err)
	}
	var bufs []*buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	for range 1000 {
		b, err := d.Alloc(8 << 20)
		if err != nil {
			if !errors.Is(err, backend.ErrOutOfMemory) {
				t.Fatalf("allocation past the limit: %v, want ErrOutOfMemory", err)
			}
			break
		}
		bufs = append(bufs, b)
	}
	if n := len(bufs); n < 8 || n >= 1000 {
		t.Fatalf("%d buffers of 8 MB under a limit 64 MB above what was held", n)
	}
	if h := d.MemoryHeld(); h > limit {
		t.Errorf("held %d above the limit %d", h, limit)
	}
	for _, b := range bufs {
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
	bufs = nil
	if err := d.do(func() error { return d.stream.Synchronize() }); err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(8 << 20)
	if err != nil {
		t.Fatalf("allocation after freeing: %v", err)
	}
	bufs = append(bufs, b)
	// A paged cache's pages count, and one too large for the bound fails.
	be := testBackend(0)
	kv, err := be.NewPagedKV(backend.PagedConfig{KVHeads: 8, HeadDim: 128, PageSize: 32, Pages: 4096})
	if !errors.Is(err, backend.ErrOutOfMemory) {
		if err == nil {
			kv.Close()
		}
		t.Errorf("a 270 MB cache under a 64 MB margin: %v, want ErrOutOfMemory", err)
	}
	if err := d.SetMemoryLimit(0); err != nil {
		t.Fatal(err)
	}
	before := d.MemoryHeld()
	kv, err = be.NewPagedKV(backend.PagedConfig{KVHeads: 8, HeadDim: 128, PageSize: 32, Pages: 64})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.MemoryHeld() - before; got != kv.Bytes() {
		t.Errorf("a cache of %d bytes raised the held memory by %d", kv.Bytes(), got)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d.MemoryHeld(); got != before {
		t.Errorf("held %d after closing the cache, %d before it", got, before)
	}
}

// TestDeviceMemoryErrors: the exported functions over device buffers answer
// nil, freed, foreign-sized and inconsistent operands with errors wrapping
// ErrInvalid (or ErrUnsupported), never a panic.
func TestDeviceMemoryErrors(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	be := testBackend(0)
	small, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	freed, _ := d.Alloc(64)
	freed.Free()
	var nilBuf *buffer
	ok := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 4, Sk: 4, D: 64}, Scale: 0.125}
	zeroHeads := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 2, Hkv: 0, Sq: 4, Sk: 4, D: 64}, Scale: 0.125}
	six := [6]backend.Buffer{small, small, small, small, small, small}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Alloc 0", func() error { _, err := d.Alloc(0); return err }},
		{"Upload nil", func() error { _, err := d.Upload(nil); return err }},
		{"Write nil buffer", func() error { return nilBuf.Write([]byte{1}) }},
		{"Read freed", func() error { return freed.Read(make([]byte, 4)) }},
		{"Write too much", func() error { return small.Write(make([]byte, 65)) }},
		{"Quantize small", func() error { return d.Quantize(small, small, small, tensorShape{1, 1, 4, 64, backend.BHSD}) }},
		{"Quantize nil", func() error { return d.Quantize(nil, small, small, tensorShape{1, 1, 1, 4, backend.BHSD}) }},
		{"Quantize bad shape", func() error { return d.Quantize(small, small, small, tensorShape{1, 0, 1, 4, backend.BHSD}) }},
		{"NewResident nil", func() error { _, err := d.NewResident(nil, small, small, small, small, small, small); return err }},
		{"NewResident zero heads", func() error {
			_, err := d.NewResident(zeroHeads, small, small, small, small, small, small)
			return err
		}},
		{"NewResident small buffers", func() error { _, err := d.NewResident(ok, small, small, small, small, small, small); return err }},
		{"AttentionOn nil", func() error { return be.AttentionOn(nil, small, nil, six) }},
		{"AttentionOn small", func() error { return be.AttentionOn(ok, small, nil, six) }},
		{"Condition nil", func() error { return be.Condition(nil, small, small, small, small, nil, nil, false, 64) }},
		{"Condition zero heads", func() error { return be.Condition(zeroHeads, small, small, small, small, nil, nil, true, 64) }},
		{"CorrectLSE nil", func() error { return be.CorrectLSE(nil, small, small, small) }},
		{"CorrectLSE zero heads", func() error { return be.CorrectLSE(zeroHeads, small, small, small) }},
	} {
		err := c.call()
		if !errors.Is(err, backend.ErrInvalid) && !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
}
