package sdpa

// AttentionVarlen is Attention for a varlen batch, a step of continuous
// batching that mixes chunks of prompts with single decode tokens: sequence
// ids[b] has queries[b] new queries (its last queries[b] positions, as for
// Attention; 0: none this call), packed in order into q, a float32 device
// tensor [1][Hq][T][HeadDim] in either layout, T the sum of queries, the
// rows of ids[0] first. out is float32 of q's shape and layout; lse nil or
// float32 [1][Hq][T][1]. The whole batch is one call (on the cuda device,
// one launch of its split-KV kernel, and one of its merge where the keys
// are split): there is no padding to the longest count, and no call a
// distinct count. opts as for Attention, but
// Precision FP8E4M3 computes as FP32 (the FP8 prefill kernels take
// batches with one count of new queries), and a varlen call inside a
// Capture is ErrUnsupported.
func (c *KVCache) AttentionVarlen(out, lse, q *DeviceTensor, ids []SeqID, queries []int, opts *Options) error {
	if queries == nil {
		queries = []int{} // still a varlen call: its counts must match ids
	}
	return c.attend(out, lse, q, ids, queries, opts)
}
