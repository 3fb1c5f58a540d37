// Package tiles is the single source of the GPU kernels' launch geometry and
// of the list of kernel stages. The CUDA kernels compile against the C
// header generated from it (Header, written by ./gen into
// backend/cuda/kernels/tiles.h); the launcher, the tests, the benchmarks and
// the scripts (through sdpabench -stages) read it here. At module load the
// cuda backend also checks every kernel's compiled constants against it.
package tiles

import (
	"fmt"
	"slices"
	"strings"
)

// Stages are the kernel stages, in the order they were built.
var Stages = []int{1, 2, 3, 4, 5, 6, 7, 8}

// HeadDims are the head dimensions the kernels are built for.
var HeadDims = []int{64, 128}

// Config is one kernel's geometry.
type Config struct {
	BlockM  int // query rows per block
	BlockN  int // keys per K/V tile
	Threads int // threads per block
	Ring    int // K/V tiles in flight per ring (cp.async depth)
}

// ErrNoKernel is wrapped by Get for a (stage, head dim) with no kernel.
var ErrNoKernel = fmt.Errorf("no such kernel")

// Get returns the geometry of stage's kernel for head dimension d.
func Get(stage, d int) (Config, error) {
	if d != 64 && d != 128 {
		return Config{}, fmt.Errorf("%w: kernels support head dims %v, not %d", ErrNoKernel, HeadDims, d)
	}
	switch stage {
	case 1:
		// Scalar: 8 threads per query row.
		return Config{BlockM: 16, BlockN: 64, Threads: 128, Ring: 2}, nil
	case 2:
		// Four warps share each 32-key tile of a 16-row block; S, P and O
		// live in shared memory.
		return Config{BlockM: 16, BlockN: 32, Threads: 128, Ring: 2}, nil
	case 3, 4:
		// 16 rows per warp; static shared memory under 48 KB.
		warps, bn, ring := 2, 64, 2
		if d == 128 {
			warps, bn = 1, 32
		}
		if stage == 4 {
			ring = 3
		}
		return Config{BlockM: 16 * warps, BlockN: bn, Threads: 32 * warps, Ring: ring}, nil
	case 5, 6, 7, 8:
		// 16 query rows per block; the keys split across 4 warps (D=64) or
		// 2 (D=128), each with its own 2-slot ring of 32-key tiles; stages
		// 6-8 twice the warps with 1-slot rings.
		splits, ring := 4, 2
		if d == 128 {
			splits = 2
		}
		if stage >= 6 {
			splits, ring = 2*splits, 1
		}
		return Config{BlockM: 16, BlockN: 32, Threads: 32 * splits, Ring: ring}, nil
	}
	return Config{}, fmt.Errorf("%w: no kernel stage %d (have %v)", ErrNoKernel, stage, Stages)
}

// HopperStage is the stage number of the sm_90a kernel family (Hopper:
// TMA bulk copies, wgmma for both GEMMs, warp specialization). It is not in
// Stages, the compute_89 family every sm_89+ GPU loads: it is built into a
// module of its own that only compute capability 9.0 loads.
const HopperStage = 9

// HopperHeadDims are the head dimensions the Hopper kernel is built for.
var HopperHeadDims = []int{64, 96, 128, 192, 256}

