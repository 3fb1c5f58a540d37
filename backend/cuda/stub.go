//go:build !cuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/kernelreg"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// unavailable stands in for the GPU backends in builds without -tags cuda,
// so that naming them gives a clear error instead of "unknown backend".
type unavailable struct{ name string }

func (u unavailable) Name() string { return u.name }

func (u unavailable) Supports(*backend.Problem) error {
	return fmt.Errorf("%w: backend %q is not in this build: rebuild with -tags cuda (see README)", backend.ErrUnsupported, u.name)
}

func (u unavailable) Attention(p *backend.Problem) error { return u.Supports(p) }

// Available says that this build has no GPU backend.
func (u unavailable) Available() error {
	return errors.New("not in this build: rebuild with -tags cuda (see README)")
}

func init() {
	backend.MustRegister(unavailable{"cuda"}, 20)
	for _, t := range targets {
		u := unavailable{"cuda/" + t.kernel}
		backend.MustRegister(u, -1)
		kernelreg.Register(t.kernel, u)
	}
	for _, s := range tiles.Stages {
		kernelreg.Register(kernelName(s), unavailable{stageBackendName(s)})
	}
}
