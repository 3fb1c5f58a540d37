//go:build cuda

package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
)

// A varlen batch that allows FP8 queries (PagedProblem.Precision; a step
// of continuous batching, chunks of prompts beside single decode tokens)
// runs its chunks on the prefill kernels and the rest on the split-KV
// kernel. The sequences with many new queries go in groups
// (varlenGroups), each run as a paged prefill call of its own (prefill's
// kernels) over n queries a sequence, n the group's largest count. A group
// of consecutive sequences with n queries each is a view of the packed
// tensors, which its kernels read and write in place; any other group's
// queries are copied out of the packed batch into a tensor [B'][Hq][n][D]
// of its own, a sequence with fewer queries padded at the front with zero
// rows (a padding row stands at an earlier position of its sequence, adds
// nothing to its head's amax, and its output is dropped), and its outputs
// are copied back. The other sequences' rows run in one launch of the
// split-KV kernel (and its merge), planned without the groups' rows, on a
// stream beside the device's, so that it reads the cache while the
// groups compute. One upload carries the call's tables, the groups' too.

// varlenGroup is a group of a varlen batch's sequences that runs as one
// paged prefill call on stage st: the sequences (batch indices, in batch
// order), the group's query count n, its largest, and its problem.
type varlenGroup struct {
	seqs  []int
	n, st int
	sub   backend.PagedProblem // groupProblem's
}

// varlenGroups returns the groups of p's sequences that run on the prefill
// kernels, or nil where none does (then the whole batch runs on the
// split-KV kernel): FP32 calls, uniform batches, calls that read device
// tables, and what prefillStage refuses. From the sequence with the most
// queries down,
// a group is the sequences with more than half the leader's count n and
// at least n tokens (so that no padding row stands before its sequence's
// start), and it runs on the prefill kernels where prefillStage takes it
// as a batch of n queries; where it does not, the leader runs on the
// split-KV kernel and the next sequence leads, down to the leaders of
// fewer than prefillMinQueries queries, which none takes.
func (s *pagedKV) varlenGroups(p *backend.PagedProblem) []varlenGroup {
	least := s.prefillLeast()
	if p.QStarts == nil || p.Precision != backend.FP8E4M3 || p.Tables != nil || least < 0 {
		return nil
	}
	var order []int
	for b := range p.B {
		if p.Queries(b) > 0 {
			order = append(order, b)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p.Queries(b), p.Queries(a)) })
	var groups []varlenGroup
	for len(order) > 0 {
		n := p.Queries(order[0])
		if n < prefillMinQueries { // (nor has any sequence after it)
			break
		}
		var in, rest []int
		for _, b := range order {
			if 2*p.Queries(b) > n && int(p.SeqLens[b]) >= n {
				in = append(in, b)
			} else {
				rest = append(rest, b)
			}
		}
		if len(in) > 0 && in[0] == order[0] && len(in)*p.Hq*n >= least {
			slices.Sort(in)
			sub := groupProblem(p, in, n)
			if st := s.prefillStage(&sub); st != 0 {
				groups = append(groups, varlenGroup{seqs: in, n: n, st: st, sub: sub})
				order = rest
				continue
			}
		}
		order = order[1:]
	}
	return groups
}

// groupProblem is the paged prefill problem of p's sequences seqs with n
// queries each (their lengths and block-table rows; no data).
func groupProblem(p *backend.PagedProblem, seqs []int, n int) backend.PagedProblem {
	per := p.PagesPerSeq
	sub := backend.PagedProblem{B: len(seqs), Hq: p.Hq, Hkv: p.Hkv, Sq: n, D: p.D, Scale: p.Scale, Mask: p.Mask, Layout: p.Layout,
		PagesPerSeq: per, Variants: p.Variants, Precision: backend.FP8E4M3,
		SeqLens: make([]int32, len(seqs)), BlockTable: make([]int32, len(seqs)*per)}
	for j, b := range seqs {
		sub.SeqLens[j] = p.SeqLens[b]
		copy(sub.BlockTable[j*per:(j+1)*per], p.BlockTable[b*per:(b+1)*per])
	}
	return sub
}