// HopperConfig is the geometry and schedule of the Hopper kernel for one
// head dimension: one table, as FlashAttention-3's tile_size.h keeps both
// (docs/design/hopper-prefill.md). The kernel compiles with these values
// (tiles.h) and exports them in fp8attn_stage9_d<D>_config, which the
// loader checks against this table.
//
// A block is one producer warpgroup (TMA bulk copies) and two consumer
// warpgroups of 64 query rows each. Q·Kᵀ runs over DK, the head dimension
// rounded up to a whole swizzle row (64 bytes, or a multiple of 128): the
// images the device packs pad Q and K with zero columns; P·V produces the D
// true columns.
//
// The schedule (the tiled kernel's; the one-tile form has one consumer
// warpgroup and takes none of it):
//   - PingPong: the consumer warpgroups take turns to issue their GEMMs
//     (named barriers, as FlashAttention-3 does; the column parts of P·V
//     after the first take no turn). Faster at D 128 (+1-3% on large
//     calls, +8-12% on the head start's and the key split's), 192 (+6%)
//     and 256 (+1%); 6-10% slower at D 96. The narrow form, one consumer
//     warpgroup, takes neither kind of turn.
//   - FusedPingPong: the fused form (float32 tensors quantized into the
//     images just before: fp8attn_stage9f) takes the GEMM turns as well. At
//     D 192 and 256, as the other forms; not at D 128, where float32
//     calls of several waves are 1.3-2.6% faster without them (those of
//     one wave or less 3-7% slower).
//   - SoftmaxTurns: they take turns to run their softmaxes instead, so that
//     one's exponentials do not share the SM's MUFU with the other's while
//     that one issues, waits for and folds its GEMMs. At D 64, where the
//     GEMMs are too short to keep the softmaxes apart (+12%; slower at D 96
//     to 256, and ping-pong's issue turns beside it 3% slower).
//   - OnePA: one set of P registers, not two: each step waits for
//     P(t-1)·V(t-1), folds it and releases its ring slot after tile t's
//     softmax, and packs P(t) into the same registers. At D 64 (+6%; -3% at
//     D 96, -5% at D 128 in one part). Needs PVParts 1.
//   - PVParts: the column parts P·V runs in (each part's tile accumulator
//     is D/PVParts registers a thread; the parts after the first are issued
//     one after the other once the softmax is done): 2 at D 128 and 4 at
//     D 256, where one part of D/2 registers spilled and the spills doubled
//     the fold's time (+15% and +29%); 2 at D 192; D 64 and 96 in one.
type HopperConfig struct {
	D       int // head dimension
	DK      int // Q·Kᵀ depth: D padded to 64 or a multiple of 128 bytes
	BlockM  int // query rows per block (two consumer warpgroups of 64)
	BlockN  int // keys per K/V tile
	Threads int // three warpgroups
	Ring    int // K/V tiles in flight
	// PagedRing: the ring of the forms that read the paged cache in place
	// (the paged prefill's and the packed form's, D 128). Their producer
	// gets a tile's pages a page at a time from anywhere in the pool, and
	// the packed form's decode tokens are bound by how many bytes an SM
	// has in flight: the consumers hold two slots (Q·K(t)ᵀ and P·V(t-1)),
	// so a ring of 3 prefetched one tile, and a decode item took a chunk
	// item's time a tile. A ring of 5 prefetches three, in the shared
	// memory the tensor form leaves (one block an SM either way).
	PagedRing int

	PingPong      bool // consumer warpgroups take turns to issue their GEMMs
	FusedPingPong bool // the fused form's consumer warpgroups take GEMM turns too
	SoftmaxTurns  bool // consumer warpgroups take turns to run their softmaxes
	OnePA         bool // one set of P registers
	PVParts       int  // column parts of P·V

	// Narrow: the module has the narrow tiled tensor form at this head
	// dim (fp8attn_stage9tn), which runs some of the calls with a causal
	// mask (NarrowLaunch; the cuda backend's narrowPlan picks them).
	Narrow bool

	// NoLSEEntries: the module has entries without the float32 row sums
	// at this head dim (fp8attn_stage9<form>_d<D>_nolse: the fused and
	// tensor forms, the head start and the one-tile forms), for the calls
	// that ask for no LSE. The other head dims hold both copies of the
	// main loop in one function; at D 64 that measured slower than either
	// alone (docs/design/hopper-prefill.md). The softcap twins, one copy
	// with the sums at every head dim, have such entries everywhere.
	NoLSEEntries bool
}

