package freelist

import (
	"sync"
	"testing"
)

func TestList(t *testing.T) {
	var f List[[4]int]
	a := f.Get()
	a[0] = 7
	f.Put(a)
	if b := f.Get(); b != a || b[0] != 7 {
		t.Fatal("released object not reused")
	}
	if c := f.Get(); c == a {
		t.Fatal("object handed out twice")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				x := f.Get()
				x[1]++
				f.Put(x)
			}
		}()
	}
	wg.Wait()
	f.Put(a)
	if n := testing.AllocsPerRun(10, func() { f.Put(f.Get()) }); n != 0 {
		t.Errorf("%v allocations per get and put", n)
	}
}
