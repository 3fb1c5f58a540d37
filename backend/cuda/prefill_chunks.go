package cuda

// The query chunks of fp8attn_paged_prefill_inputs (kernels/paged/
// prefill_inputs.cuh): a block quantizes a chunk of one (sequence, query
// head)'s rows, bit for bit Memory.Quantize, so it waits, between its amax
// and its encode, for its head's other chunks. The launch pays that wait
// once a wave of blocks: the fewer waves, the shorter the chain, until a
// block's own reads, serial in its 256 threads, cost more than the waits
// they save.
const (
	// prefillBlocksPerSM is how many blocks of the input launch an SM
	// holds at once (PREFILL_BLOCKS_PER_SM, its __launch_bounds__: 64
	// registers a thread; checked against
	// fp8attn_paged_prefill_inputs_config when the module loads).
	prefillBlocksPerSM = 4
	// prefillChunkFloats and prefillChunkFloatsMax bound a chunk's
	// floats. B1 Hq32 D128 after 8192 cached keys, the input launch alone
	// (H200, BenchmarkPagedPrefillParts): 2048 new tokens in chunks of
	// 4096 floats (2048 blocks) 57.2 µs, 8192 (1024) 50.9, 16384 (512)
	// 49.0, 32768 (256) 69.6-69.9; 128 new tokens 12.0 µs in chunks of
	// 4096 (128 blocks), 17.0 in 8192, 27.2 in 16384; on 2026-12-02,
	// 11.96 in 4096 against 12.75-12.77 in 2048 (256) and 14.91-14.94 in
	// 1024 (512): smaller chunks only add blocks that wait.
	prefillChunkFloats    = 4096
	prefillChunkFloatsMax = 16384
)

// prefillChunkRows returns the rows of a query chunk for heads (sequence,
// query head) pairs of sq rows of d floats on a GPU of sms SMs: as many
// chunks a head as fill one wave of the launch's blocks with the heads'
// chunks, within the bounds on a chunk's floats, and never more chunks a
// head than sms, since a head's chunks wait for each other and so must all
// run at once (the H200 holds 4 blocks an SM: a call needs a quarter of
// the SMs free for it, and a GPU shared through MPS with fewer active SMs
// than that could hang it).
func prefillChunkRows(heads, sq, d, sms int) int {
	perHead := max(1, prefillBlocksPerSM*sms/max(1, heads))
	rows := (sq + perHead - 1) / perHead
	rows = min(max(rows, prefillChunkFloats/d), max(1, prefillChunkFloatsMax/d))
	rows = max(rows, 1)
	if (sq+rows-1)/rows > sms {
		rows = (sq + sms - 1) / sms
	}
	return rows
}
