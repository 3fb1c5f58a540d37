package kernelreg

import (
	"errors"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
)

type named string

func (n named) Name() string                     { return string(n) }
func (n named) Supports(*backend.Problem) error  { return nil }
func (n named) Attention(*backend.Problem) error { return nil }

func TestRegistry(t *testing.T) {
	a, b := named("test/a"), named("test/b")
	Register("kernelreg-test-a", a)
	Register("kernelreg-test-b", b)
	for _, tc := range []struct {
		name string
		want backend.Backend
	}{{"kernelreg-test-a", a}, {"kernelreg-test-b", b}} {
		got, err := Lookup(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Lookup("kernelreg-test-missing"); !errors.Is(err, backend.ErrUnknownBackend) {
		t.Errorf("Lookup of a missing kernel: %v, want ErrUnknownBackend", err)
	}
	names := Names()
	if i, j := slices.Index(names, "kernelreg-test-a"), slices.Index(names, "kernelreg-test-b"); i < 0 || j != i+1 {
		t.Errorf("Names() = %v: want the two test kernels in registration order", names)
	}
	for _, bad := range []struct {
		name string
		b    backend.Backend
	}{{"kernelreg-test-a", a}, {"", a}, {"kernelreg-test-nil", nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, %v) did not panic", bad.name, bad.b)
				}
			}()
			Register(bad.name, bad.b)
		}()
	}
}