// Hopper returns the Hopper kernel's geometry for head dimension d.
func Hopper(d int) (HopperConfig, error) {
	// A 3-deep ring: with 2, a slot is refilled only after both
	// consumers' P·V on it, leaving one tile of prefetch.
	c := HopperConfig{D: d, BlockM: 128, BlockN: 128, Threads: 384, Ring: 3, PagedRing: 3, PVParts: 1}
	switch d {
	case 64:
		c.DK = 64
		c.SoftmaxTurns, c.OnePA, c.NoLSEEntries = true, true, true
	case 96, 128:
		c.DK = 128
		if d == 128 {
			// Ping-pong (not in the fused form: FusedPingPong) and two
			// column parts for the wide form; the narrow form, for the
			// masked calls the cuda backend's narrowPlan gives it
			// (docs/design/hopper-prefill.md).
			c.PingPong, c.PVParts, c.Narrow = true, 2, true
			c.PagedRing = 5
		}
	case 192, 256:
		// The output accumulator takes d/2 registers a thread: halve the
		// score tile to stay under the consumers' 240.
		c.DK, c.BlockN = 256, 64
		c.PingPong, c.FusedPingPong, c.PVParts = true, true, 2
		if d == 256 {
			c.PVParts = 4
		}
	default:
		return HopperConfig{}, fmt.Errorf("%w: the Hopper kernel supports head dims %v, not %d", ErrNoKernel, HopperHeadDims, d)
	}
	return c, nil
}

