// Command sdpabench validates attention backends against the float64 oracle
// and then times them: for every shape and seed it prints the error against
// the oracle (max, mean, fraction of elements beyond the tolerance, PASS or
// FAIL) with the tolerance it used, for FP8 also the error against exact
// attention on the unquantized inputs, then latency percentiles and GFLOP/s.
//
// Usage:
//
//	sdpabench [flags]                 validate and benchmark (-h lists the flags)
//	sdpabench compare A.json B.json   p50 latencies and speedups of B over A, shape by shape
//	sdpabench -list                   the registered backends and the GPU kernels -kernel names, marking those this build lacks
//	sdpabench -kernels                the GPU kernels' ptxas resource report
//	sdpabench -stages                 the GPU kernel names -kernel takes, on one line (for scripts)
//	sdpabench -decode                 a decode step against a paged FP8 KV cache (decode.go)
//
// On a backend with device memory and graphs (cuda) it times the public
// call: Device.Attention on device tensors (FP8 tensors, and float32
// tensors with FP8 precision), captured with Device.Capture and replayed,
// per call (public.go); the check holds that call's output to the oracle.
// -kernel-only, or -kernel NAME, times the kernel alone instead, labelled
// "kernel only": per call in CUDA-graph replay between CUDA events, and in
// batches of back-to-back launches. Elsewhere (cpu) it times the backend's
// call on host slices. -accuracy prints the FP8 error of the public call on
// the cuDNN FP8 peer's accuracy cases (accuracy.go).
//
// With no flags: the mission shape (B2 H8 S256 D64), the best available
// backend, FP8E4M3. Inputs are N(0,1) from a fresh seed, printed; set
// FP8ATTN_SEED to reproduce a run. Exit status: 0 when every validation
// passed, 1 when one failed, 2 on a usage or runtime error.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cuda/kernels"
	"github.com/fp8attn/fp8attn/internal/kernelreg"
	"github.com/fp8attn/fp8attn/internal/timing"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa" // registers the backends
	"github.com/fp8attn/fp8attn/sdpatest"
)

// Result is one (shape, seed) row of a run; -json writes a list of them.
type Result struct {
	Shape      string  `json:"shape"`
	Seed       uint64  `json:"seed"`
	Backend    string  `json:"backend"`
	Precision  string  `json:"precision"`
	Mask       string  `json:"mask"`
	MaxErr     float64 `json:"max_err"`
	MeanErr    float64 `json:"mean_err"`
	FracBeyond float64 `json:"frac_beyond_tol"`
	Tolerance  string  `json:"tolerance"`
	// RMSErr is the output's RMS error against the oracle, where the
	// backend has an RMS tier (RMSTolerance, its bound); Pass needs both.
	RMSErr       float64 `json:"rms_err,omitempty"`
	RMSTolerance string  `json:"rms_tolerance,omitempty"`
	Pass         bool    `json:"pass"`
	RelL2Exact   float64 `json:"rel_l2_vs_unquantized,omitempty"`
	P50us        float64 `json:"p50_us"`
	P90us        float64 `json:"p90_us"`
	GPUP50us     float64 `json:"gpu_p50_us,omitempty"`        // CUDA-graph replay
	LaunchP50us  float64 `json:"gpu_launch_p50_us,omitempty"` // back-to-back launches
	GPUP90us     float64 `json:"gpu_p90_us,omitempty"`
	GFLOPs       float64 `json:"gflops"`
	Iters        int     `json:"iters"`
	Date         string  `json:"date"`
	Layout       string  `json:"layout,omitempty"`
	// Inputs is what the public call read: "fp8-tensors" or
	// "float32-tensors" (empty outside public mode).
	Inputs string `json:"inputs,omitempty"`
	// Timing says what was timed: "public call, graph replay", "kernel
	// only" or "host" (the backend's call on host slices).
	Timing        string `json:"timing,omitempty"`
	CallsPerGraph int    `json:"calls_per_graph,omitempty"`
}

