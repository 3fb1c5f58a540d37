//go:build cuda && !kerneldev

package cuda

// Production builds load the embedded modules only and launch with
// programmatic dependent launch; the environment overrides exist in
// kernel development builds (overrides_kerneldev.go, -tags cuda,kerneldev).

// moduleImage returns the embedded module image (env names the variable a
// kernel development build would read instead).
func moduleImage(env, embedded string) (string, error) { return embedded, nil }

// pdlDefault is whether launches use programmatic dependent launch: always.
func pdlDefault() bool { return true }

// narrowOn is whether the calls the narrow tiled tensor form takes run on
// it (launchTensors): always.
func narrowOn() bool { return true }

// noLSEOn is whether the launches without an LSE take the entries without
// the float32 row sums where the head dim has them (resident.kernels).
func noLSEOn() bool { return true }

// pagedTilesOn is whether the paged prefill's calls the paged form takes
// run on it (paged_tiles.go): never, since it measured slower than the
// gathered tiles (docs/design/paged-decode.md); tests run it by the cache's
// inPlaceTiles.
func pagedTilesOn() bool { return false }

// packedOn is whether the varlen FP8 calls the packed form takes run on it
// in one launch (packed.go): never by default, until it measures faster
// than the groups beside the split-KV kernel; tests run it by the cache's
// packed.
func packedOn() bool { return false }

// packedOrder is the order of the packed form's items (packedItems): the
// costliest first.
func packedOrder() string { return "cost" }
