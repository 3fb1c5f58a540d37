// Package kernelreg names the CUDA backend's kernels for the tools that
// run one kernel by name (sdpabench -kernel) without making it a public
// backend. backend/cuda registers, at init, its targets ("sm90", "sm89",
// "sm80": the kernels the public backends "cuda/sm90", "cuda/sm89" and
// "cuda/sm80" run) and the ladder ("stage1" .. "stage8": the frozen,
// validated progression the targets grew from, docs/design/ladder.md),
// which is registered here only. In a build without -tags cuda the names
// are registered too, as backends that explain how to get them.
package kernelreg

import (
	"fmt"
	"sync"

	"github.com/fp8attn/fp8attn/backend"
)

var registry struct {
	sync.RWMutex
	names []string
	by    map[string]backend.Backend
}

// Register adds b under name; a package registering its kernels calls it
// from init. An empty name, a nil backend or a name already registered is a
// bug in that package: Register panics.
func Register(name string, b backend.Backend) {
	registry.Lock()
	defer registry.Unlock()
	if name == "" || b == nil {
		panic("kernelreg: registering an unnamed or nil kernel")
	}
	if _, ok := registry.by[name]; ok {
		panic(fmt.Sprintf("kernelreg: kernel %q is already registered", name))
	}
	if registry.by == nil {
		registry.by = map[string]backend.Backend{}
	}
	registry.by[name] = b
	registry.names = append(registry.names, name)
}

// Lookup returns the kernel registered under name, or an error wrapping
// backend.ErrUnknownBackend that lists the names.
func Lookup(name string) (backend.Backend, error) {
	registry.RLock()
	defer registry.RUnlock()
	if b, ok := registry.by[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("%w: no kernel %q (kernels: %v)", backend.ErrUnknownBackend, name, registry.names)
}

// Names lists the registered kernels in the order they were registered.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	return append([]string(nil), registry.names...)
}