const usage = `sdpabench: validate attention backends against a float64 oracle, then time them.

Usage:
  sdpabench [flags]                 validate and benchmark
  sdpabench compare A.json B.json   p50 latencies and speedups of B over A (from -json files)
  sdpabench -list | -kernels | -stages
  sdpabench -decode [-shapes decode-b8,...] [-ragged]   decode steps against a paged FP8 KV cache
  sdpabench -accuracy               FP8 error of the public call on the cuDNN FP8 peer's accuracy cases

Shapes: small B1 H2 S64 D64, mission B2 H8 S256 D64, long B1 H8 S2048 D64,
large B4 H32 S4096 D128, prefill (the GPU prefill table of docs/BENCHMARKS.md),
or BxHxSqxSkxD / BxHqxHkvxSqxSkxD; a suffix :causal, :causal-lr, :bshd sets
that shape's mask or layout.
On cuda it times the public call (Device.Attention on device tensors, in a
replayed graph); -kernel-only or -kernel times the kernel alone, labelled so.
Inputs are N(0,1) from a fresh seed (printed); FP8ATTN_SEED=N reproduces a run.
Exit status: 0 all validations passed, 1 a validation failed, 2 usage or runtime error.

Flags:
`

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	if len(os.Args) > 1 && os.Args[1] == "compare" {
		if len(os.Args) != 4 {
			fail(errors.New("usage: sdpabench compare A.json B.json"))
		}
		fail(compare(os.Stdout, os.Args[2], os.Args[3]))
		return
	}
	var (
		shapes    = flag.String("shapes", "mission", "comma-separated: small, mission, long, large, prefill, or BxHxSqxSkxD / BxHqxHkvxSqxSkxD, each with optional :causal, :causal-lr, :bshd")
		seeds     = flag.Int("seeds", 1, "random input sets per shape (each validated, the first timed)")
		iters     = flag.Int("iters", 0, "timed iterations (0: enough for about one second, at least 5)")
		be        = flag.String("backend", "", "backend name (default: best available); see -list")
		kernel    = flag.String("kernel", "", "GPU kernel by name: a target (sm90, sm89, sm80: backend cuda/NAME) or a ladder stage (stage1 .. stage8); see -stages")
		precision = flag.String("precision", "fp8", "fp8 or fp32")
		mask      = flag.String("mask", "none", "none, causal (upper-left) or causal-lr (lower-right)")
		lay       = flag.String("layout", "bhsd", "bhsd or bshd: the layout of Q, K, V and the output")
		kernOnly  = flag.Bool("kernel-only", false, "on a device backend (cuda), time the kernel alone (labelled \"kernel only\") instead of the public call")
		graphCall = flag.Int("graph-calls", 0, "public call on a device: calls captured a graph (0: 20, or 2 from 1e11 FLOPs a call, as the peers' scripts)")
		accuracy  = flag.Bool("accuracy", false, "print the FP8 error of the public call on the cuDNN FP8 peer's accuracy cases and exit")
		jsonOut   = flag.String("json", "", "write results as JSON to this file")
		list      = flag.Bool("list", false, "list the registered backends and exit")
		showKern  = flag.Bool("kernels", false, "print the GPU kernels' ptxas resource report (registers, shared memory, spills) and exit")
		stages    = flag.Bool("stages", false, "print the GPU kernel names -kernel takes (for scripts) and exit")
		noCheck   = flag.Bool("nocheck", false, "skip validation (timing only)")
		decode    = flag.Bool("decode", false, "decode mode: new tokens (Sq) against a paged FP8 KV cache of Sk tokens a sequence; shapes decode, decode-b8, decode-32k, decode-b64 or BxHqxHkvxSqxSkxD (default decode)")
		ragged    = flag.Bool("ragged", false, "decode mode: each sequence's length drawn uniformly from Sq..Sk (by the seed), a batch of continuous batching, in place of Sk for all")
	)
	flag.Parse()
	if *showKern {
		fmt.Print(kernels.Resources)
		return
	}
	if *stages {
		fmt.Println(strings.Join(kernelreg.Names(), " "))
		return
	}
	if *list {
		for _, name := range sdpa.Backends() {
			be, err := backend.Lookup(name)
			fmt.Printf("%-14s%s\n", name, availability(be, err))
		}
		fmt.Println("GPU kernels (-kernel NAME):")
		for _, name := range kernelreg.Names() {
			be, err := kernelreg.Lookup(name)
			fmt.Printf("  %-12s%s\n", name, availability(be, err))
		}
		return
	}
	if *accuracy {
		ok, err := config{}.runAccuracy(os.Stdout, *be, accuracyCases)
		fail(err)
		if !ok {
			os.Exit(1)
		}
		return
	}
	cfg := config{iters: *iters, seeds: *seeds, check: !*noCheck, ragged: *ragged, kernelOnly: *kernOnly, graphCalls: *graphCall}
	if *ragged && !*decode {
		fail(fmt.Errorf("-ragged is a decode-mode flag (with -decode)"))
	}
	var err error
	if cfg.prec, err = parsePrecision(*precision); err != nil {
		fail(err)
	}
	if cfg.mask, err = backend.ParseMask(*mask); err != nil {
		fail(err)
	}
	var l backend.Layout
	switch *lay {
	case "bhsd":
	case "bshd":
		l = backend.BSHD
	default:
		fail(fmt.Errorf("layout %q: want bhsd or bshd", *lay))
	}
	cfg.backend = *be
	if *kernel != "" {
		if *be != "" {
			fail(errors.New("-backend and -kernel name one backend each: give one"))
		}
		if cfg.kernel, err = kernelreg.Lookup(*kernel); err != nil {
			fail(err)
		}
	}
	var results []Result
	allPass := true
	if cfg.check && !*decode {
		fmt.Print(legend(cfg.prec))
	}
	if *decode {
		list := *shapes
		if list == "mission" { // the flag's default
			list = "decode"
		}
		if cfg.check {
			fmt.Print(decodeLegend)
		}
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			s, ok := decodeShapes[name]
			if !ok {
				if s, err = sdpatest.ParseShape(name); err != nil {
					fail(err)
				}
			}
			r, err := cfg.runDecode(name, s)
			if err != nil {
				fail(err)
			}
			allPass = allPass && (r.Pass || !cfg.check)
			results = append(results, r)
		}
	}
	var specs []spec
	if !*decode {
		if specs, err = parseSpecs(*shapes, cfg.mask, l); err != nil {
			fail(err)
		}
	}
	devs := map[string]*sdpa.Device{}
	for _, sp := range specs {
		var rs []Result
		if name := cfg.publicName(sp); name != "" {
			if devs[name] == nil {
				if devs[name], err = sdpa.Open(name); err != nil {
					fail(err)
				}
			}
			rs, err = cfg.runPublic(devs[name], sp)
		} else {
			rs, err = cfg.runShape(sp)
		}
		if err != nil {
			fail(err)
		}
		for _, r := range rs {
			allPass = allPass && (r.Pass || !cfg.check)
		}
		results = append(results, rs...)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fail(err)
		}
	}
	if !allPass {
		os.Exit(1)
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdpabench:", err)
		os.Exit(2)
	}
}

