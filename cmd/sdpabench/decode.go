package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/timing"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// The decode mode (-decode): attention of new tokens against a paged FP8 KV
// cache, as a generation step runs it. A shape's Sq is the new tokens per
// sequence (1 for a decode step), Sk the tokens each of the B sequences
// already holds; the cache is filled with N(0,1) keys and values in pages of
// decodePage tokens handed out in shuffled order, and the queries see their
// sequence with the lower-right causal alignment. The check reads the
// cache's pages back (backend.PagedReader) and holds the result to the
// float64 oracle on exactly those values, with the float32 tier the paged
// suite uses. The same tokens go to the public API's cache (sdpa.KVCache,
// decode_public.go), whose decode step, captured once in a Graph, is
// checked against the same oracle and timed as a serving loop runs it:
// replays back to back, host-timed, and device time per replay between
// CUDA events on cuda; those are the run's figures (Result's p50 and
// gpu_p50). Beside them: the backend's call on host slices, host end to
// end, and the kernel's device time (timing.PagedTimer: launches captured
// in a CUDA graph, no host work), which the public replay is compared to.
// With -kernel the public API is not run (it opens backends by name).

// decodeLegend explains the decode mode's check line.
const decodeLegend = "check: |ours - float64 oracle| on the values the cache holds (its E4M3 codes times their page scales,\n" +
	"       read back), float32 queries; PASS means every element is within the float32 tolerance (sdpatest).\n" +
	"       The backend's call and the public KVCache.Attention (captured in a Graph, replayed) are checked alike.\n"

// decodePage is the page size of the decode mode's cache.
const decodePage = 64

// decodeShapes are the named decode shapes: a serving model's decode
// steps (one new token, D=128, 32 query heads over 8 KV heads).
var decodeShapes = map[string]backend.Shape{
	"decode":     {B: 1, Hq: 32, Hkv: 8, Sq: 1, Sk: 8192, D: 128},
	"decode-b8":  {B: 8, Hq: 32, Hkv: 8, Sq: 1, Sk: 8192, D: 128},
	"decode-32k": {B: 1, Hq: 32, Hkv: 8, Sq: 1, Sk: 32768, D: 128},
	"decode-b64": {B: 64, Hq: 32, Hkv: 8, Sq: 1, Sk: 2048, D: 128},
}

