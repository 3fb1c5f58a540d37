package cuda

import (
	"strings"
	"testing"
)

// TestConfigError: the load-time geometry check accepts an exported config
// equal to internal/tiles' and refuses one that differs in any element
// (each element of a seven-element config broken in turn, as a module
// compiled from other tile constants would be) or in length.
func TestConfigError(t *testing.T) {
	want := []int{64, 64, 128, 128, 384, 3, 60416}
	got := make([]int32, len(want))
	for i, w := range want {
		got[i] = int32(w)
	}
	if err := configError("fp8attn_stage9_d64_config", got, want); err != nil {
		t.Fatalf("an equal config refused: %v", err)
	}
	for i := range got {
		broken := append([]int32(nil), got...)
		broken[i]++
		err := configError("fp8attn_stage9_d64_config", broken, want)
		if err == nil || !strings.Contains(err.Error(), "fp8attn_stage9_d64_config") {
			t.Errorf("element %d broken: %v, want an error naming the config", i, err)
		}
	}
	for _, n := range []int{0, len(want) - 1, len(want) + 1} {
		short := make([]int32, n)
		copy(short, got)
		if err := configError("fp8attn_stage9_d64_config", short, want); err == nil {
			t.Errorf("a config of %d elements accepted against %d", n, len(want))
		}
	}
}