// varlen runs p, a varlen batch with groups: the split-KV kernel on the
// other sequences' rows (if any) on the side stream (launchBeside), and
// each group on the device's stream, reading and writing the packed
// tensors stageInputs gives (the caller's buffers, or staging buffers for
// host slices); the device's stream then waits for the side stream. The
// groups' lengths and block tables go up with the call's inputs, joined
// to its tables in one copy (a second upload would wait for the first to
// have run, behind the call before). A score factor beyond
// the limit is flagged in the caller's out buffer (read by its Read, which
// names the head by its index in the group, B'·Hq + head: the kernels' own
// batch), or, for host slices, in a word a group, reported here with the
// sequence's batch index. The caller is inside do.
func (s *pagedKV) varlen(p *backend.PagedProblem, groups []varlenGroup) (err error) {
	skip := make([]bool, p.B)
	var tabs []int32 // each group's lengths, then its block table
	for _, g := range groups {
		tabs = append(append(tabs, g.sub.SeqLens...), g.sub.BlockTable...)
		for _, b := range g.seqs {
			skip[b] = true
		}
	}
	gx, gy, gz := s.planSkipping(p, skip)
	at, err := s.stageInputs(p, bytesOf(tabs))
	if err != nil {
		return err
	}
	if err := s.poisonOutputs(p); err != nil {
		return err
	}
	var flags uint64 // (host slices: a word a group)
	var outBuf *buffer
	if p.QBuf != nil {
		bufs, err := ours(p.OutBuf)
		if err != nil {
			return err
		}
		outBuf = bufs[0]
		if err := s.dev.flagFor(outBuf); err != nil {
			return err
		}
	} else {
		if flags, err = s.buf("varlen flags", 4*int64(len(groups))); err != nil {
			return err
		}
		if err := cu.MemsetD32Async(cu.DevicePtr(flags), 0, int64(len(groups)), s.dev.stream); err != nil {
			return err
		}
	}
	join := func() error { return nil }
	switch {
	case len(s.varBlocks) == 0:
	case s.varlenInline:
		if err := s.launchAttention(gx, gy, gz); err != nil {
			return err
		}
	default:
		var side func() error
		if side, err = s.launchBeside(gx, gy, gz); err != nil {
			return err
		}
		// Whatever happens next, nothing after the call runs before the
		// side stream's work: the first join (below, or at a return before
		// it) makes the stream wait, once.
		join = func() error {
			j := side
			side = func() error { return nil }
			return j()
		}
		defer func() { err = errors.Join(err, join()) }()
	}
	io := varlenIO{q: s.params.Q, out: s.params.Out, lse: s.params.LSE}
	if p.LSE == nil && p.LSEBuf == nil {
		io.lse = 0
	}
	for i, g := range groups {
		io.flag = pooled{cu.DevicePtr(flags + 4*uint64(i)), 4}
		if outBuf != nil {
			io.flag = outBuf.flag
		}
		io.lens = at
		io.table = at + 4*uint64(len(g.seqs))
		at = io.table + 4*uint64(len(g.seqs)*p.PagesPerSeq)
		if err := s.runGroup(p, g, io); err != nil {
			return err
		}
	}
	if err := join(); err != nil || p.QBuf != nil {
		return err
	}
	bad := make([]int32, len(groups))
	if err := s.downloadOutputs(p, []hostCopy{{dev: cu.DevicePtr(flags), host: bytesOf(bad)}}); err != nil {
		return err
	}
	for i, f := range bad {
		if f != 0 { // the group's batch entry j, head h: the batch's entry seqs[j]
			j, h := int(f-1)/p.Hq, int(f-1)%p.Hq
			return factorError(int32(groups[i].seqs[j]*p.Hq+h+1), p.Hq)
		}
	}
	return nil
}

// sideStream is a stream beside the device's, with the events that order
// it: fork (on the device's stream: the call's inputs are up) and join (on
// the side stream: its launch is done).
type sideStream struct {
	stream     cu.Stream
	fork, join cu.Event
	made       bool
}

