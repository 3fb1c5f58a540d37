package kernels

import (
	"crypto/sha256"
	_ "embed"
	"fmt"
	"io/fs"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/internal/tiles"
)

// The test modules (testkernels.cu, testkernels_sm90a.cu), which only the
// tests embed (backend/cuda's too).
var (
	//go:embed testkernels_compute_80.ptx
	testPTX string
	//go:embed testkernels_sm_90a.cubin
	testCubin string
)

// testKernels are the test modules' kernels, which no production module
// may hold.
var testKernels = []string{"fp8attn_check_layout", "fp8attn_encode_check"}

// productionSources are the kernel sources the modules include: every *.cu,
// *.cuh and *.h here and in the folders below (ladder/, ...), but not
// mutants/, by slash-separated path in byte order (the test modules'
// sources too: they include the production sources and are built and
// hashed with them).
func productionSources(t *testing.T) []string {
	var files []string
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path == "mutants" {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); !e.IsDir() && (ext == ".cu" || ext == ".cuh" || ext == ".h") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// sourceFiles are the files SourceHash covers, in gen.sh's order: the
// production sources, then the fragment and wgmma headers.
func sourceFiles(t *testing.T) []string {
	return append(productionSources(t), "../../../wmma/include/fp8attn_fragments.h", "../../../wmma/include/fp8attn_wgmma.h")
}

// switchRE matches a preprocessor conditional (#if, #ifdef, #ifndef,
// #elif, and #elifdef/#elifndef) and captures its condition.
var switchRE = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef)\b(.*)$`)

// projectName matches the project's macro names.
var projectName = regexp.MustCompile(`\bFP8ATTN_\w+`)

// switches lists the conditionals of src on an FP8ATTN_* name other than
// FP8ATTN_PROFILE, the one profiling flag (profile.cuh).
func switches(src string) []string {
	var bad []string
	for _, m := range switchRE.FindAllStringSubmatch(src, -1) {
		for _, name := range projectName.FindAllString(m[1], -1) {
			if name != "FP8ATTN_PROFILE" {
				bad = append(bad, strings.TrimSpace(m[0]))
				break
			}
		}
	}
	return bad
}

// TestNoBuildSwitches: the production kernel sources hold only code the
// embedded modules compile. Their conditionals are architecture and include
// guards and the profiling flag; any other FP8ATTN_* conditional (an
// experiment, a broken build, a policy) belongs in internal/tiles, a
// mutant (mutants/) or git history.
func TestNoBuildSwitches(t *testing.T) {
	for _, f := range productionSources(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range switches(string(b)) {
			t.Errorf("%s: %s: a build switch in a production source", f, s)
		}
	}
}

// TestMutantsApply: every mutant (mutants/*.sed, scripts/gpu-mutants.sh
// runs them on the GPU) names its modules and tests (and, where not
// backend/cuda's, their binary: "# bin: sdpa"), and changes exactly
// one production source, so that a kernel edit that moves the code a
// mutant breaks is caught here, not on the GPU machine. (Needs sed.)
func TestMutantsApply(t *testing.T) {
	sed, err := exec.LookPath("sed")
	if err != nil {
		t.Skip("no sed")
	}
	mutants, err := filepath.Glob("mutants/*.sed")
	if err != nil || len(mutants) == 0 {
		t.Fatalf("no mutants: %v", err)
	}
	sources := productionSources(t)
	modules := map[string]bool{"attention.cu": true, "attention_sm90a.cu": true, "paged.cu": true,
		"testkernels.cu": true, "testkernels_sm90a.cu": true}
	for _, m := range mutants {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		var mods, tests []string
		bin := "cuda"
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "# bin: "); ok {
				bin = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "# module: "); ok {
				mods = strings.Fields(v)
			}
			if v, ok := strings.CutPrefix(line, "# tests: "); ok {
				tests = strings.Fields(v)
			}
		}
		if len(mods) == 0 || len(tests) == 0 {
			t.Errorf("%s: no '# module:' or '# tests:' line", m)
		}
		if bin != "cuda" && bin != "sdpa" {
			t.Errorf("%s: '# bin: %s' is not a test binary gpu-mutants.sh runs (cuda, sdpa)", m, bin)
		}
		for _, mod := range mods {
			if !modules[mod] {
				t.Errorf("%s: module %s is not one gen.sh builds", m, mod)
			}
		}
		for _, name := range tests {
			if !strings.HasPrefix(name, "Test") {
				t.Errorf("%s: %q is not a test name", m, name)
			}
		}
		var changed []string
		for _, f := range sources {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(sed, "-f", m, f).Output()
			if err != nil {
				t.Fatalf("sed -f %s %s: %v", m, f, err)
			}
			if string(out) != string(src) {
				changed = append(changed, f)
			}
		}
		if len(changed) != 1 {
			t.Errorf("%s changes %d sources %v, want exactly one", m, len(changed), changed)
		}
	}
}

// TestSwitches proves TestNoBuildSwitches' scan on sources that must fail
// it and sources that must pass.
func TestSwitches(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"#if FP8ATTN_S9_PINGPONG == 2\n#endif\n", 1},
		{"  #  ifndef FP8ATTN_X\n#define FP8ATTN_X 0\n#endif\n", 1},
		{"#ifdef FP8ATTN_FP8_MMA\n#endif\n", 1},
		{"#if defined(__CUDA_ARCH__) && FP8ATTN_PDL_WAIT\n#elif FP8ATTN_Y\n#endif\n", 2},
		{"#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890\n#endif\n", 0},
		{"#ifdef FP8ATTN_PROFILE\n#endif\n", 0},
		{"#pragma once\n#define FP8ATTN_PARAMS_OFF(f) (int)offsetof(Params, f)\n", 0},
		{"// #if FP8ATTN_OLD in a comment\nif (x) {}\n", 0},
	} {
		if got := switches(tc.src); len(got) != tc.want {
			t.Errorf("switches(%q) = %q, want %d", tc.src, got, tc.want)
		}
	}
}

// TestPTXFresh: the embedded PTX and cubin were built from the current
// sources, and have every kernel of internal/tiles' stage lists.
func TestPTXFresh(t *testing.T) {
	var src []byte
	for _, f := range sourceFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(src)); got != SourceHash {
		t.Fatalf("the kernel sources changed since the PTX was built (hash %s, PTX built from %s): run go generate ./backend/cuda/kernels on a machine with nvcc", got, SourceHash)
	}
	for _, st := range tiles.Stages {
		for _, d := range tiles.HeadDims {
			name := tiles.KernelName(st, d)
			for _, sym := range []string{".entry " + name + "(", name + "_config["} {
				if !strings.Contains(PTX, sym) {
					t.Errorf("PTX lacks %s", sym)
				}
			}
		}
	}
	// The Ada kernel (stage 10), its window and softcap twins and its
	// pack, in the compute_89 module.
	for _, d := range tiles.AdaHeadDims {
		name := tiles.KernelName(tiles.AdaStage, d)
		for _, sym := range []string{".entry " + name + "(", name + "_config[", fmt.Sprintf(".entry fp8attn_stage10w_d%d(", d),
			fmt.Sprintf(".entry fp8attn_stage10c_d%d(", d), fmt.Sprintf(".entry fp8attn_pack10v_d%d(", d)} {
			if !strings.Contains(PTX, sym) {
				t.Errorf("PTX lacks %s", sym)
			}
		}
	}
	// The Ampere build: stages 1-6, none of the FP8 mma.sync stages, and
	// the paged cache.
	for _, st := range tiles.Stages {
		for _, d := range tiles.HeadDims {
			name := ".entry " + tiles.KernelName(st, d) + "("
			if fp8mma := st >= 7; strings.Contains(PTX80, name) == fp8mma {
				t.Errorf("compute_80 PTX: has %s = %v, want %v", name, !fp8mma, fp8mma)
			}
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(PTX80), "//") || !strings.Contains(PTX80, ".target sm_80") ||
		strings.Contains(PTX80, "stage10") || strings.Contains(PTX80, "e4m3.e4m3") {
		t.Error("compute_80 PTX missing, not for sm_80, or holding FP8 mma.sync")
	}
	if !strings.Contains(PagedPTX80, ".target sm_80") || !strings.Contains(PagedPTX80, ".entry fp8attn_paged_d128(") {
		t.Error("compute_80 paged PTX missing or incomplete")
	}
	// The Hopper module: every head dim's attention and pack kernels and
	// geometry, in the PTX, and a cubin (an ELF image) beside it.
	for _, d := range tiles.HopperHeadDims {
		for _, sym := range []string{".entry " + tiles.KernelName(tiles.HopperStage, d) + "(",
			tiles.KernelName(tiles.HopperStage, d) + "_config[", fmt.Sprintf(".entry fp8attn_pack9q_d%d(", d),
			fmt.Sprintf(".entry fp8attn_pack9k_d%d(", d), fmt.Sprintf(".entry fp8attn_pack9v_d%d(", d)} {
			if !strings.Contains(HopperPTX, sym) {
				t.Errorf("Hopper PTX lacks %s", sym)
			}
		}
	}
	// The paged-cache module: append, merge, and every head dim's attention
	// with its geometry.
	paged := []string{".entry fp8attn_paged_append(", ".entry fp8attn_paged_merge(", "fp8attn_paged_params_layout[", "fp8attn_append_params_layout["}
	for _, d := range tiles.PagedHeadDims {
		paged = append(paged, fmt.Sprintf(".entry fp8attn_paged_d%d(", d), fmt.Sprintf("fp8attn_paged_d%d_config[", d))
	}
	for _, sym := range paged {
		if !strings.Contains(PagedPTX, sym) {
			t.Errorf("paged PTX lacks %s", sym)
		}
	}
	if len(HopperCubin) < 4 || string(HopperCubin[:4]) != "\x7fELF" {
		t.Error("the sm_90a cubin is missing or not an ELF image")
	}
	// The paged module's sm_90a build: an ELF image with the same kernels
	// and the warp-specialized one for its head dims (which the compute_89
	// PTX must not have: its bulk copies need sm_90).
	if len(PagedCubin) < 4 || string(PagedCubin[:4]) != "\x7fELF" {
		t.Error("the paged sm_90a cubin is missing or not an ELF image")
	}
	for _, d := range tiles.PagedWSHeadDims {
		for _, sym := range []string{fmt.Sprintf("fp8attn_paged_ws_d%d", d), fmt.Sprintf("fp8attn_paged_ws_d%d_config", d), fmt.Sprintf("fp8attn_paged_d%d", d)} {
			if !strings.Contains(string(PagedCubin), sym+"\x00") {
				t.Errorf("paged cubin lacks %s", sym)
			}
		}
	}
	if strings.Contains(PagedPTX, "fp8attn_paged_ws") || strings.Contains(PagedPTX80, "fp8attn_paged_ws") {
		t.Error("the compute_89 or compute_80 paged PTX holds the warp-specialized kernel")
	}
	// The test modules: each test kernel there, and in no production
	// module.
	if !strings.Contains(testPTX, ".target sm_80") || !strings.Contains(testPTX, ".entry fp8attn_check_layout(") {
		t.Error("the compute_80 test PTX is missing, not for sm_80, or lacks fp8attn_check_layout")
	}
	if len(testCubin) < 4 || testCubin[:4] != "\x7fELF" {
		t.Error("the sm_90a test cubin is missing or not an ELF image")
	}
	for _, sym := range []string{"fp8attn_encode_check", "fp8attn_encode_check_params_layout"} {
		if !strings.Contains(testCubin, sym+"\x00") {
			t.Errorf("the sm_90a test cubin lacks %s", sym)
		}
	}
	for _, name := range testKernels {
		for module, image := range map[string]string{"compute_89 PTX": PTX, "compute_80 PTX": PTX80, "Hopper PTX": HopperPTX,
			"Hopper cubin": string(HopperCubin), "paged PTX": PagedPTX, "paged compute_80 PTX": PagedPTX80, "paged cubin": string(PagedCubin)} {
			if strings.Contains(image, name) {
				t.Errorf("the %s holds the test kernel %s", module, name)
			}
		}
	}
	if !strings.Contains(Resources, "sm_89") || !strings.Contains(Resources, "sm_90") || !strings.Contains(Resources, "QGMMA=") ||
		!strings.Contains(Resources, "fp8attn_paged_d128") || !strings.Contains(Resources, "fp8attn_paged_ws_d128") || !strings.Contains(Resources, "fp8attn_stage10_d128: loop") ||
		!strings.Contains(Resources, "sm_80") {
		t.Error("resource report incomplete")
	}
}

// TestFastDivFormula checks the arithmetic of paged.cu's FastDiv, written
// here in Go: for d >= 1, s = ceil(log2 d) and m = floor(2^32·(2^s -
// d)/d) + 1, (umulhi(n, m) + n) >> s is n / d for every 0 <= n < 2^31. It
// runs every n below 2^16 and the top of the range for each d up to 4096,
// and every power of two and its neighbours up to 2^30, and random pairs.
// (The GPU tests run the kernel's own transcription on the divisors the
// paged kernels use.)
func TestFastDivFormula(t *testing.T) {
	div := func(n, d uint32) uint32 {
		s := uint32(32 - bits.LeadingZeros32(d-1))
		m := uint32(((uint64(1)<<s-uint64(d))<<32)/uint64(d)) + 1
		hi := uint32((uint64(n) * uint64(m)) >> 32)
		return (hi + n) >> s
	}
	check := func(n, d uint32) {
		if got := div(n, d); got != n/d {
			t.Fatalf("%d / %d: %d, want %d", n, d, got, n/d)
		}
	}
	const top = 1<<31 - 1
	for d := uint32(1); d <= 4096; d++ {
		for n := uint32(0); n < 1<<16; n++ {
			check(n, d)
		}
		for n := uint32(top - 4096); n <= top; n++ {
			check(n, d)
		}
	}
	for k := 1; k <= 30; k++ {
		for _, d := range []uint32{1<<k - 1, 1 << k, 1<<k + 1} {
			for _, n := range []uint32{0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d, top - 1, top} {
				check(n%(top+1), d)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1 << 20 {
		check(rng.Uint32N(top+1), 1+rng.Uint32N(top))
	}
}
