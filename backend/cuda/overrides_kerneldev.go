//go:build cuda && kerneldev

package cuda

import (
	"cmp"
	"fmt"
	"os"
)

// Kernel development builds (-tags cuda,kerneldev): the environment may
// replace the embedded modules with files (the variables FP8ATTN_PTX,
// FP8ATTN_PTX80, FP8ATTN_CUBIN, FP8ATTN_PAGED_PTX, FP8ATTN_PAGED_PTX80,
// FP8ATTN_PAGED_CUBIN; scripts/gpu-lib.sh's use_built_kernels points them at
// freshly built kernels; and the test modules' FP8ATTN_TEST_PTX and
// FP8ATTN_TEST_CUBIN, which scripts/gpu-mutants.sh sets), FP8ATTN_PDL=0 turns programmatic dependent
// launch off for A/B runs, FP8ATTN_NARROW=0 the narrow tiled tensor
// form, FP8ATTN_NOLSE=0 the entries without the float32 row sums, and
// FP8ATTN_PAGED_TILES=1 turns the paged form of the paged prefill on, and
// FP8ATTN_PACKED=1 the packed form of the varlen FP8 calls
// (FP8ATTN_PACKED_ORDER its items' order).
// Production builds (overrides_default.go) always
// load the embedded modules with PDL on. docs/DEVELOPING.md describes the
// workflow.

// moduleImage returns a module's image: the file the environment variable
// env names, or the embedded one.
func moduleImage(env, embedded string) (string, error) {
	f := os.Getenv(env)
	if f == "" {
		return embedded, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("cuda: %s: %w", env, err)
	}
	return string(b), nil
}

// pdlDefault is whether launches use programmatic dependent launch: unless
// FP8ATTN_PDL=0.
func pdlDefault() bool { return os.Getenv("FP8ATTN_PDL") != "0" }

// narrowOn is whether the calls the narrow tiled tensor form takes run on
// it (launchTensors): unless FP8ATTN_NARROW=0, for A/B runs against the
// wide form.
func narrowOn() bool { return os.Getenv("FP8ATTN_NARROW") != "0" }

// noLSEOn is whether the launches without an LSE take the entries without
// the float32 row sums where the head dim has them (resident.kernels):
// unless FP8ATTN_NOLSE=0, for A/B runs against the entries with them.
func noLSEOn() bool { return os.Getenv("FP8ATTN_NOLSE") != "0" }

// pagedTilesOn is whether the paged prefill's calls the paged form takes
// run on it (paged_tiles.go): where FP8ATTN_PAGED_TILES=1, for A/B runs
// against the gathered tiles, production's path. Its calls keep each
// tile's scales where the others keep the sequence's, so with it on a
// sequence whose call splits its keys (which it does not take) and the
// same sequence where it runs differ by about 1e-4 (relative L2).
func pagedTilesOn() bool { return os.Getenv("FP8ATTN_PAGED_TILES") == "1" }

// packedOn is whether the varlen FP8 calls the packed form takes run on it
// (packed.go): where FP8ATTN_PACKED=1, for A/B runs against the groups
// beside the split-KV kernel. Its rows keep their own scales and its
// tiles theirs: a sequence's rows are the same in any batch (as
// TestKVCacheVarlenFP8GPU holds them), about 2^-7 from the same sequence
// through Attention.
func packedOn() bool { return os.Getenv("FP8ATTN_PACKED") == "1" }

// packedOrder is the order of the packed form's items (packedItems):
// FP8ATTN_PACKED_ORDER, for A/B runs ("cost" the costliest first, "mixed"
// the short items spread among the others), production's "cost" where it
// is unset.
func packedOrder() string { return cmp.Or(os.Getenv("FP8ATTN_PACKED_ORDER"), "cost") }
