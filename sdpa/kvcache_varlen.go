package sdpa

// AttentionVarlen is Attention for a varlen batch, a step of continuous
// batching that mixes chunks of prompts with single decode tokens: sequence
// ids[b] has queries[b] new queries (its last queries[b] positions, as for
// Attention; 0: none this call), packed in order into q, a float32 device
// tensor [1][Hq][T][HeadDim] in either layout, T the sum of queries, the
// rows of ids[0] first. out is float32 of q's shape and layout; lse nil or
// float32 [1][Hq][T][1]. opts as for Attention; a varlen call inside a
// Capture is ErrUnsupported. The whole batch is one call: on the cuda
// device, at the default precision, one launch of its split-KV kernel
// (and one of its merge where the keys are split), with no padding to the
// longest count and no call a distinct count. With Precision FP8E4M3 the
// cuda device runs the sequences with many new queries as Attention runs a
// chunk at FP8E4M3, on its FP8 prefill kernel, in groups: from the largest
// count n down, the sequences with more than n/2 queries and at least n
// tokens, their queries padded at the front to n (the padding's results
// are dropped), where the group has the query rows and head dim Attention
// needs for that kernel; the other sequences' rows run at FP32 on the
// split-KV kernel, in one launch. Elsewhere FP8E4M3 computes as FP32.
func (c *KVCache) AttentionVarlen(out, lse, q *DeviceTensor, ids []SeqID, queries []int, opts *Options) error {
	if queries == nil {
		queries = []int{} // still a varlen call: its counts must match ids
	}
	return c.attend(out, lse, q, ids, queries, opts)
}
