package sdpa_test

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestChecksCatchMutants: each check of the device, cache and graph API,
// broken on purpose, fails the tests that prove it (FP8ATTN_MUTANTS=1).
func TestChecksCatchMutants(t *testing.T) {
	const pkg = "./sdpa"
	mutant.Run(t, []mutant.Mutant{
		{Name: "no memory bound", File: "sdpa/hostmem.go", Pkg: pkg,
			Old: "if n < 0 || n > limit-held {", New: "if n < 0 {",
			Tests: []string{"TestMemoryLimitCPU", "TestDeviceAPINeverPanics"}},
		{Name: "Free does not release its bytes", File: "sdpa/device.go", Pkg: pkg,
			Old: "t.dev.host.release(t.bytes)", New: "_ = t.bytes",
			Tests: []string{"TestMemoryLimitCPU"}},
		{Name: "no nil-device check", File: "sdpa/device.go", Pkg: pkg,
			Old: "if d == nil || d.be == nil {", New: "if d == nil {",
			Tests: []string{"TestDeviceAPINeverPanics"}},
		{Name: "no nil-cache check", File: "sdpa/kvcache.go", Pkg: pkg,
			Old: "if c == nil || c.dev == nil {", New: "if false {",
			Tests: []string{"TestDeviceAPINeverPanics"}},
		{Name: "host copies inside a capture", File: "sdpa/device.go", Pkg: pkg,
			Old: "func (d *Device) noHostCopy(what string) error {\n\tif d.inCapture() {", New: "func (d *Device) noHostCopy(what string) error {\n\tif false {",
			Tests: []string{"TestGraphRules"}},
		{Name: "Append inside a capture", File: "sdpa/kvcache.go", Pkg: pkg,
			Old: "if c.dev.inCapture() {", New: "if false {",
			Tests: []string{"TestGraphRules"}},
		{Name: "nested captures", File: "sdpa/graph.go", Pkg: pkg,
			Old: "\tif d.inCapture() {\n\t\treturn nil, errorf(ErrInvalid", New: "\tif false {\n\t\treturn nil, errorf(ErrInvalid",
			Tests: []string{"TestGraphRules"}},
		{Name: "Replay inside a capture", File: "sdpa/graph.go", Pkg: pkg,
			Old: "\tif g.dev.inCapture() {\n\t\treturn errorf(ErrUnsupported, \"replaying", New: "\tif false {\n\t\treturn errorf(ErrUnsupported, \"replaying",
			Tests: []string{"TestGraphRules"}},
		{Name: "Free of a tensor a graph uses", File: "sdpa/device.go", Pkg: pkg,
			Old: "if t.pins > 0 {", New: "if false {",
			Tests: []string{"TestGraphRules"}},
		{Name: "a cpu graph does not pin its cache", File: "sdpa/kvcache.go", Pkg: pkg,
			Old: "rec.caches = append(rec.caches, &graphCacheCall{cache: c})", New: "",
			Tests: []string{"TestGraphRules"}},
		{Name: "more queries than the sequence", File: "sdpa/kvcache.go", Pkg: pkg,
			Old: "if s.n > 0 && s.n < sq {", New: "if false {",
			Tests: []string{"TestGraphRules", "TestDeviceAPINeverPanics"}},
		{Name: "devices not told apart", File: "sdpa/device.go", Pkg: pkg,
			Old: `return name + "#" + strconv.Itoa(n)`, New: `return name + strconv.Itoa(0)[:0]`,
			Tests: []string{"TestErrorsSayWhat"}},
		{Name: "a capture records every goroutine's calls", File: "sdpa/graph.go", Pkg: pkg,
			Old: "return hostCaptures.by[id]", New: "for _, c := range hostCaptures.by {\n\t\t_ = id\n\t\treturn c\n\t}\n\treturn nil",
			Tests: []string{"TestCaptureOtherGoroutineCPU"}},
		{Name: "the variants do not reach the backend", File: "sdpa/sdpa.go", Pkg: pkg,
			Old: "Precision: opts.Precision, Variants: vr,", New: "Precision: opts.Precision, Variants: backend.Variants{},",
			Tests: []string{"TestVariantsEveryCall", "TestVariantsVarlen"}},
		{Name: "SmoothK with a softcap or sinks", File: "sdpa/sdpa.go", Pkg: pkg,
			Old: "if opts.SmoothK && (vr.Softcap != 0 || vr.Sinks != nil) {", New: "if opts.SmoothK && vr.Softcap < 0 {",
			Tests: []string{"TestVariantsInvalid"}},
		{Name: "the variants do not reach the cache", File: "sdpa/kvcache.go", Pkg: pkg,
			Old: "PagesPerSeq: per, Variants: variants,", New: "PagesPerSeq: per,",
			Tests: []string{"TestVariantsInvalid"}},
		{Name: "Select asks the unavailable", File: "backend/registry.go", Pkg: pkg,
			Old: "if !e.unavailable() && e.b.Supports(p) == nil {", New: "if e.b.Supports(p) == nil {",
			Tests: []string{"TestIntoNoAllocs"}},
	})
}