type config struct {
	backend string
	kernel  backend.Backend // -kernel's, nil when none: used in place of backend
	prec    backend.Precision
	mask    backend.Mask
	iters   int
	seeds   int
	check   bool
	ragged  bool // decode mode: sequences of lengths drawn from Sq..Sk
	// kernelOnly times a device backend's kernel alone (runShape) in
	// place of the public call (runPublic).
	kernelOnly bool
	graphCalls int        // public mode's calls a graph; 0: callsPerGraph
	attend     attendFunc // public mode's call; nil: Device.Attention
	// tierName names the backend whose accuracy tiers the check applies
	// (tiersFor); empty: the backend checked.
	tierName string
}

// publicName returns the backend whose public call sp is timed on: the one
// -backend names or the best available, if it has device memory and
// graphs; "" otherwise, and with -kernel or -kernel-only (runShape then
// times, or reports why it cannot).
func (c config) publicName(sp spec) string {
	if c.kernel != nil || c.kernelOnly {
		return ""
	}
	be, err := backend.Select(c.backend, header(sp, c.prec))
	if err != nil || !publicBackend(be) {
		return ""
	}
	return be.Name()
}

func (c config) runShape(sp spec) ([]Result, error) {
	name, s := sp.name, sp.shape
	c.mask = sp.mask
	var out []Result
	for seedIdx := 0; seedIdx < c.seeds; seedIdx++ {
		seed := sdpatest.Seed() + uint64(seedIdx)
		rng := rand.New(rand.NewPCG(seed, 0))
		in := sdpatest.RandomInputs(rng, s, 1)
		p, _, _ := sdpatest.NewProblemLayout(s, in, float32(1/math.Sqrt(float64(s.D))), c.mask, c.prec, sp.layout)
		if err := p.Validate(); err != nil {
			return nil, err
		}
		be, err := c.selectBackend(p)
		if err != nil {
			return nil, err
		}
		r := Result{Shape: name, Seed: seed, Backend: be.Name(), Precision: c.prec.String(), Mask: c.mask.String(),
			Layout: sp.layout.String(), Timing: "host", Date: time.Now().UTC().Format(time.RFC3339)}
		if err := be.Attention(p); err != nil {
			return nil, err
		}
		fmt.Printf("%s: %s, mask %v, layout %v, %v, backend %s, seed %d\n", name, describe(s), c.mask, sp.layout, c.prec, describeBackend(be), seed)
		if c.check {
			fmt.Fprintf(os.Stderr, "[%s seed %d] float64 oracle...\n", name, seed)
			want, _ := oracle.Naive(p)
			report := c.tiersFor(be.Name(), p).judge(&r, p.Out, want)
			if c.prec == backend.FP8E4M3 {
				exact, _, _ := sdpatest.NewProblemLayout(s, in, p.Scale, c.mask, backend.FP32, sp.layout)
				w, _ := oracle.Naive(exact)
				r.RelL2Exact = sdpatest.Compare(p.Out, w, sdpatest.Tolerance{Atol: math.Inf(1)}).RelL2
			}
			fmt.Printf("  check  %s\n", report)
			if c.prec == backend.FP8E4M3 {
				fmt.Printf("         FP8 error: relative L2 %.3g against exact attention on the unquantized inputs\n", r.RelL2Exact)
			}
		}
		if seedIdx == 0 {
			c.time(&r, be, p, s)
			fmt.Printf("  time   host p50 %s p90 %s", fmtDur(r.P50us), fmtDur(r.P90us))
			if tm, ok := be.(timing.Timer); ok {
				times, err := tm.DeviceTimes(p, r.Iters)
				if err != nil {
					return nil, err
				}
				sort.Float64s(times)
				r.GPUP50us, r.GPUP90us = times[len(times)/2], times[len(times)*9/10]
				r.GFLOPs = s.FLOPs(c.mask) / (r.GPUP50us * 1e3)
				r.Timing = "kernel only"
				fmt.Printf("  kernel only: device (graph replay) p50 %s p90 %s", fmtDur(r.GPUP50us), fmtDur(r.GPUP90us))
			}
			if tm, ok := be.(timing.LaunchTimer); ok {
				times, err := tm.LaunchTimes(p, r.Iters)
				if err != nil {
					return nil, err
				}
				sort.Float64s(times)
				r.LaunchP50us = times[len(times)/2]
				fmt.Printf("  back-to-back launches p50 %s", fmtDur(r.LaunchP50us))
			}
			fmt.Printf("  %.2f GFLOP/s (%d iters)\n", r.GFLOPs, r.Iters)
		}
		out = append(out, r)
	}
	return out, nil
}