// launchBeside issues the split-KV launch (launchAttention) on the side
// stream, after the work issued so far on the device's stream, so that it
// runs beside the groups' kernels: it reads the cache, the groups compute,
// and each fills the SMs the other leaves. join (joinSide) makes the
// device's stream wait for it, before anything after the call; where the
// launch fails, launchBeside joins before it returns.
func (s *pagedKV) launchBeside(gx, gy, gz int) (join func() error, err error) {
	sd := &s.side
	if !sd.made {
		st, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return nil, fmt.Errorf("cuda: a side stream: %w", err)
		}
		fork, err1 := cu.MakeEvent(cu.DisableTiming)
		join, err2 := cu.MakeEvent(cu.DisableTiming)
		if err := errors.Join(err1, err2); err != nil {
			errs := []error{err, st.Destroy()}
			if err1 == nil {
				errs = append(errs, cu.DestroyEvent(&fork))
			}
			if err2 == nil {
				errs = append(errs, cu.DestroyEvent(&join))
			}
			return nil, fmt.Errorf("cuda: a side stream: %w", errors.Join(errs...))
		}
		*sd = sideStream{stream: st, fork: fork, join: join, made: true}
	}
	if err := errors.Join(sd.fork.Record(s.dev.stream), sd.stream.Wait(sd.fork, 0)); err != nil {
		return nil, err // (nothing issued on the side stream)
	}
	if err := s.launchAttentionOn(sd.stream, gx, gy, gz); err != nil {
		return nil, errors.Join(err, s.joinSide())
	}
	return s.joinSide, nil
}

// joinSide makes the device's stream wait for the work issued on the side
// stream so far, or, where the event cannot be recorded, waits for it here.
func (s *pagedKV) joinSide() error {
	sd := &s.side
	if err := sd.join.Record(sd.stream); err != nil {
		return errors.Join(err, sd.stream.Synchronize())
	}
	return s.dev.stream.Wait(sd.join, 0)
}

// varlenIO is where a varlen call's groups read and write: the packed
// queries, outputs and LSEs (lse 0: none), a group's lengths and block
// table on the device, and the word that flags a bad score factor.
type varlenIO struct {
	q, out, lse, lens, table uint64
	flag                     pooled
}

// runGroup runs group g of p on the prefill kernels: its inputs
// (fp8attn_paged_prefill_inputs: the queries quantized, the cache
// gathered, or read in place by the paged form where it is on:
// prefillKernels) and stage g.st over them, a bad score factor flagged in
// io.flag. A group of consecutive sequences with g.n queries each is a
// view of the packed tensors (inPlace): the kernels read the queries and
// write the outputs where they are. Any other group's queries are copied
// into a tensor of its own (gatherGroup), and its outputs back
// (scatterGroup). LSEs are always copied back (the kernels write them
// [B'][Hq][n]).
func (s *pagedKV) runGroup(p *backend.PagedProblem, g varlenGroup, io varlenIO) (err error) {
	sub := g.sub
	rows := int64(len(g.seqs)) * int64(p.Hq) * int64(g.n) // the group's rows, every head
	pc := prefillCall{lens: io.lens, table: io.table}
	pc.n, pc.even = longest(&sub)
	codes := rows * int64(p.D) // bytes of query codes
	var gout uint64            // (copied: the group's outputs)
	if view, ok := inPlace(p, g); ok {
		pc.q, pc.rows = io.q+4*uint64(view.off), view.rows
		codes = view.elems
		pc.out = &buffer{dev: s.dev, buf: pooled{cu.DevicePtr(io.out + 4*uint64(view.off)), 4 * view.elems}, n: 4 * view.elems, flag: io.flag}
	} else {
		gq, err := s.buf("varlen q", 4*rows*int64(p.D))
		if err != nil {
			return err
		}
		if gout, err = s.buf("varlen out", 4*rows*int64(p.D)); err != nil {
			return err
		}
		if err := s.gatherGroup(p, g, io.q, gq); err != nil {
			return err
		}
		pc.q = gq
		pc.out = &buffer{dev: s.dev, buf: pooled{cu.DevicePtr(gout), 4 * rows * int64(p.D)}, n: 4 * rows * int64(p.D), flag: io.flag}
	}
	var glse uint64
	if io.lse != 0 {
		if pc.lse, err = s.scratch("varlen lse", 4*rows); err != nil {
			return err
		}
		glse = uint64(pc.lse.buf.p)
	}
	if err := s.prefillScratch(&sub, &pc, codes); err != nil {
		return err
	}
	r, err := s.prefillKernels(&sub, g.st, pc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.release()) }()
	return s.scatterGroup(p, g, io.out, io.lse, gout, glse)
}

// groupView is a group's place in the packed tensors: the element offset
// of its first row (head 0), its batch, head and row strides, and the
// elements from its first row to the tensor's end.
type groupView struct {
	off, elems int64
	rows       [3]int64
}

