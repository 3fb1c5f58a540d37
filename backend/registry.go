package backend

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// The registry is the package's only mutable state: backends register from
// init functions and are looked up by name.
var registry struct {
	sync.RWMutex
	entries []entry
}

type entry struct {
	b        Backend
	priority int
	// avail is b's Availability, asked once (nil: b is always available).
	avail func() error
}

// unavailable reports whether e's backend says it cannot run anything in
// this build or on this machine (asked once, so that Select allocates
// nothing for a backend that answers with a new error each time).
func (e *entry) unavailable() bool { return e.avail != nil && e.avail() != nil }

// Register adds b under b.Name(). When a caller names no backend, Select
// tries registered backends in decreasing priority (negative: only by
// name). A nil backend, an empty name or a name already registered is an
// error wrapping ErrInvalid. It is safe to call at any time.
func Register(b Backend, priority int) error {
	if b == nil || isNilPointer(b) || b.Name() == "" {
		return fmt.Errorf("%w: registering a nil or unnamed backend", ErrInvalid)
	}
	registry.Lock()
	defer registry.Unlock()
	for _, e := range registry.entries {
		if e.b.Name() == b.Name() {
			return fmt.Errorf("%w: backend %q is already registered", ErrInvalid, b.Name())
		}
	}
	e := entry{b: b, priority: priority}
	if a, ok := b.(Availability); ok {
		e.avail = sync.OnceValue(a.Available)
	}
	registry.entries = append(registry.entries, e)
	sort.SliceStable(registry.entries, func(i, j int) bool {
		return registry.entries[i].priority > registry.entries[j].priority
	})
	return nil
}

// isNilPointer reports whether b holds a nil pointer (whose Name would
// dereference it).
func isNilPointer(b Backend) bool {
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// MustRegister is Register for a package's own backends at init time, where
// a failure is a bug in that package: it panics on error.
func MustRegister(b Backend, priority int) {
	if err := Register(b, priority); err != nil {
		panic(err)
	}
}

// Names lists the registered backends, highest priority first.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, len(registry.entries))
	for i, e := range registry.entries {
		names[i] = e.b.Name()
	}
	return names
}

// Lookup returns the backend registered under name.
func Lookup(name string) (Backend, error) {
	registry.RLock()
	defer registry.RUnlock()
	for _, e := range registry.entries {
		if e.b.Name() == name {
			return e.b, nil
		}
	}
	return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownBackend, name, namesLocked())
}

func namesLocked() []string {
	names := make([]string, len(registry.entries))
	for i, e := range registry.entries {
		names[i] = e.b.Name()
	}
	return names
}

// Select returns the backend named name if it supports p, or, for name "",
// the highest-priority registered backend that supports p.
func Select(name string, p *Problem) (Backend, error) {
	if name != "" {
		if p == nil {
			return nil, fmt.Errorf("%w: selecting a backend for a nil problem", ErrInvalid)
		}
		b, err := Lookup(name)
		if err != nil {
			return nil, err
		}
		if err := b.Supports(p); err != nil {
			return nil, err
		}
		return b, nil
	}
	// Under the read lock, without copying the entries: Select runs on every
	// call and allocates nothing unless no backend fits.
	if p == nil {
		return nil, fmt.Errorf("%w: selecting a backend for a nil problem", ErrInvalid)
	}
	registry.RLock()
	defer registry.RUnlock()
	for i := range registry.entries {
		e := &registry.entries[i]
		if !e.unavailable() && e.b.Supports(p) == nil {
			return e.b, nil
		}
	}
	var reasons []error
	for _, e := range registry.entries {
		reasons = append(reasons, e.b.Supports(p))
	}
	return nil, fmt.Errorf("%w: no registered backend runs this problem: %v", ErrUnsupported, reasons)
}