// legend explains the check line once, before the first shape.
func legend(prec backend.Precision) string {
	s := "check: max_err and mean_err are |ours - float64 oracle| over the output, both computed on the same inputs;\n" +
		"       PASS means every element is within the tolerance shown, derived from the arithmetic (sdpatest),\n" +
		"       and, for the FP8 tensor-core kernels, the RMS error (rms_err) within its own bound too.\n"
	if prec == backend.FP8E4M3 {
		s += "       With fp8 those inputs are already quantized to E4M3 (one scale per batch and head), so max_err is\n" +
			"       the kernel's own error; the FP8 error line adds quantization: ours against exact attention on the\n" +
			"       float32 inputs.\n"
	}
	return s
}

// describe spells a shape out.
func describe(s backend.Shape) string {
	heads := fmt.Sprintf("H%d", s.Hq)
	if s.Hkv != s.Hq {
		heads = fmt.Sprintf("Hq%d Hkv%d", s.Hq, s.Hkv)
	}
	seq := fmt.Sprintf("S%d", s.Sq)
	if s.Sk != s.Sq {
		seq = fmt.Sprintf("Sq%d Sk%d", s.Sq, s.Sk)
	}
	return fmt.Sprintf("B%d %s %s D%d (%.3g GFLOP without mask)", s.B, heads, seq, s.D, s.FLOPs(backend.NoMask)/1e9)
}