// inPlace returns group g's view of p's packed tensors, where its
// sequences are consecutive and each has g.n queries (their rows then
// follow one another, as a batch of g.n rows each).
func inPlace(p *backend.PagedProblem, g varlenGroup) (groupView, bool) {
	for j, b := range g.seqs {
		if b != g.seqs[0]+j || p.Queries(b) != g.n {
			return groupView{}, false
		}
	}
	hq, d, n, total := int64(p.Hq), int64(p.D), int64(g.n), int64(p.Rows())
	first := int64(p.QStarts[g.seqs[0]])
	v := groupView{off: first * d, rows: [3]int64{n * d, total * d, d}} // BHSD: [1][Hq][T][D]
	if p.Layout == backend.BSHD {                                       // [1][T][Hq][D]
		v = groupView{off: first * hq * d, rows: [3]int64{n * hq * d, d, hq * d}}
	}
	v.elems = total*hq*d - v.off
	return v, true
}

// gatherGroup copies group g's queries from the packed q into the group's
// tensor at gq, each sequence's rows after its padding rows, which it
// zeroes.
func (s *pagedKV) gatherGroup(p *backend.PagedProblem, g varlenGroup, q, gq uint64) error {
	st, total := s.dev.stream, p.Rows()
	for j, b := range g.seqs {
		m, first := p.Queries(b), int(p.QStarts[b])
		if pad := g.n - m; pad > 0 {
			r := seqRegion(p.Layout, p.Hq, p.D, j, g.n, 0, pad)
			if err := cu.MemsetD2D32Async(cu.DevicePtr(gq+uint64(r.off)), r.pitch, 0, r.width/4, r.height, st); err != nil {
				return err
			}
		}
		if err := copyRows(gq, seqRegion(p.Layout, p.Hq, p.D, j, g.n, g.n-m, m), q, seqRegion(p.Layout, p.Hq, p.D, 0, total, first, m), st); err != nil {
			return err
		}
	}
	return nil
}

// scatterGroup copies group g's outputs at gout (where not 0) and LSEs at
// glse (where lse is not 0) into the packed out and lse, its padding rows
// left out.
func (s *pagedKV) scatterGroup(p *backend.PagedProblem, g varlenGroup, out, lse, gout, glse uint64) error {
	st, total := s.dev.stream, p.Rows()
	for j, b := range g.seqs {
		m, first := p.Queries(b), int(p.QStarts[b])
		if gout != 0 {
			if err := copyRows(out, seqRegion(p.Layout, p.Hq, p.D, 0, total, first, m), gout, seqRegion(p.Layout, p.Hq, p.D, j, g.n, g.n-m, m), st); err != nil {
				return err
			}
		}
		if lse != 0 { // LSE: [entry][Hq][rows]
			dst, src := seqRegion(backend.BHSD, p.Hq, 1, 0, total, first, m), seqRegion(backend.BHSD, p.Hq, 1, j, g.n, g.n-m, m)
			if err := copyRows(lse, dst, glse, src, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// region is where some rows of a tensor lie: height runs of width bytes,
// pitch bytes apart, from byte off.
type region struct{ off, width, height, pitch int64 }

// seqRegion is the region of rows from .. from+m-1 of every head of batch
// entry entry, in a float32 tensor [..][hq][rows][d] in layout l.
func seqRegion(l backend.Layout, hq, d, entry, rows, from, m int) region {
	row := 4 * int64(d)
	if l == backend.BSHD { // [..][rows][hq][d]: one run
		w := int64(m) * int64(hq) * row
		return region{off: (int64(entry)*int64(rows) + int64(from)) * int64(hq) * row, width: w, height: 1, pitch: w}
	}
	return region{off: (int64(entry)*int64(hq)*int64(rows) + int64(from)) * row, width: int64(m) * row, height: int64(hq),
		pitch: int64(rows) * row}
}

// copyRows copies region sr of the tensor at src to region dr of the
// tensor at dst (regions of one shape), on s.
func copyRows(dst uint64, dr region, src uint64, sr region, s cu.Stream) error {
	if dr.width == 0 {
		return nil
	}
	return copy2D(dst+uint64(dr.off), dr.pitch, src+uint64(sr.off), sr.pitch, dr.width, dr.height, s)
}