// pagedBackend returns kernel (-kernel's) if it is not nil, else the named
// backend, or the first registered one that is available and has a paged
// cache.
func pagedBackend(name string, kernel backend.Backend) (backend.Backend, backend.PagedBackend, error) {
	names := []string{name}
	if name == "" {
		names = backend.Names()
	}
	var errs []error
	for _, n := range names {
		be, err := backend.Lookup(n)
		if kernel != nil {
			be, err, n = kernel, nil, kernel.Name()
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a, ok := be.(backend.Availability); ok {
			if err := a.Available(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		pb, ok := be.(backend.PagedBackend)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: backend %s has no paged cache", backend.ErrUnsupported, n))
			continue
		}
		return be, pb, nil
	}
	return nil, nil, fmt.Errorf("no backend for the decode mode: %w", errors.Join(errs...))
}

// runDecode fills a cache for shape s and validates and times attention of
// s.Sq new tokens per sequence against it.
func (c config) runDecode(name string, s backend.Shape) (Result, error) {
	be, pb, err := pagedBackend(c.backend, c.kernel)
	if err != nil {
		return Result{}, err
	}
	seed := sdpatest.Seed()
	rng := rand.New(rand.NewPCG(seed, 0xDEC0DE))
	per := (s.Sk + decodePage - 1) / decodePage
	cfg := backend.PagedConfig{KVHeads: s.Hkv, HeadDim: s.D, PageSize: decodePage, Pages: s.B * per}
	kv, err := pb.NewPagedKV(cfg)
	if err != nil {
		return Result{}, err
	}
	defer kv.Close()
	order := rng.Perm(cfg.Pages)
	table := make([]int32, s.B*per)
	for i := range table {
		table[i] = int32(order[i])
	}
	// The sequences' lengths: Sk each, or with -ragged drawn from Sq..Sk
	// (at least one key).
	if c.ragged && max(1, s.Sq) > s.Sk {
		return Result{}, fmt.Errorf("%s: -ragged draws lengths from Sq..Sk, and Sq %d > Sk %d", name, s.Sq, s.Sk)
	}
	lens, keys := make([]int32, s.B), 0
	for b := range lens {
		lens[b] = int32(s.Sk)
		if c.ragged {
			lo := max(1, s.Sq)
			lens[b] = int32(lo + rng.IntN(s.Sk-lo+1))
		}
		keys += int(lens[b])
	}
	var pd *publicDecode
	if c.kernel == nil {
		if pd, err = newPublicDecode(be.Name(), s, s.Sk); err != nil {
			return Result{}, fmt.Errorf("the public API on backend %s: %w", be.Name(), err)
		}
		defer pd.close()
	}
	// Chunks of the sequences in turn, so that the public cache's pages
	// interleave as a server's do (the backend's table is shuffled).
	const chunk = 1024 // tokens per append
	a := &backend.PagedAppend{B: 1}
	for t0 := 0; t0 < s.Sk; t0 += chunk {
		for b := range s.B {
			if t0 >= int(lens[b]) {
				continue
			}
			n := min(chunk, int(lens[b])-t0)
			a.N, a.K, a.V = n, randNormal(rng, n*s.Hkv*s.D), randNormal(rng, n*s.Hkv*s.D)
			a.Page, a.Slot = a.Page[:0], a.Slot[:0]
			for t := t0; t < t0+n; t++ {
				a.Page, a.Slot = append(a.Page, table[b*per+t/decodePage]), append(a.Slot, int32(t%decodePage))
			}
			if err := kv.Append(a); err != nil {
				return Result{}, err
			}
			if pd != nil {
				if err := pd.append(b, n, a.K, a.V); err != nil {
					return Result{}, err
				}
			}
		}
	}
	p := &backend.PagedProblem{B: s.B, Hq: s.Hq, Hkv: s.Hkv, Sq: s.Sq, D: s.D, Scale: float32(1 / math.Sqrt(float64(s.D))),
		Mask: backend.CausalLowerRight, Q: randNormal(rng, s.B*s.Hq*s.Sq*s.D), BlockTable: table, PagesPerSeq: per,
		Out: make([]float32, s.B*s.Hq*s.Sq*s.D), SeqLens: lens}
	if err := kv.Attention(p); err != nil {
		return Result{}, err
	}
	var pubOut []float32
	if pd != nil {
		if err := pd.capture(p); err != nil {
			return Result{}, err
		}
		if pubOut, err = pd.result(); err != nil {
			return Result{}, err
		}
	}
	r := Result{Shape: name, Seed: seed, Backend: be.Name(), Precision: "fp8-cache", Mask: backend.CausalLowerRight.String(),
		Date: time.Now().UTC().Format(time.RFC3339)}
	cacheBytes := float64(2 * s.Hkv * keys * s.D)
	cached := fmt.Sprint(s.Sk)
	if c.ragged {
		cached = fmt.Sprintf("%d to %d (ragged, %d on average)", max(1, s.Sq), s.Sk, keys/max(1, s.B))
	}
	fmt.Printf("%s (decode): B%d Hq%d Hkv%d, %d new token(s) against %s cached, D%d, pages of %d shuffled; %.3g MB of FP8 cache; backend %s, seed %d\n",
		name, s.B, s.Hq, s.Hkv, s.Sq, cached, s.D, decodePage, cacheBytes/1e6, describeBackend(be), seed)
	if c.check {
		reader, ok := kv.(backend.PagedReader)
		if !ok {
			return Result{}, fmt.Errorf("backend %s's cache cannot be read back to validate (use -nocheck)", be.Name())
		}
		fmt.Fprintf(os.Stderr, "[%s seed %d] float64 oracle...\n", name, seed)
		st, tol, err := checkDecode(reader, p, cfg)
		if err != nil {
			return Result{}, err
		}
		r.MaxErr, r.MeanErr, r.FracBeyond, r.Pass, r.Tolerance = st.MaxErr, st.MeanErr, st.FracBeyond(), st.Beyond == 0, tol.Why
		verdict := "PASS"
		if !r.Pass {
			verdict = "FAIL"
		}
		fmt.Printf("  check  %s  max_err %.3g  mean_err %.3g  beyond tolerance %.2f%%  (backend call; against the cache's own values; tolerance: %s)\n",
			verdict, r.MaxErr, r.MeanErr, 100*r.FracBeyond, tol.Why)
		if pubOut != nil {
			pp := *p
			pp.Out = pubOut
			st, tol, err := checkDecode(reader, &pp, cfg)
			if err != nil {
				return Result{}, err
			}
			verdict, pass := "PASS", st.Beyond == 0
			if !pass {
				verdict = "FAIL"
			}
			fmt.Printf("  check  %s  max_err %.3g  mean_err %.3g  beyond tolerance %.2f%%  (public KVCache.Attention, replayed; tolerance: %s)\n",
				verdict, st.MaxErr, st.MeanErr, 100*st.FracBeyond(), tol.Why)
			r.Pass = r.Pass && pass
			r.MaxErr, r.MeanErr, r.FracBeyond = max(r.MaxErr, st.MaxErr), max(r.MeanErr, st.MeanErr), max(r.FracBeyond, st.FracBeyond())
		}
	}
	n := c.iters
	if n <= 0 {
		t0 := time.Now()
		kv.Attention(p)
		n = max(5, min(int(time.Second/max(time.Since(t0), time.Microsecond)), 100000))
	}
	d := make([]float64, n)
	for i := range d {
		t0 := time.Now()
		if err := kv.Attention(p); err != nil {
			return Result{}, err
		}
		d[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	sort.Float64s(d)
	r.Iters, r.P50us, r.P90us = n, d[n/2], d[n*9/10]
	lat := r.P50us
	fmt.Printf("  time   backend call (host slices): host p50 %s p90 %s", fmtDur(r.P50us), fmtDur(r.P90us))
	kernel := 0.0
	if tm, ok := kv.(timing.PagedTimer); ok {
		times, err := tm.PagedTimes(p, n)
		if err != nil {
			return Result{}, err
		}
		sort.Float64s(times)
		r.GPUP50us, r.GPUP90us = times[len(times)/2], times[len(times)*9/10]
		lat, kernel = r.GPUP50us, r.GPUP50us
		fmt.Printf("; kernel (launches in a CUDA graph) device p50 %s p90 %s", fmtDur(r.GPUP50us), fmtDur(r.GPUP90us))
	}
	if pd != nil {
		fmt.Println()
		host, device, err := pd.times(be, c.iters)
		if err != nil {
			return Result{}, err
		}
		fmt.Print(publicLine(host, device, kernel))
		r.P50us, r.P90us, lat = host[len(host)/2], host[len(host)*9/10], host[len(host)/2]
		r.GPUP50us, r.GPUP90us = 0, 0
		if len(device) > 0 {
			r.GPUP50us, r.GPUP90us = device[len(device)/2], device[len(device)*9/10]
			lat = r.GPUP50us
		}
		fmt.Print("  rate  ")
	}
	r.GFLOPs = 4 * float64(s.Hq*s.Sq*s.D) * float64(keys) / (lat * 1e3)
	if gbs := cacheBytes / (lat * 1e3); gbs >= 1000 {
		fmt.Printf("  %.2f TB/s of cache (%d iters)\n", gbs/1000, n)
	} else {
		fmt.Printf("  %.3g GB/s of cache (%d iters)\n", gbs, n)
	}
	return r, nil
}

// checkDecode holds p.Out to the float64 oracle on the values the cache
// holds, sequence by sequence (their lengths may differ), each with its own
// float32 tolerance. The stats are merged; the tolerance returned is the
// widest.
func checkDecode(r backend.PagedReader, p *backend.PagedProblem, c backend.PagedConfig) (sdpatest.Stats, sdpatest.Tolerance, error) {
	st := sdpatest.Stats{FirstBad: -1}
	var tol sdpatest.Tolerance
	var errSum float64
	rows := p.Hq * p.Sq * p.D // a sequence's outputs (the batch is outermost in every layout)
	for b := range p.B {
		seq, err := sdpatest.PagedSequence(r, p, c, b)
		if err != nil {
			return sdpatest.Stats{}, sdpatest.Tolerance{}, err
		}
		want, _ := oracle.Naive(seq)
		t := sdpatest.FP32Tolerance(seq)
		s := sdpatest.Compare(p.Out[b*rows:(b+1)*rows], want, t)
		if s.FirstBad >= 0 && st.FirstBad < 0 {
			st.FirstBad = b*rows + s.FirstBad
		}
		st.MaxErr = max(st.MaxErr, s.MaxErr)
		errSum += s.MeanErr * float64(s.N)
		st.Beyond += s.Beyond
		st.N += s.N
		if t.Atol > tol.Atol || tol.Why == "" {
			tol = t
		}
	}
	st.MeanErr = errSum / float64(max(st.N, 1))
	return st, tol, nil
}

func randNormal(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}
