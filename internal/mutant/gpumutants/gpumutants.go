// Package gpumutants lists the mutants of Go code that only GPU tests
// reach (package mutant): their tests run on a machine without a Go
// toolchain, so each is built here into a test binary
// (internal/mutant/cmd/build-gpu-mutants) that must fail them there
// (scripts/gpu-decode.sh).
package gpumutants

import (
	"path"
	"strings"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

const (
	cudaPkg = "./backend/cuda"
	sdpaPkg = "./sdpa"
)

// List is the GPU mutants. A Name is a file-name word: the binary is
// BinName's.
var List = []mutant.Mutant{
	// The fused form runs its blocks' keys whole where the FP8 call
	// splits them: another rounding, and the long rows' walk on few SMs.
	{Name: "fusedunsplit", File: "backend/cuda/launch.go", Pkg: cudaPkg,
		Old: "parts > 1 && k.attnFusedSplit != nil {", New: "parts > 1 && k.attnFusedSplit == nil {",
		Tests: []string{"TestFusedKeySplit"}},
	{Name: "fusedunsplit", File: "backend/cuda/launch.go", Pkg: sdpaPkg,
		Old: "parts > 1 && k.attnFusedSplit != nil {", New: "parts > 1 && k.attnFusedSplit == nil {",
		Tests: []string{"TestDeviceFloat32KeySplitGPU"}},
	// An upload copies each piece apart, joined or not: a paged call's
	// tables take two copies.
	{Name: "uploadapart", File: "backend/cuda/staging.go", Pkg: cudaPkg,
		Old: "for i+1 < len(copies) && copies[i+1].joined", New: "for false && i+1 < len(copies)",
		Tests: []string{"TestPagedCallsUploadOnce", "TestPagedVarlenUploadsOnce"}},
	// A varlen FP8 call's groups' lengths and block tables go up in a
	// copy of their own after the call's tables (the same results, a
	// second copy that waits for the first).
	{Name: "varlentablesapart", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old:   "at, err := s.stageInputs(p, bytesOf(tabs))",
		New:   "at, err := s.stageInputs(p, nil)\n\tif err == nil {\n\t\tvar c []hostCopy\n\t\tif at, err = s.put(&c, \"varlen tables\", bytesOf(tabs)); err == nil {\n\t\t\terr = s.dev.upload(c)\n\t\t}\n\t}",
		Tests: []string{"TestPagedVarlenUploadsOnce"}},
	// A joined buffer's pieces packed without the staging buffer's
	// alignment: the kernels read the block table where the copy did not
	// put it.
	{Name: "joinedpacked", File: "backend/cuda/paged_cache.go", Pkg: cudaPkg,
		Old: "p += uint64(alignUp(len(src)))", New: "p += uint64(len(src))",
		Tests: []string{"TestPagedPrefillMatchesDense", "TestPagedAgainstCPU"}},
	// A joined copy stops short of its last piece's bytes: the block
	// table (or the lengths' and table's tail) never reaches the device.
	{Name: "uploadjoinedshort", File: "backend/cuda/staging.go", Pkg: cudaPkg,
		Old: "size = alignUp(size) + len(copies[i].host)", New: "size = alignUp(size)",
		Tests: []string{"TestPagedPrefillMatchesDense", "TestPagedAgainstCPU"}},
	// A host-slice call with attention variants is kept for the next call
	// of its key, its sinks the kept call's after the caller's change.
	{Name: "hostkeepvariants", File: "backend/cuda/host.go", Pkg: cudaPkg,
		Old: "p.LSE != nil, st}, !p.Variants.Any()", New: "p.LSE != nil, st}, true",
		Tests: []string{"TestHostCallKept"}},
	// A trim of the pool (a memory bound) leaves the kept host-slice call
	// holding its block.
	{Name: "hostkepttrim", File: "backend/cuda/pool.go", Pkg: cudaPkg,
		Old: "\td.dropHostCall()\n\td.reap()", New: "\td.reap()",
		Tests: []string{"TestHostCallKept"}},
	// A host-slice call's float16 output comes down without its unit: each
	// output times the device's factor.
	{Name: "halfunit", File: "backend/cuda/host_pipe.go", Pkg: cudaPkg,
		Old: "half.Decode(s.dec.out[(x-s.off)/2:(y-s.off)/2], slot[x-lo:y-lo], s.dec.unit)", New: "half.Decode(s.dec.out[(x-s.off)/2:(y-s.off)/2], slot[x-lo:y-lo], 1)",
		Tests: []string{"TestHostSlicesBitExact"}},
	// The device scales the output by twice the factor the host undoes.
	{Name: "halffactor", File: "backend/cuda/host.go", Pkg: cudaPkg,
		Old: "uint64(l.out16), r.outN, e.out16.factor)", New: "uint64(l.out16), r.outN, 2*e.out16.factor)",
		Tests: []string{"TestHostSlicesBitExact"}},
	// The conversion converts nothing: the float16 region holds what an
	// earlier call (or the pool) left there.
	{Name: "halfnone", File: "backend/cuda/host.go", Pkg: cudaPkg,
		Old: "hp := halfParams{X: x, Y: y, N: n, Factor: factor}", New: "hp := halfParams{X: x, Y: y, N: 0, Factor: factor}",
		Tests: []string{"TestHostSlicesBitExact"}},
	// The same through sdpa: TestDeviceGPU holds the host-slice call to the
	// device call's output rounded at half.Scale.
	{Name: "halfunit", File: "backend/cuda/host_pipe.go", Pkg: sdpaPkg,
		Old: "half.Decode(s.dec.out[(x-s.off)/2:(y-s.off)/2], slot[x-lo:y-lo], s.dec.unit)", New: "half.Decode(s.dec.out[(x-s.off)/2:(y-s.off)/2], slot[x-lo:y-lo], 1)",
		Tests: []string{"TestDeviceGPU", "TestQuantizedEqualsFP8"}},
	// The host-slice call's flag is not zeroed on the way up: the kept
	// call's flag, set by a score factor past the limit, fails the next.
	{Name: "hostflag", File: "backend/cuda/host_engine.go", Pkg: cudaPkg,
		Old: "{off: l.flag, host: zeroWord[:]}}", New: "{off: l.flag}}",
		Tests: []string{"TestHostSlicesFactorError"}},
	// The Ada kernel's calls with a sliding window run the plain kernel,
	// which reads no window: every row sees all its causal keys.
	{Name: "adawindowplain", File: "backend/cuda/modules.go", Pkg: cudaPkg,
		Old:   "case p.SlidingWindow != 0:\n\t\treturn k.attnWindow",
		New:   "case false:\n\t\treturn k.attnWindow",
		Tests: []string{"TestConformance"}},
	// The Ada kernel's calls with a softcap run the window twin (or the
	// plain kernel), which caps nothing.
	{Name: "adasoftcapuncapped", File: "backend/cuda/modules.go", Pkg: cudaPkg,
		Old:   "case p.Softcap != 0:\n\t\treturn k.attnSoftcap",
		New:   "case false:\n\t\treturn k.attnSoftcap",
		Tests: []string{"TestConformance"}},
	// A Hopper launch that writes an LSE takes the entries without the
	// float32 row sums too: its LSE is taken from sums never summed.
	{Name: "nolsewithlse", File: "backend/cuda/launch.go", Pkg: cudaPkg,
		Old: "if r.params.LSE == 0 && k.noLSE != nil && noLSEOn() {", New: "if k.noLSE != nil && noLSEOn() {",
		Tests: []string{"TestNewResidentMatchesUpload"}},
	// The paged prefill ignores its cache's inPlaceTiles: with the paged
	// form off by default, its tests would hold the gathered path to
	// itself.
	{Name: "pagedtilesignored", File: "backend/cuda/paged_prefill.go", Pkg: cudaPkg,
		Old: "(pagedTilesOn() || s.inPlaceTiles) && r.pagedTakes", New: "pagedTilesOn() && r.pagedTakes",
		Tests: []string{"TestPagedTilesMatchGather", "TestPagedTilesMixedScales"}},
	// A paged attention's device tables never get their lengths, neither
	// at the first write nor after a change: the kernels read what the
	// allocation held.
	{Name: "stalelens", File: "backend/cuda/paged_tables.go", Pkg: cudaPkg,
		Old:   "\t\tif la < lb {\n\t\t\tif err := put(la, lb); err != nil {",
		New:   "\t\tif false {\n\t\t\tif err := put(la, lb); err != nil {",
		Tests: []string{"TestPagedGraphTables", "TestPagedTablesWrite"}},
	// A paged attention captured without device tables is recorded
	// instead of refused: its lengths and block table go to the cache's
	// staging buffers, whose uploads a capture leaves out.
	{Name: "hosttables", File: "backend/cuda/paged_cache.go", Pkg: cudaPkg,
		Old: "if c != nil && p.Tables == nil {", New: "if false {",
		Tests: []string{"TestPagedGraphTables"}},
	// The paged plan sizes a windowed call's splits for the whole
	// sequence, as without a window: correct results, but a decode under a
	// window reads the window's pages and far more.
	{Name: "windowplan", File: "backend/cuda/paged_plan.go", Pkg: cudaPkg,
		Old:   "maxTiles = max(maxTiles, seqTiles(int(p.SeqLens[b]), p.Queries(b), p.SlidingWindow, keys))",
		New:   "maxTiles = max(maxTiles, seqTiles(int(p.SeqLens[b]), p.Queries(b), 0, keys))",
		Tests: []string{"TestPagedPlanWindow"}},
	// The paged plan's window span leaves out the chunk's later rows
	// (each query's window starts one key later): the splits of a
	// chunked call under a window miss the last rows' keys.
	{Name: "windowspan", File: "backend/cuda/paged_plan.go", Pkg: cudaPkg,
		Old:   "return hi - max(0, n-sq-w+1)/keys",
		New:   "return hi - max(0, n-w)/keys",
		Tests: []string{"TestPagedPlanWindow", "TestPagedVariants"}},
	// The paged kernels never get the window: the plan covers the
	// window's span from tile 0, and the rows mask nothing below it.
	{Name: "nowindow", File: "backend/cuda/paged_plan.go", Pkg: cudaPkg,
		Old:   "Window: int32(p.SlidingWindow)}",
		New:   "Window: 0}",
		Tests: []string{"TestPagedPlanWindow", "TestPagedVariants"}},
	// Each distinct sink array the device is given goes to the same device
	// address: a call with other sinks overwrites those a captured
	// graph replays with.
	{Name: "sinksoverwrite", File: "backend/cuda/sinks.go", Pkg: cudaPkg,
		Old:   "k.free, k.left = k.free+uint64(n), k.left-n",
		New:   "k.left -= n",
		Tests: []string{"TestPagedGraphVariants"}},
	// A varlen batch's packed queries and outputs get the uniform batch's
	// strides (a row block of Sq rows a sequence): BHSD rows land in the
	// wrong places.
	{Name: "varlenstrides", File: "backend/cuda/paged_plan.go", Pkg: cudaPkg,
		Old:   "if p.QStarts != nil { // one packed batch entry of p.Rows() rows",
		New:   "if false {",
		Tests: []string{"TestPagedConformance"}},
	// A varlen batch may take the warp-specialized kernel, which knows only
	// uniform batches.
	{Name: "varlenws", File: "backend/cuda/paged_plan.go", Pkg: cudaPkg,
		Old:   "s.splits == 0 && p.QStarts == nil {",
		New:   "s.splits == 0 {",
		Tests: []string{"TestPagedConformance"}},
	// A batch of many sequences with a few new queries each (decode
	// tokens, drafts) runs on the prefill kernels when its rows are many.
	{Name: "prefillfewqueries", File: "backend/cuda/paged_prefill.go", Pkg: cudaPkg,
		Old: "least < 0 || p.Sq < prefillMinQueries {", New: "least < 0 {",
		Tests: []string{"TestPagedPrefillChoice"}},
	// A varlen FP8 batch's group leaves its padding rows as an earlier
	// call left them: they join the heads' amax, and the group's codes
	// differ from the sequences' own.
	{Name: "varlenpad", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "if pad := g.n - m; pad > 0 {", New: "if pad := g.n - m; false && pad > 0 {",
		Tests: []string{"TestPagedVarlenFP8"}},
	// A group's queries go to the first rows of their sequence's block, the
	// padding after them: each row stands at another position.
	{Name: "varlenpadback", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "copyRows(gq, seqRegion(p.Layout, p.Hq, p.D, j, g.n, g.n-m, m), q,", New: "copyRows(gq, seqRegion(p.Layout, p.Hq, p.D, j, g.n, 0, m), q,",
		Tests: []string{"TestPagedVarlenFP8"}},
	// The split-KV kernel also runs the groups' rows (beside the groups,
	// which write the same rows).
	{Name: "varlenskip", File: "backend/cuda/paged_plan.go", Pkg: cudaPkg,
		Old: "\t\t\tif skipped(b) {\n\t\t\t\tcontinue", New: "\t\t\tif false {\n\t\t\t\tcontinue",
		Tests: []string{"TestPagedVarlenFP8"}},
	// A group in place in the packed BHSD tensors steps from head to head
	// by its own rows, not by the batch's.
	{Name: "varlenviewstride", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "rows: [3]int64{n * d, total * d, d}}", New: "rows: [3]int64{n * d, n * d, d}}",
		Tests: []string{"TestPagedVarlenFP8"}},
	// A group in place in the packed BHSD tensors steps from sequence to
	// sequence by a head's rows, not by the group's count.
	{Name: "varlenviewbatch", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "rows: [3]int64{n * d, total * d, d}}", New: "rows: [3]int64{total * d, total * d, d}}",
		Tests: []string{"TestPagedVarlenFP8"}},
	// A group of consecutive sequences with fewer queries than its count
	// runs in place: their rows do not follow one another by the count.
	{Name: "varlenviewcount", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "if b != g.seqs[0]+j || p.Queries(b) != g.n {", New: "if b != g.seqs[0]+j {",
		Tests: []string{"TestPagedVarlenFP8"}},
	// The device's stream does not wait for a varlen call's split-KV
	// launch on the side stream: the outputs are read before it ends.
	{Name: "varlenjoin", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "return s.dev.stream.Wait(sd.join, 0)", New: "return nil",
		Tests: []string{"TestPagedVarlenFP8"}},
	// A sequence shorter than its group's count joins the group: its
	// padding rows stand before its first token.
	{Name: "varlenshort", File: "backend/cuda/paged_varlen.go", Pkg: cudaPkg,
		Old: "if 2*p.Queries(b) > n && int(p.SeqLens[b]) >= n {", New: "if 2*p.Queries(b) > n {",
		Tests: []string{"TestPagedVarlenFP8"}},
	// A varlen call's q may have several batch entries: the cuda device's
	// buffers are long enough, and the call reads the first.
	{Name: "varlenbatch", File: "sdpa/kvcache.go", Pkg: sdpaPkg,
		Old:   "if b != 1 {\n\t\t\treturn fmt.Errorf(\"%w: a varlen q",
		New:   "if false {\n\t\t\treturn fmt.Errorf(\"%w: a varlen q",
		Tests: []string{"TestKVCacheVarlenGPU"}},
	// A varlen call's counts need not add up to q's rows: the cuda
	// device's buffers are long enough for fewer.
	{Name: "varlensum", File: "sdpa/kvcache.go", Pkg: sdpaPkg,
		Old:   "if total != rows || total > math.MaxInt32 {",
		New:   "if total > math.MaxInt32 {",
		Tests: []string{"TestKVCacheVarlenGPU"}},
	// The cache never writes its graphs' tables after an append or a
	// truncation: replays read the lengths and pages of the capture.
	{Name: "nosync", File: "sdpa/kvcache.go", Pkg: sdpaPkg,
		Old:   "gc.stale = gc.tables.Write(gc.lens, gc.table, gc.spans) != nil",
		New:   "gc.stale = false",
		Tests: []string{"TestKVCacheGraphDecodeGPU"}},
}

// BinName is the file name of m's test binary: broken-NAME.test for the
// cuda backend's tests, PKG-broken-NAME.test for another package's
// (sdpa-broken-NAME.test).
func BinName(m mutant.Mutant) string {
	name := "broken-" + m.Name + ".test"
	if pkg := strings.TrimPrefix(m.Pkg, "./"); pkg != strings.TrimPrefix(cudaPkg, "./") {
		name = path.Base(pkg) + "-" + name
	}
	return name
}