// selectBackend returns the backend to run p with: -kernel's if it
// supports p, else backend.Select's for -backend.
func (c config) selectBackend(p *backend.Problem) (backend.Backend, error) {
	if c.kernel == nil {
		return backend.Select(c.backend, p)
	}
	if err := c.kernel.Supports(p); err != nil {
		return nil, err
	}
	return c.kernel, nil
}

// availability is the note -list prints after a backend's name: empty, or
// why this build or machine lacks it.
func availability(be backend.Backend, err error) string {
	if err == nil {
		if a, ok := be.(backend.Availability); ok {
			err = a.Available()
		}
	}
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return ""
}

// describeBackend names a backend with its configuration where it has one.
func describeBackend(be backend.Backend) string {
	if st, ok := be.(fmt.Stringer); ok {
		return st.String()
	}
	return be.Name()
}

// time measures host end-to-end latency of the backend call, back to back.
func (c config) time(r *Result, be backend.Backend, p *backend.Problem, s backend.Shape) {
	n := c.iters
	if n <= 0 {
		t0 := time.Now()
		be.Attention(p)
		one := time.Since(t0)
		n = int(time.Second / max(one, time.Microsecond))
		n = max(5, min(n, 100000))
	}
	for i := 0; i < min(n/10+1, 20); i++ { // warm up
		be.Attention(p)
	}
	d := make([]float64, n)
	for i := range d {
		t0 := time.Now()
		be.Attention(p)
		d[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	sort.Float64s(d)
	r.Iters = n
	r.P50us, r.P90us = d[n/2], d[n*9/10]
	r.GFLOPs = s.FLOPs(c.mask) / (r.P50us * 1e3)
}

func fmtDur(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.3fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.3fms", us/1e3)
	}
	return fmt.Sprintf("%.2fµs", us)
}

func parsePrecision(s string) (backend.Precision, error) {
	for _, p := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("precision %q: want fp8 or fp32", s)
}

func load(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []Result
	return rs, json.Unmarshal(b, &rs)
}

// compare prints, for every (shape, precision, mask) in both files, the
// p50 latencies and the speedup of B over A.
func compare(w io.Writer, a, b string) error {
	ra, err := load(a)
	if err != nil {
		return err
	}
	rb, err := load(b)
	if err != nil {
		return err
	}
	key := func(r Result) string {
		k := r.Shape + " " + r.Precision + " " + r.Mask
		for _, x := range []string{r.Layout, r.Inputs} {
			if x != "" && x != "bhsd" {
				k += " " + x
			}
		}
		return k
	}
	lat := func(r Result) float64 { // device time where measured, else host
		if r.GPUP50us > 0 {
			return r.GPUP50us
		}
		return r.P50us
	}
	base := map[string]Result{}
	for _, r := range ra {
		if lat(r) > 0 {
			base[key(r)] = r
		}
	}
	fmt.Fprintf(w, "%-28s %-14s %-14s %12s %12s %8s\n", "shape precision mask", "A", "B", "A p50", "B p50", "B/A")
	n := 0
	for _, r := range rb {
		x, ok := base[key(r)]
		if !ok || lat(r) == 0 {
			continue
		}
		n++
		fmt.Fprintf(w, "%-28s %-14s %-14s %12s %12s %7.2fx\n", key(r), x.Backend, r.Backend, fmtDur(lat(x)), fmtDur(lat(r)), lat(x)/lat(r))
	}
	if n == 0 {
		return errors.New("compare: no (shape, precision, mask) in common")
	}
	return nil
}
