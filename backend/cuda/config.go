package cuda

import "fmt"

// configError compares the geometry a module exports for a kernel (its
// *_config array, got: what the kernel was compiled with) with what
// internal/tiles says (want), element by element: nil where they agree, an
// error naming the array and both values where one differs or got is not
// want's length. The module loaders check every such array with it, so a
// kernel built from other tile constants than the launcher's is refused
// when it loads, not run with the wrong grid. Built without cgo, so that
// its test runs on every machine.
func configError(name string, got []int32, want []int) error {
	bad := len(got) != len(want)
	for i := 0; !bad && i < len(want); i++ {
		bad = int(got[i]) != want[i]
	}
	if bad {
		return fmt.Errorf("cuda: %s is %v, internal/tiles says %v", name, got, want)
	}
	return nil
}