// KernelDim is the head dimension of the kernel, of those built for dims,
// that runs head dimension d: d where one is built for it; otherwise, for
// d a multiple of 16 below the largest, the next one up, whose extra
// columns the kernel reads as zeros (its copies zero-fill past d) and
// never writes (D 32 runs the D 64 kernel, 80 the 96, 160 the 192 on
// Hopper and the 256 on Ada). d must be a multiple of 16: the kernels
// copy 16-byte chunks of a row, and past d a chunk is all zeros or none.
func KernelDim(dims []int, d int) (int, error) {
	if d > 0 && d%16 == 0 {
		for _, k := range dims { // ascending
			if k >= d {
				return k, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: the kernel is built for head dims %v and runs the multiples of 16 below them, not %d", ErrNoKernel, dims, d)
}

// HopperKernelDim is KernelDim of the Hopper kernel.
func HopperKernelDim(d int) (int, error) { return KernelDim(HopperHeadDims, d) }

// AdaKernelDim is KernelDim of the Ada kernel.
func AdaKernelDim(d int) (int, error) { return KernelDim(AdaHeadDims, d) }

// AdaStage is the stage number of the Ada kernel family (sm_89: both GEMMs
// on mma.sync m16n8k32 e4m3, the FlashAttention-2 structure). It is part of
// the compute_89 module, so it loads on every sm_89+ GPU, but it is not in
// Stages: its geometry is an AdaConfig, and it has head dims of its own.
const AdaStage = 10

// AdaHeadDims are the head dimensions the Ada kernel is built for.
var AdaHeadDims = []int{64, 96, 128, 256}

// AdaConfig is the geometry of the Ada kernel for one head dimension.
//
// A block is Warps warps of 16 query rows each, all rows of one KV head:
// the query heads of its group packed with positions (Pack), so that each
// K/V tile a block loads serves every query head that reads it. The warps
// share each tile of BlockN keys in a Ring-deep cp.async ring in dynamic
// shared memory: K as BlockN rows of KPitch bytes, V transposed (from the
// V image the pack kernel writes) as D rows of VPitch bytes.
type AdaConfig struct {
	D      int // head dimension
	BlockN int // keys per K/V tile
	Warps  int // warps per block, 16 query rows each
	Ring   int // K/V tiles in flight
}

// Ada returns the Ada kernel's geometry for head dimension d. The rings are
// sized so that two blocks fit an L4 SM (100 KB of shared memory, 99 KB
// per block): 3 tiles deep where that holds, else 2.
func Ada(d int) (AdaConfig, error) {
	c := AdaConfig{D: d, BlockN: 64, Warps: 4, Ring: 3}
	switch d {
	case 64, 96:
	case 128:
		c.Ring = 2
	case 256:
		// The output accumulator takes d/2 registers a thread: a 32-key
		// score tile keeps the total under 255 without spills.
		c.BlockN, c.Ring = 32, 2
	default:
		return AdaConfig{}, fmt.Errorf("%w: the Ada kernel supports head dims %v, not %d", ErrNoKernel, AdaHeadDims, d)
	}
	return c, nil
}

// BlockM is the query rows of a block (packed heads times positions).
func (c AdaConfig) BlockM() int { return 16 * c.Warps }

// Threads is the block size.
func (c AdaConfig) Threads() int { return 32 * c.Warps }

// KPitch and VPitch are the shared-memory pitches of a K row (D bytes) and
// of a transposed V row (BlockN bytes): rounded up to an odd number of
// 16-byte chunks, so that ldmatrix's eight rows fall in eight different
// bank groups.
func (c AdaConfig) KPitch() int { return 16 * ((c.D / 16) | 1) }

// VPitch: see KPitch.
func (c AdaConfig) VPitch() int { return 16 * ((c.BlockN / 16) | 1) }

// TileBytes is one ring slot: a K tile and a transposed V tile.
func (c AdaConfig) TileBytes() int { return c.BlockN*c.KPitch() + c.D*c.VPitch() }

// SharedBytes is the dynamic shared memory of a block.
func (c AdaConfig) SharedBytes() int { return c.Ring * c.TileBytes() }

// VImageBytes is the size of one KV head's V image: the keys padded to
// whole tiles, each tile D rows of BlockN bytes (keys in sigma order within
// 16-key groups; see the kernel).
func (c AdaConfig) VImageBytes(sk int) int { return Pad(sk, c.BlockN) * c.D }

// Pack returns how a block's BlockM rows are shared among the query heads
// of one KV head (group of them) and the sq positions: heads query heads
// (a chunk of the group) times positions positions, head-major, and chunks
// head chunks per group. The kernel computes the same (ada.cuh, pack_of).
func (c AdaConfig) Pack(group, sq int) (heads, positions, chunks int) {
	heads = min(group, c.BlockM())
	positions = min(c.BlockM()/heads, sq)
	return heads, positions, (group + heads - 1) / heads
}

// Grid returns the launch grid: (position blocks × head chunks, KV heads,
// batch).
func (c AdaConfig) Grid(b, hkv, group, sq int) (x, y, z int) {
	_, pos, chunks := c.Pack(group, sq)
	return (sq + pos - 1) / pos * chunks, hkv, b
}

// Pad returns n rounded up to a multiple of m.
func Pad(n, m int) int { return (n + m - 1) / m * m }

// QImageBytes, KImageBytes and VImageBytes are the sizes of one head's
// packed tiles (the device layout the Hopper kernel loads with bulk copies):
// Q in blocks of BlockM rows by DK bytes, K in tiles of BlockN keys by DK
// bytes, V transposed in tiles of D rows by BlockN keys.
func (c HopperConfig) QImageBytes(sq int) int { return Pad(sq, c.BlockM) * c.DK }

// OneTile reports whether a call with sk keys runs the Hopper kernel's
// one-tile form (fp8attn_stage9o_d64, fp8attn_stage9fo_d64): D 64 (one
// 64-byte K panel, so that two K tiles are one K-major block for a
// wgmma m64n256k32) with sk padded to exactly two tiles, which the form
// loads whole into its ring's first two slots; every K and V image is
// the tiled kernel's.
func (c HopperConfig) OneTile(sk int) bool {
	return c.D == 64 && c.DK == 64 && c.Ring >= 2 && Pad(sk, c.BlockN) == 2*c.BlockN
}

// The one-tile form's blocks are narrower than the tiled kernel's: one
// producer and one consumer warpgroup, OneTileBlockM query rows (one Q
// image block), so that a call's exponentials spread over twice the SMs.
const (
	OneTileBlockM  = 64
	OneTileThreads = 256
)

// OneTileCluster is the blocks of the one-tile form that quantizes its own
// float32 inputs (fp8attn_stage9qo_d64, a fused call: OneTileQuantizing):
// a thread-block cluster of one query head's blocks, each quantizing
// OneTileBlockM query rows and OneTileBlockM keys of K and V, its K and V
// codes copied into the others' shared memory. Every key of the one tile
// (2·BlockN at D 64) is in one block's share.
const OneTileCluster = 4

// OneTileQuantizing reports whether a fused call (float32 inputs quantized
// on launch) with sq query rows and sk keys runs the one-tile form that
// quantizes its own inputs, in one cluster a query head: OneTile(sk), the
// cluster's blocks holding the tile's keys, and every query row in them.
func (c HopperConfig) OneTileQuantizing(sq, sk int) bool {
	return c.OneTile(sk) && OneTileCluster*OneTileBlockM == 2*c.BlockN && sq >= 1 && sq <= OneTileCluster*OneTileBlockM
}

// QuantizingLaunch is the launch of a call OneTileQuantizing takes: a
// cluster of OneTileCluster blocks (grid x) for each query head and batch,
// OneTileThreads a block.
func (c HopperConfig) QuantizingLaunch(b, hq int) (x, y, z, threads int) {
	return OneTileCluster, hq, b, OneTileThreads
}

// Launch returns the launch of a call with batch b, hq query heads, sq
// query rows and sk keys: its grid (query blocks, query heads, batch) and
// the threads of a block, in the one-tile form's blocks where OneTile(sk)
// says so.
func (c HopperConfig) Launch(b, hq, sq, sk int) (x, y, z, threads int) {
	rows, threads := c.BlockM, c.Threads
	if c.OneTile(sk) {
		rows, threads = OneTileBlockM, OneTileThreads
	}
	return (sq + rows - 1) / rows, hq, b, threads
}

// KImageBytes: see QImageBytes.
func (c HopperConfig) KImageBytes(sk int) int { return Pad(sk, c.BlockN) * c.DK }

// VImageBytes: see QImageBytes.
func (c HopperConfig) VImageBytes(sk int) int { return Pad(sk, c.BlockN) * c.D }

// SharedBytes is the dynamic shared memory a block uses: Q, the K/V ring,
// 1 KB of E4M3 ones (the B operand that sums the rows of P on the tensor
// cores), the ring's barriers (1 KB), plus 1 KB to align the tiles to the
// swizzle repeat.
func (c HopperConfig) SharedBytes() int {
	return c.BlockM*c.DK + c.Ring*c.BlockN*(c.DK+c.D) + 1024 + 1024 + 1024
}

// TensorSharedBytes is the dynamic shared memory of a block of the form
// that reads the caller's tensors through tensor maps: SharedBytes plus
// two staging buffers of one K tile each, where V's tiles land before the
// producer transposes them into the ring.
func (c HopperConfig) TensorSharedBytes() int { return c.SharedBytes() + 2*c.BlockN*c.DK }

// PagedSharedBytes is the dynamic shared memory of a block of the forms
// that read the paged cache (PagedRing): the tensor form's layout with
// their ring (their own tables and scales live in its staging buffers).
func (c HopperConfig) PagedSharedBytes() int {
	return c.TensorSharedBytes() + (c.PagedRing-c.Ring)*c.BlockN*(c.DK+c.D)
}

// The narrow tiled tensor form's blocks (HopperConfig.Narrow): one
// producer and one consumer warpgroup, NarrowBlockM query rows, NarrowPerSM
// blocks an SM at once (launch bounds, registers and shared memory), so
// that one block's prologue, pipeline fill and drain and epilogue run
// beside another's main loop.
const (
	NarrowBlockM  = 64
	NarrowThreads = 256
	NarrowPerSM   = 2
)

// NarrowSharedBytes is the dynamic shared memory of a block of the narrow
// form: Q's NarrowBlockM rows, the K/V ring, the block of ones, the
// barriers and the alignment as in SharedBytes, and no staging buffers.
func (c HopperConfig) NarrowSharedBytes() int {
	return NarrowBlockM*c.DK + c.Ring*c.BlockN*(c.DK+c.D) + 1024 + 1024 + 1024
}

// NarrowLaunch returns the narrow form's launch of a call with batch b, hq
// query heads and sq query rows: its grid (query blocks of NarrowBlockM
// rows, query heads, batch) and the threads of a block.
func (c HopperConfig) NarrowLaunch(b, hq, sq int) (x, y, z, threads int) {
	return (sq + NarrowBlockM - 1) / NarrowBlockM, hq, b, NarrowThreads
}

// Schedule is the config's schedule as the kernel's _config exports it
// after the geometry: PINGPONG, SOFTMAX_TURNS, ONE_PA (0 or 1), PV_PARTS,
// FUSED_PINGPONG.
func (c HopperConfig) Schedule() []int {
	return []int{b2i(c.PingPong), b2i(c.SoftmaxTurns), b2i(c.OnePA), c.PVParts, b2i(c.FusedPingPong)}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// KernelName returns the entry point of stage for head dimension d.
func KernelName(stage, d int) string { return fmt.Sprintf("fp8attn_stage%d_d%d", stage, d) }

// Grid returns the launch grid for a problem with sq query rows, hq query
// heads and batch b: (query blocks, query heads, batch).
func (c Config) Grid(b, hq, sq int) (x, y, z int) {
	return (sq + c.BlockM - 1) / c.BlockM, hq, b
}

// Header returns the C++ header the kernels compile with: one
// Tiles<STAGE, D> specialization per kernel, and the stage list.
func Header() string {
	var b strings.Builder
	b.WriteString(`// Code generated by go run ./internal/tiles/gen; DO NOT EDIT.
//
// The geometry of every kernel stage. Its single source is the Go package
// internal/tiles; the launcher reads the same numbers there, and checks each
// kernel's exported *_config against them when the module loads.
#pragma once

`)
	fmt.Fprintf(&b, "#define FP8ATTN_NUM_STAGES %d\n\n", len(Stages))
	b.WriteString("// BM query rows per block, BN keys per tile, THREADS per block, RING tiles in flight.\n")
	b.WriteString("template <int STAGE, int D> struct Tiles;\n")
	for _, s := range Stages {
		for _, d := range HeadDims {
			c, _ := Get(s, d)
			fmt.Fprintf(&b, "template <> struct Tiles<%d, %d> { static constexpr int BM = %d, BN = %d, THREADS = %d, RING = %d; };\n",
				s, d, c.BlockM, c.BlockN, c.Threads, c.Ring)
		}
	}
	b.WriteString("\n// The Hopper kernel (stage 9, sm_90a), geometry and schedule: see internal/tiles.HopperConfig.\n")
	b.WriteString("template <int D> struct HopperTiles;\n")
	for _, d := range HopperHeadDims {
		c, _ := Hopper(d)
		sc := c.Schedule()
		fmt.Fprintf(&b, "template <> struct HopperTiles<%d> { static constexpr int D = %d, DK = %d, BM = %d, BN = %d, THREADS = %d, RING = %d, PAGED_RING = %d, SMEM = %d, TSMEM = %d, PTSMEM = %d, ONE_BM = %d, ONE_THREADS = %d, ONE_CLUSTER = %d, PINGPONG = %d, SOFTMAX_TURNS = %d, ONE_PA = %d, PV_PARTS = %d, FUSED_PINGPONG = %d, NARROW = %d, NARROW_BM = %d, NARROW_THREADS = %d, NARROW_PER_SM = %d, NSMEM = %d, NOLSE_ENTRIES = %d; };\n",
			d, c.D, c.DK, c.BlockM, c.BlockN, c.Threads, c.Ring, c.PagedRing, c.SharedBytes(), c.TensorSharedBytes(), c.PagedSharedBytes(), OneTileBlockM, OneTileThreads, OneTileCluster, sc[0], sc[1], sc[2], sc[3], sc[4],
			b2i(c.Narrow), NarrowBlockM, NarrowThreads, NarrowPerSM, c.NarrowSharedBytes(), b2i(c.NoLSEEntries))
	}
	b.WriteString("\n// The Ada kernel (stage 10, compute_89): see internal/tiles.AdaConfig.\n")
	b.WriteString("template <int D> struct AdaTiles;\n")
	for _, d := range AdaHeadDims {
		c, _ := Ada(d)
		fmt.Fprintf(&b, "template <> struct AdaTiles<%d> { static constexpr int D = %d, BM = %d, BN = %d, WARPS = %d, RING = %d, KPITCH = %d, VPITCH = %d, TILE = %d, SMEM = %d; };\n",
			d, c.D, c.BlockM(), c.BlockN, c.Warps, c.Ring, c.KPitch(), c.VPitch(), c.TileBytes(), c.SharedBytes())
	}
	b.WriteString("\n// The paged-cache kernels (paged.cu): see internal/tiles.PagedConfig.\n")
	b.WriteString("template <int D> struct PagedTiles;\n")
	for _, d := range PagedHeadDims {
		c, _ := Paged(d)
		fmt.Fprintf(&b, "template <> struct PagedTiles<%d> { static constexpr int ROWS = %d, KEYS = %d, WARPS = %d, RING = %d, KPITCH = %d, TILE = %d, SMEM = %d; };\n",
			d, c.Rows, c.Keys, c.Warps, c.Ring, c.KPitch(), c.TileBytes(), c.SharedBytes())
	}
	b.WriteString("\n// The warp-specialized paged kernel (paged.cu, sm_90a): see internal/tiles.PagedWSConfig.\n")
	b.WriteString("template <int D> struct PagedWSTiles;\n")
	for _, d := range PagedWSHeadDims {
		c, _ := PagedWS(d)
		fmt.Fprintf(&b, "template <> struct PagedWSTiles<%d> { static constexpr int ROWS = %d, KEYS = %d, CONSUMERS = %d, PRODUCERS = %d, CONSUMER_REGS = %d, PRODUCER_REGS = %d, RING = %d, TILE = %d, MERGE = %d, SMEM = %d, T_ROWS = %d; };\n",
			d, c.Rows, c.Keys, c.Consumers, c.Producers, c.ConsumerRegs, c.ProducerRegs, c.Ring, c.TileBytes(), c.MergeBytes(), c.SharedBytes(), c.TransposedRows)
	}
	return b.String()
}

// PagedHeadDims are the head dimensions of the paged-cache kernels (decode
// and chunked attention against an FP8 KV cache, and its append).
var PagedHeadDims = []int{32, 64, 80, 96, 128, 160, 192, 256}

// PagedConfig is the geometry of the paged-cache attention kernel for one
// head dimension. A block serves Rows query rows (the query heads of one KV
// head times the new positions, packed) against one split of a sequence's
// keys; each of its Warps walks its own 32-key tiles (one page holds whole
// tiles) through its own cp.async ring of Ring tiles, and the warps merge at
// the end. The Rows rows fill the upper half of an m16n8k16 tile; the lower
// half carries the low-order part of the same rows (see paged.cu).
type PagedConfig struct {
	D     int // head dimension
	Rows  int // query rows per block
	Keys  int // keys per tile
	Warps int // warps per block, each with its own tiles
	Ring  int // tiles in flight per warp
}

// Paged returns the paged-cache kernel's geometry for head dimension d.
func Paged(d int) (PagedConfig, error) {
	if !slices.Contains(PagedHeadDims, d) {
		return PagedConfig{}, fmt.Errorf("%w: the paged-cache kernels support head dims %v, not %d", ErrNoKernel, PagedHeadDims, d)
	}
	c := PagedConfig{D: d, Rows: 8, Keys: 32, Warps: 4, Ring: 2}
	if d > 128 {
		c.Warps = 2 // two warps' rings fit the L4's 99 KB of shared memory
	}
	return c, nil
}

// KPitch is the shared-memory pitch of a key row: D bytes rounded up to an
// odd number of 16-byte chunks, so that ldmatrix's eight rows fall in eight
// different bank groups.
func (c PagedConfig) KPitch() int { return 16 * ((c.D / 16) | 1) }

// TileBytes is one ring slot: Keys key rows at KPitch, then the values
// transposed, D rows of Keys bytes.
func (c PagedConfig) TileBytes() int { return c.Keys*c.KPitch() + c.D*c.Keys }

// SharedBytes is the dynamic shared memory of a block: every warp's ring
// (reused at the end for the warps' merge, which needs less).
func (c PagedConfig) SharedBytes() int { return c.Warps * c.Ring * c.TileBytes() }

// Threads is the block size.
func (c PagedConfig) Threads() int { return 32 * c.Warps }

// PagedWSHeadDims are the head dimensions of the warp-specialized paged
// kernel (paged.cu's fp8attn_paged_ws_d{D}, built for sm_90a only): those
// whose per-lane state (the output row and the query fragments) fits the
// registers of a 384-thread block.
var PagedWSHeadDims = []int{32, 64, 80, 96, 128}

// PagedWSConfig is the geometry of the warp-specialized paged kernel for one
// head dimension. One block an SM walks work units (a sequence's KV head,
// row block and key split) in turn; a producer warp streams their 32-key
// tiles into a ring of Ring slots with bulk copies (each slot one tile's keys
// and values, 2·Keys·D bytes, laid out in the cache as they are wanted in
// shared memory), and Consumers warps take the tiles round robin, each with
// its own online softmax, merging at the end of each unit in an area of
// their own (the ring goes on filling with the next unit's tiles); the
// unit that completes an item's splits merges them.
type PagedWSConfig struct {
	D         int // head dimension
	Rows      int // query rows per unit
	Keys      int // keys per tile
	Consumers int // consumer warps per block
	Producers int // producer warps per block
	// ConsumerRegs and ProducerRegs: the registers a thread of each role
	// has after setmaxnreg (the block launches with 65536 / Threads each).
	ConsumerRegs, ProducerRegs int
	Ring                       int // tiles in flight per block
	// TransposedRows: units of at most this many query rows (a decode
	// step's query heads of one KV head) run the transposed warp state
	// (PagedWarpT, Sᵀ = K·Qᵀ: the keys fill the m16 rows, so that few rows
	// waste no tensor-core work); larger units run PagedWarp.
	TransposedRows int
}

// pagedWSConsumers and pagedWSProducers are the consumer and producer warps
// of a warp-specialized block, and pagedWSShared the shared memory its
// dynamic part may take (227 KB, the most a block can have on Hopper, less
// room for its few static bytes).
const (
	pagedWSConsumers = 8
	pagedWSProducers = 8
	pagedWSShared    = 227<<10 - 64
)

// PagedWS returns the warp-specialized paged kernel's geometry for head
// dimension d: the ring as many slots as fit, a multiple of the consumers
// (each slot serves one consumer warp, and one producer warp), at most 64.
func PagedWS(d int) (PagedWSConfig, error) {
	if !slices.Contains(PagedWSHeadDims, d) {
		return PagedWSConfig{}, fmt.Errorf("%w: the warp-specialized paged kernel supports head dims %v, not %d", ErrNoKernel, PagedWSHeadDims, d)
	}
	c := PagedWSConfig{D: d, Rows: 8, Keys: 32, Consumers: pagedWSConsumers, Producers: pagedWSProducers,
		ConsumerRegs: 200, ProducerRegs: 56, TransposedRows: 4}
	for n := c; n.Ring+c.Consumers <= 64; {
		if n.Ring += c.Consumers; n.SharedBytes() <= pagedWSShared {
			c.Ring = n.Ring
		}
	}
	return c, nil
}

// TileBytes is one ring slot: Keys key rows of D codes, then the values,
// D rows of Keys codes.
func (c PagedWSConfig) TileBytes() int { return 2 * c.Keys * c.D }

// MergeBytes is the consumers' merge area: each warp's Rows output rows of
// D floats (or, for the merge of an item's splits, 256 split weights for
// each of 8 warps, if more), then each warp's Rows maxima and sums and its
// V units.
func (c PagedWSConfig) MergeBytes() int {
	return max(c.Consumers*c.Rows*c.D, 8*256)*4 + c.Consumers*(2*c.Rows+1)*4
}

// SharedBytes is the dynamic shared memory of a block: the ring, its full
// and empty mbarriers (8 bytes each) and its slots' K and V scales, the
// merge area.
func (c PagedWSConfig) SharedBytes() int {
	return c.Ring*c.TileBytes() + c.Ring*(8+8+8) + c.MergeBytes()
}

// Threads is the block size: the consumer and producer warps.
func (c PagedWSConfig) Threads() int { return 32 * (c.Consumers + c.Producers) }

// PagedPageMultiple: a paged cache's page size must be a multiple of it (a
// tile never straddles two pages).
const PagedPageMultiple = 32
