// Command kvcache is a generation loop over an FP8 key/value cache: a toy
// one-layer model (random projections, 8 query heads sharing 2 KV heads)
// prefills a prompt for each of three sequences, then generates tokens one
// at a time for all of them in one batched call per step. Each new token's
// key and value are quantized once, when appended; the cache grows page by
// page. Half-way, one sequence finishes and is dropped, and a new one takes
// its pages (continuous batching): that step attends the new sequence's
// whole prompt and the others' new tokens in one varlen call
// (KVCache.AttentionVarlen: each sequence's own number of queries, packed
// into one tensor). The new prompt's last row, and at the end the last
// step's attention, are checked against float32 attention over the whole
// history, computed from scratch.
//
// The attention call of a step is captured once into a Graph and replayed at
// every later step (it reads the sequences as they are then); a new capture
// is made only when the batch changes. On "cuda" that is a CUDA graph, one
// launch a step; on "cpu" the call is made again. The join step's varlen
// call is made directly (a varlen call cannot be captured).
//
// The same program runs on a GPU host with -device cuda (built with -tags
// cuda).
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/fp8attn/fp8attn/sdpa"
)

const (
	hq, hkv, d = 8, 2, 64
	model      = hq * d // hidden size
)

// layer is the toy model: x -> (q, k, v) projections, and the attention
// output back to the hidden size.
type layer struct{ wq, wk, wv, wo []float32 }

func newLayer(rng *rand.Rand) *layer {
	m := func(rows, cols int) []float32 {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(rng.NormFloat64() / math.Sqrt(float64(cols)))
		}
		return w
	}
	return &layer{wq: m(hq*d, model), wk: m(hkv*d, model), wv: m(hkv*d, model), wo: m(model, hq*d)}
}

// matvec sets y = W·x for W of len(y) rows.
func matvec(y, w, x []float32) {
	for r := range y {
		var s float32
		for c, xc := range x {
			s += w[r*len(x)+c] * xc
		}
		y[r] = s
	}
}

// history keeps every token's float32 k and v of one sequence, only for the
// checks.
type history struct{ k, v [][]float32 }

// seq is one sequence of the batch.
type seq struct {
	id      sdpa.SeqID
	x       []float32 // the current token's hidden state
	hist    *history
	name    string
	promptQ []float32 // the prompt's queries, [len][hq][d]
}

// joinStep is the step at which fresh joins a and c: a and c append their
// new tokens, and one varlen call attends a's new query, fresh's whole
// prompt and c's new query (1 + len + 1 rows, packed in that order). Each
// sequence's next hidden state comes from its last row; fresh's last
// prompt row is checked against float32 attention over its prompt.
func joinStep(dev *sdpa.Device, cache *sdpa.KVCache, ly *layer, a, fresh, c *seq, opts *sdpa.Options) {
	prompt := len(fresh.promptQ) / (hq * d)
	rows := 1 + prompt + 1
	q := &sdpa.Tensor{Data: make([]float32, rows*hq*d), B: 1, H: hq, S: rows, D: d, Layout: sdpa.BSHD}
	k := &sdpa.Tensor{Data: make([]float32, 2*hkv*d), B: 2, H: hkv, S: 1, D: d, Layout: sdpa.BSHD}
	v := &sdpa.Tensor{Data: make([]float32, 2*hkv*d), B: 2, H: hkv, S: 1, D: d, Layout: sdpa.BSHD}
	for i, s := range []*seq{a, c} {
		row := []int{0, rows - 1}[i]
		matvec(q.Data[row*hq*d:(row+1)*hq*d], ly.wq, s.x)
		matvec(k.Data[i*hkv*d:(i+1)*hkv*d], ly.wk, s.x)
		matvec(v.Data[i*hkv*d:(i+1)*hkv*d], ly.wv, s.x)
		s.hist.k = append(s.hist.k, append([]float32(nil), k.Data[i*hkv*d:(i+1)*hkv*d]...))
		s.hist.v = append(s.hist.v, append([]float32(nil), v.Data[i*hkv*d:(i+1)*hkv*d]...))
	}
	copy(q.Data[hq*d:], fresh.promptQ)
	kd, err1 := dev.Upload(k)
	vd, err2 := dev.Upload(v)
	qd, err3 := dev.Upload(q)
	out, err4 := dev.NewTensor(1, hq, rows, d, sdpa.BSHD)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, t := range []*sdpa.DeviceTensor{kd, vd, qd, out} {
			t.Free()
		}
	}()
	if err := cache.Append([]sdpa.SeqID{a.id, c.id}, kd, vd); err != nil {
		log.Fatal(err)
	}
	if err := cache.AttentionVarlen(out, nil, qd, []sdpa.SeqID{a.id, fresh.id, c.id}, []int{1, prompt, 1}, opts); err != nil {
		log.Fatal(err)
	}
	res := &sdpa.Tensor{Data: make([]float32, rows*hq*d), B: 1, H: hq, S: rows, D: d, Layout: sdpa.BSHD}
	if err := out.Download(res); err != nil {
		log.Fatal(err)
	}
	last := prompt // fresh's last prompt row in the packed batch
	matvec(a.x, ly.wo, res.Data[:hq*d])
	matvec(fresh.x, ly.wo, res.Data[last*hq*d:(last+1)*hq*d])
	matvec(c.x, ly.wo, res.Data[(rows-1)*hq*d:])
	e := rowError(q.Data[last*hq*d:(last+1)*hq*d], fresh.hist, res.Data[last*hq*d:(last+1)*hq*d])
	fmt.Printf("  one varlen call: %d new queries of %s, 1 each of %s and %s; %s's last prompt row vs float32: relative L2 error %.3f\n",
		prompt, fresh.name, a.name, c.name, fresh.name, e)
	if e > 0.1 {
		log.Fatalf("error %.3f is too large", e)
	}
}

