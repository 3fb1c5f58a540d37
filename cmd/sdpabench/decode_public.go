package main

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/sdpa"
)

// The public side of the decode mode: the same tokens appended to an
// sdpa.KVCache (MaxSeqLen Sk, so that a graph's launch is planned as the
// kernel's is), a decode step captured once with Device.Capture, checked
// against the same oracle as the backend's call (the cache holds the same
// codes and scales: a page's depend only on its tokens, in order), then
// timed as a serving loop runs it: replays back to back, host-timed, and
// on a device whose backend times calls between CUDA events, the device
// time per replay.

// callTimer is implemented by backends that time the device work of calls
// issued from the host between CUDA events (cuda: EventTimes): µs a call,
// one figure per batch of calls.
type callTimer interface {
	EventTimes(iters int, call func() error) ([]float64, error)
}

// publicDecode is a decode step through the public API.
type publicDecode struct {
	dev    *sdpa.Device
	cache  *sdpa.KVCache
	ids    []sdpa.SeqID
	q, out *sdpa.DeviceTensor
	wait   *sdpa.DeviceTensor // a one-row tensor whose download waits for the replays
	graph  *sdpa.Graph
	hkv, d int
}

// newPublicDecode opens device name and makes a cache for b sequences of
// up to maxLen tokens of shape s's heads, in pages of decodePage tokens.
func newPublicDecode(name string, s backend.Shape, maxLen int) (*publicDecode, error) {
	dev, err := sdpa.Open(name)
	if err != nil {
		return nil, err
	}
	per := (maxLen + decodePage - 1) / decodePage
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: s.Hkv, HeadDim: s.D, PageSize: decodePage,
		MaxTokens: s.B * per * decodePage, MaxSeqLen: per * decodePage})
	if err != nil {
		return nil, err
	}
	pd := &publicDecode{dev: dev, cache: cache, hkv: s.Hkv, d: s.D}
	for range s.B {
		id, err := cache.AddSequence()
		if err != nil {
			return nil, errors.Join(err, pd.close())
		}
		pd.ids = append(pd.ids, id)
	}
	return pd, nil
}

// append adds n tokens (k and v, [Hkv][n][D]) to sequence b.
func (pd *publicDecode) append(b, n int, k, v []float32) error {
	kt, err1 := pd.dev.Upload(&sdpa.Tensor{Data: k, B: 1, H: pd.hkv, S: n, D: pd.d})
	vt, err2 := pd.dev.Upload(&sdpa.Tensor{Data: v, B: 1, H: pd.hkv, S: n, D: pd.d})
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	return errors.Join(pd.cache.Append(pd.ids[b:b+1], kt, vt), kt.Free(), vt.Free())
}

// capture uploads p's queries and captures KVCache.Attention of them (p's
// scale and mask, Sq = p.Sq) into a Graph.
func (pd *publicDecode) capture(p *backend.PagedProblem) error {
	var err error
	if pd.q, err = pd.dev.Upload(&sdpa.Tensor{Data: p.Q, B: p.B, H: p.Hq, S: p.Sq, D: p.D, Layout: p.Layout}); err != nil {
		return err
	}
	if pd.out, err = pd.dev.NewTensor(p.B, p.Hq, p.Sq, p.D, p.Layout); err != nil {
		return err
	}
	if pd.wait, err = pd.dev.NewTensor(1, 1, 1, 1, sdpa.BHSD); err != nil {
		return err
	}
	opts := &sdpa.Options{Scale: p.Scale, Mask: p.Mask}
	pd.graph, err = pd.dev.Capture(func() error { return pd.cache.Attention(pd.out, nil, pd.q, pd.ids, opts) })
	return err
}

// result replays the graph once and returns its output.
func (pd *publicDecode) result() ([]float32, error) {
	b, h, s, d := pd.out.Dims()
	host := &sdpa.Tensor{Data: make([]float32, b*h*s*d), B: b, H: h, S: s, D: d, Layout: pd.out.Layout()}
	if err := pd.graph.Replay(); err != nil {
		return nil, err
	}
	return host.Data, pd.out.Download(host)
}

// hostTimes returns µs a replay, host-timed: batches of reps replays back
// to back and the wait for the last, one figure a batch.
func (pd *publicDecode) hostTimes(batches, reps int) ([]float64, error) {
	sink := &sdpa.Tensor{Data: make([]float32, 1), B: 1, H: 1, S: 1, D: 1}
	out := make([]float64, batches)
	for i := range out {
		t0 := time.Now()
		for range reps {
			if err := pd.graph.Replay(); err != nil {
				return nil, err
			}
		}
		if err := pd.wait.Download(sink); err != nil {
			return nil, err
		}
		out[i] = float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(reps)
	}
	return out, nil
}

func (pd *publicDecode) close() error {
	var errs []error
	if pd.graph != nil {
		errs = append(errs, pd.graph.Close())
	}
	for _, t := range []*sdpa.DeviceTensor{pd.q, pd.out, pd.wait} {
		if t != nil {
			errs = append(errs, t.Free())
		}
	}
	return errors.Join(append(errs, pd.cache.Close())...)
}

// publicTimes times the public decode step: host per replay (p50, p90)
// and, where the backend times calls on the device, device per replay.
func (pd *publicDecode) times(be backend.Backend, iters int) (host, device []float64, err error) {
	t0 := time.Now()
	if _, err := pd.hostTimes(1, 1); err != nil { // (and a warm-up)
		return nil, nil, err
	}
	one := max(time.Since(t0), time.Microsecond)
	reps := max(1, min(200, int(200*time.Millisecond/one)))
	batches := 10
	if iters > 0 {
		batches = max(1, iters/reps)
	}
	if host, err = pd.hostTimes(batches, reps); err != nil {
		return nil, nil, err
	}
	sort.Float64s(host)
	if ct, ok := be.(callTimer); ok {
		if device, err = ct.EventTimes(max(iters, 200), pd.graph.Replay); err != nil {
			return nil, nil, err
		}
		sort.Float64s(device)
	}
	return host, device, nil
}

// publicLine formats the public step's times beside the kernel's device
// time (0: unknown).
func publicLine(host, device []float64, kernel float64) string {
	s := fmt.Sprintf("  public KVCache.Attention replayed (Device.Capture): host p50 %s p90 %s a replay (back to back, %d batches)",
		fmtDur(host[len(host)/2]), fmtDur(host[len(host)*9/10]), len(host))
	if len(device) > 0 {
		p50 := device[len(device)/2]
		s += fmt.Sprintf("; device p50 %s p90 %s a replay (CUDA events)", fmtDur(p50), fmtDur(device[len(device)*9/10]))
		if kernel > 0 {
			s += fmt.Sprintf(", %.2fx the kernel's", p50/kernel)
		}
	}
	return s + "\n"
}
