// Package freelist keeps released objects for reuse. Unlike a sync.Pool a
// List is not emptied by the garbage collector (nor, under the race
// detector, at random), so scratch buffers survive between calls and a warm
// call allocates nothing; it holds as many objects as were ever in use at
// once.
package freelist

import "sync"

// List is a free list of *T. The zero value is ready to use and safe for
// concurrent use.
type List[T any] struct {
	mu    sync.Mutex
	items []*T
}

// Get returns a released object, or a new one.
func (f *List[T]) Get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.items); n > 0 {
		x := f.items[n-1]
		f.items[n-1] = nil
		f.items = f.items[:n-1]
		return x
	}
	return new(T)
}

// Put releases x for reuse.
func (f *List[T]) Put(x *T) {
	f.mu.Lock()
	f.items = append(f.items, x)
	f.mu.Unlock()
}

// Grow returns s resized to n elements, reallocating only when its capacity
// is short: scratch that only ever grows to the largest call seen.
func Grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