// rowError is the relative L2 error of got, the attention output of one
// query q over every token of hist, against float32 attention computed
// from scratch.
func rowError(q []float32, hist *history, got []float32) float64 {
	n := len(hist.k)
	k := make([]float32, 0, n*hkv*d)
	v := make([]float32, 0, n*hkv*d)
	for t := range n {
		k = append(k, hist.k[t]...)
		v = append(v, hist.v[t]...)
	}
	qt := &sdpa.Tensor{Data: q, B: 1, H: hq, S: 1, D: d, Layout: sdpa.BSHD}
	kt := &sdpa.Tensor{Data: k, B: 1, H: hkv, S: n, D: d, Layout: sdpa.BSHD}
	vt := &sdpa.Tensor{Data: v, B: 1, H: hkv, S: n, D: d, Layout: sdpa.BSHD}
	ref, err := sdpa.Attention(qt, kt, vt, &sdpa.Options{Backend: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	var num, den float64
	for j, r := range ref.Data {
		e := float64(got[j] - r)
		num += e * e
		den += float64(r) * float64(r)
	}
	return math.Sqrt(num / den)
}

func main() {
	device := flag.String("device", "cpu", "backend to open: cpu, cuda, ...")
	steps := flag.Int("steps", 40, "tokens generated per sequence")
	flag.Parse()
	dev, err := sdpa.Open(*device)
	if err != nil {
		log.Fatal(err)
	}
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 4096, MaxSeqLen: 1024})
	if err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ly := newLayer(rng)

	// Three sequences, prompts of different lengths. The prompt is
	// appended as one chunk: [1][len][hkv][d] (BSHD, a projection's
	// output layout, no transposes).
	var seqs []*seq
	newSeq := func(name string, prompt int) *seq {
		id, err := cache.AddSequence()
		if err != nil {
			log.Fatal(err)
		}
		s := &seq{id: id, hist: &history{}, name: name}
		k := make([]float32, prompt*hkv*d)
		v := make([]float32, prompt*hkv*d)
		s.promptQ = make([]float32, prompt*hq*d)
		x := make([]float32, model)
		for t := range prompt {
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			matvec(s.promptQ[t*hq*d:(t+1)*hq*d], ly.wq, x)
			matvec(k[t*hkv*d:(t+1)*hkv*d], ly.wk, x)
			matvec(v[t*hkv*d:(t+1)*hkv*d], ly.wv, x)
			s.hist.k = append(s.hist.k, append([]float32(nil), k[t*hkv*d:(t+1)*hkv*d]...))
			s.hist.v = append(s.hist.v, append([]float32(nil), v[t*hkv*d:(t+1)*hkv*d]...))
		}
		kd, _ := dev.Upload(&sdpa.Tensor{Data: k, B: 1, H: hkv, S: prompt, D: d, Layout: sdpa.BSHD})
		vd, _ := dev.Upload(&sdpa.Tensor{Data: v, B: 1, H: hkv, S: prompt, D: d, Layout: sdpa.BSHD})
		if err := cache.Append([]sdpa.SeqID{id}, kd, vd); err != nil {
			log.Fatal(err)
		}
		kd.Free()
		vd.Free()
		s.x = x
		return s
	}
	for i, n := range []int{300, 17, 129} {
		seqs = append(seqs, newSeq(fmt.Sprintf("seq%d", i), n))
	}

	// The decode loop: per step, one batched append and one batched
	// attention call for all live sequences. Buffers for a batch size are
	// made once and reused.
	type bufs struct {
		q, k, v, out *sdpa.DeviceTensor
		hq, hk, hv   *sdpa.Tensor
		res          *sdpa.Tensor
		step         *sdpa.Graph // the attention call for ids, captured
		ids          []sdpa.SeqID
	}
	byBatch := map[int]*bufs{}
	get := func(b int) *bufs {
		if x, ok := byBatch[b]; ok {
			return x
		}
		x := &bufs{
			hq:  &sdpa.Tensor{Data: make([]float32, b*hq*d), B: b, H: hq, S: 1, D: d, Layout: sdpa.BSHD},
			hk:  &sdpa.Tensor{Data: make([]float32, b*hkv*d), B: b, H: hkv, S: 1, D: d, Layout: sdpa.BSHD},
			hv:  &sdpa.Tensor{Data: make([]float32, b*hkv*d), B: b, H: hkv, S: 1, D: d, Layout: sdpa.BSHD},
			res: &sdpa.Tensor{Data: make([]float32, b*hq*d), B: b, H: hq, S: 1, D: d, Layout: sdpa.BSHD},
		}
		x.q, _ = dev.Upload(x.hq)
		x.k, _ = dev.Upload(x.hk)
		x.v, _ = dev.Upload(x.hv)
		x.out, _ = dev.NewTensor(b, hq, 1, d, sdpa.BSHD)
		byBatch[b] = x
		return x
	}
	opts := &sdpa.Options{Mask: sdpa.CausalLowerRight}
	var lastQ []float32
	for step := range *steps {
		if step == *steps/2 { // seq1 is done: its pages go to a new sequence
			done := seqs[1]
			n, _ := cache.Len(done.id)
			if err := cache.Drop(done.id); err != nil {
				log.Fatal(err)
			}
			seqs[1] = newSeq("seq3", 64)
			fmt.Printf("step %d: %s finished at %d tokens; %s starts with a 64-token prompt\n", step, done.name, n, seqs[1].name)
			joinStep(dev, cache, ly, seqs[0], seqs[1], seqs[2], opts)
			continue
		}
		b := len(seqs)
		bf := get(b)
		ids := make([]sdpa.SeqID, b)
		for i, s := range seqs {
			ids[i] = s.id
			matvec(bf.hq.Data[i*hq*d:(i+1)*hq*d], ly.wq, s.x)
			matvec(bf.hk.Data[i*hkv*d:(i+1)*hkv*d], ly.wk, s.x)
			matvec(bf.hv.Data[i*hkv*d:(i+1)*hkv*d], ly.wv, s.x)
			s.hist.k = append(s.hist.k, append([]float32(nil), bf.hk.Data[i*hkv*d:(i+1)*hkv*d]...))
			s.hist.v = append(s.hist.v, append([]float32(nil), bf.hv.Data[i*hkv*d:(i+1)*hkv*d]...))
		}
		lastQ = append(lastQ[:0], bf.hq.Data...)
		for _, c := range []struct {
			dst *sdpa.DeviceTensor
			src *sdpa.Tensor
		}{{bf.q, bf.hq}, {bf.k, bf.hk}, {bf.v, bf.hv}} {
			if err := c.dst.CopyFrom(c.src); err != nil {
				log.Fatal(err)
			}
		}
		if err := cache.Append(ids, bf.k, bf.v); err != nil {
			log.Fatal(err)
		}
		if !slices.Equal(bf.ids, ids) { // a new batch: capture its attention call once
			if err := bf.step.Close(); err != nil {
				log.Fatal(err)
			}
			bf.ids = ids
			if bf.step, err = dev.Capture(func() error { return cache.Attention(bf.out, nil, bf.q, ids, opts) }); err != nil {
				log.Fatal(err)
			}
		}
		if err := bf.step.Replay(); err != nil {
			log.Fatal(err)
		}
		if err := bf.out.Download(bf.res); err != nil {
			log.Fatal(err)
		}
		for i, s := range seqs { // the next token's hidden state
			matvec(s.x, ly.wo, bf.res.Data[i*hq*d:(i+1)*hq*d])
		}
		if step%10 == 0 || step == *steps-1 {
			u := cache.Usage()
			fmt.Printf("step %d: %d tokens in %d sequences, %d of %d pages used (the pool holds %.0f KiB)\n",
				step, u.Tokens, u.Sequences, u.Pages-u.FreePages, u.Pages, float64(u.Bytes)/1024)
		}
	}

	// Check the last step against float32 attention over each sequence's
	// whole float32 history.
	bf := get(len(seqs))
	var worst float64
	for i, s := range seqs {
		worst = max(worst, rowError(lastQ[i*hq*d:(i+1)*hq*d], s.hist, bf.res.Data[i*hq*d:(i+1)*hq*d]))
	}
	fmt.Printf("last step vs float32 attention over the float32 history: relative L2 error %.3f (E4M3 keeps 3 mantissa bits)\n", worst)
	if worst > 0.1 {
		log.Fatalf("error %.3f is too large", worst)
	}
}
