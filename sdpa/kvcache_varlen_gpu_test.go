//go:build cuda

package sdpa_test

import (
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
)

// TestKVCacheVarlenGPU: a varlen batch on the cuda device (varlenCheck),
// which runs it on the cp.async kernel in one launch where a sequence alone
// may run the warp-specialized one.
func TestKVCacheVarlenGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Skipf("no cuda device: %v", err)
	}
	varlenCheck(t, dev)
}
