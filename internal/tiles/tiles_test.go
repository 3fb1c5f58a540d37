package tiles

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	for _, st := range Stages {
		for _, d := range HeadDims {
			c, err := Get(st, d)
			if err != nil || c.BlockM%16 != 0 || c.Threads%32 != 0 || c.BlockN%16 != 0 || c.Ring < 1 {
				t.Errorf("stage %d d %d: %+v %v", st, d, c, err)
			}
			spec := fmt.Sprintf("struct Tiles<%d, %d> { static constexpr int BM = %d, BN = %d, THREADS = %d, RING = %d; };",
				st, d, c.BlockM, c.BlockN, c.Threads, c.Ring)
			if !strings.Contains(Header(), spec) {
				t.Errorf("header lacks %s", spec)
			}
		}
	}
	if _, err := Get(3, 96); !errors.Is(err, ErrNoKernel) {
		t.Errorf("d=96: %v", err)
	}
	if _, err := Get(len(Stages)+1, 64); !errors.Is(err, ErrNoKernel) {
		t.Errorf("stage past the list: %v", err)
	}
	c, _ := Get(4, 64)
	if x, y, z := c.Grid(2, 8, 256); x != 8 || y != 8 || z != 2 {
		t.Errorf("grid %d %d %d", x, y, z)
	}
}

// TestPaged: every paged-cache head dim has a geometry whose shared memory
// fits an L4's 99 KB per block (the compute_89 module loads there) and whose
// key pitch is an odd number of 16-byte chunks (conflict-free ldmatrix);
// other head dims are refused.
func TestPaged(t *testing.T) {
	for _, d := range PagedHeadDims {
		c, err := Paged(d)
		if err != nil {
			t.Fatal(err)
		}
		if c.SharedBytes() > 99*1024 {
			t.Errorf("D=%d: %d bytes of shared memory, above the L4's 99 KB", d, c.SharedBytes())
		}
		if c.KPitch()%32 != 16 || c.KPitch() < d {
			t.Errorf("D=%d: key pitch %d is not an odd number of 16-byte chunks covering the row", d, c.KPitch())
		}
		if c.Rows != 8 || c.Keys != 32 || d%16 != 0 {
			t.Errorf("D=%d: %+v: the kernel's fragment walk needs 8 rows, 32 keys and D a multiple of 16", d, c)
		}
		if c.SharedBytes() < c.Warps*8*d*4 {
			t.Errorf("D=%d: the warps' merge (%d bytes) does not fit the rings (%d)", d, c.Warps*8*d*4, c.SharedBytes())
		}
	}
	for _, d := range []int{0, 16, 72, 100, 512} {
		if _, err := Paged(d); err == nil {
			t.Errorf("Paged(%d) accepted", d)
		}
	}
}

// TestPagedWS: every warp-specialized head dim's block fits a Hopper SM
// (227 KB of shared memory, 65536 registers after setmaxnreg) with whole
// warpgroups of each role, a producer for each consumer, a ring of whole
// turns of the consumers, and the warps' merge and the split merge's
// weights in the merge area; other head dims are refused.
func TestPagedWS(t *testing.T) {
	for _, d := range PagedWSHeadDims {
		c, err := PagedWS(d)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.SharedBytes() > 227<<10:
			t.Errorf("D=%d: %d bytes of shared memory, above a Hopper block's 227 KB", d, c.SharedBytes())
		case 32*(c.Consumers*c.ConsumerRegs+c.Producers*c.ProducerRegs) > 65536 || c.Threads()*128 < 65536:
			t.Errorf("D=%d: %+v: the roles' registers exceed the SM's, or the launch gets more than 128 a thread", d, c)
		case c.Consumers%4 != 0 || c.Producers != c.Consumers || c.Ring%c.Consumers != 0 || c.Ring < 2*c.Consumers:
			t.Errorf("D=%d: %+v: the roles are not whole warpgroups, or a consumer's slots not whole (at least two)", d, c)
		case c.MergeBytes() < max(c.Consumers*8*d, 8*256)*4:
			t.Errorf("D=%d: merge area of %d bytes", d, c.MergeBytes())
		}
	}
	for _, d := range []int{0, 16, 160, 256} {
		if _, err := PagedWS(d); err == nil {
			t.Errorf("PagedWS(%d) accepted", d)
		}
	}
}

// TestAda: every Ada head dim fits two blocks on an L4 SM (100 KB of shared
// memory, 1 KB of it reserved per block) and under the 48 KB a block gets
// without opting in; pitches are odd numbers of 16-byte chunks; the packing
// of heads and positions covers every (head, position) exactly once.
func TestAda(t *testing.T) {
	for _, d := range AdaHeadDims {
		c, err := Ada(d)
		if err != nil {
			t.Fatal(err)
		}
		if 2*(c.SharedBytes()+1024) > 100*1024 || c.SharedBytes() > 48*1024 {
			t.Errorf("D=%d: %d bytes of shared memory a block", d, c.SharedBytes())
		}
		if c.KPitch()%32 != 16 || c.KPitch() < d || c.VPitch()%32 != 16 || c.VPitch() < c.BlockN {
			t.Errorf("D=%d: pitches %d, %d", d, c.KPitch(), c.VPitch())
		}
		if c.BlockN%32 != 0 || d%32 != 0 && d != 96 {
			t.Errorf("D=%d: %+v", d, c)
		}
		spec := fmt.Sprintf("struct AdaTiles<%d> { static constexpr int D = %d, BM = %d, BN = %d,", d, d, c.BlockM(), c.BlockN)
		if !strings.Contains(Header(), spec) {
			t.Errorf("header lacks %s", spec)
		}
	}
	c, _ := Ada(64)
	for _, tc := range []struct{ group, sq int }{{1, 1}, {1, 300}, {4, 1}, {4, 77}, {3, 100}, {6, 7}, {64, 2}, {100, 5}, {128, 1}} {
		heads, pos, chunks := c.Pack(tc.group, tc.sq)
		if heads*pos > c.BlockM() || heads < 1 || pos < 1 {
			t.Errorf("group %d sq %d: %d heads x %d positions", tc.group, tc.sq, heads, pos)
		}
		seen := map[[2]int]int{}
		x, _, _ := c.Grid(1, 1, tc.group, tc.sq)
		for bx := range x {
			chunk, pb := bx%chunks, bx/chunks
			for r := range heads * pos {
				h, p := chunk*heads+r/pos, pb*pos+r%pos
				if h < tc.group && p < tc.sq {
					seen[[2]int{h, p}]++
				}
			}
		}
		if len(seen) != tc.group*tc.sq {
			t.Errorf("group %d sq %d: %d of %d (head, position) pairs covered", tc.group, tc.sq, len(seen), tc.group*tc.sq)
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("group %d sq %d: %v covered %d times", tc.group, tc.sq, k, n)
			}
		}
	}
	for _, d := range []int{32, 80, 192, 512} {
		if _, err := Ada(d); !errors.Is(err, ErrNoKernel) {
			t.Errorf("Ada(%d): %v", d, err)
		}
	}
}

// TestHopperOneTile: the one-tile form takes D 64 with 129 to 256 keys
// (two K/V tiles, both loaded into the ring at once), and nothing else:
// shorter calls are one tile of the tiled kernel already, longer ones do
// not fit its 256-key score tile, and wider heads have more than one K
// panel.
func TestHopperOneTile(t *testing.T) {
	for _, tc := range []struct {
		d, sk int
		want  bool
	}{
		{64, 1, false}, {64, 128, false}, {64, 129, true}, {64, 200, true}, {64, 256, true}, {64, 257, false}, {64, 4096, false},
		{96, 256, false}, {128, 200, false}, {192, 100, false}, {256, 128, false},
	} {
		c, err := Hopper(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.OneTile(tc.sk); got != tc.want {
			t.Errorf("D %d, %d keys: OneTile %v, want %v", tc.d, tc.sk, got, tc.want)
		}
		if c.OneTile(tc.sk) && (c.Ring < 2 || 2*c.BlockN > 256 || c.KImageBytes(tc.sk) != 2*c.BlockN*c.DK) {
			t.Errorf("D %d, %d keys: %+v cannot hold its one tile", tc.d, tc.sk, c)
		}
		// The narrow blocks read whole 64-row blocks of the Q image, which
		// is padded to BlockM.
		if c.OneTile(tc.sk) && (c.BlockM%OneTileBlockM != 0 || OneTileThreads != 2*128) {
			t.Errorf("D %d: one-tile blocks of %d rows, %d threads do not fit %+v", tc.d, OneTileBlockM, OneTileThreads, c)
		}
	}
	// Launch: the one-tile form's narrow blocks where OneTile says so,
	// the tiled kernel's otherwise.
	for _, g := range []struct{ d, b, hq, sq, sk, x, threads int }{
		{64, 2, 8, 256, 256, 4, OneTileThreads}, {64, 1, 2, 300, 129, 5, OneTileThreads}, {64, 1, 1, 1, 200, 1, OneTileThreads},
		{64, 3, 4, 65, 256, 2, OneTileThreads}, {64, 2, 8, 256, 128, 2, 384}, {64, 1, 2, 300, 257, 3, 384},
		{128, 2, 8, 256, 256, 2, 384}, {128, 1, 1, 129, 4096, 2, 384},
	} {
		c, _ := Hopper(g.d)
		if x, y, z, th := c.Launch(g.b, g.hq, g.sq, g.sk); x != g.x || y != g.hq || z != g.b || th != g.threads {
			t.Errorf("D %d: Launch(%d, %d, %d, %d) = %d, %d, %d, %d threads; want %d, %d, %d, %d", g.d, g.b, g.hq, g.sq, g.sk, x, y, z, th, g.x, g.hq, g.b, g.threads)
		}
	}
}

// TestHopperOneTileQuantizing: the one-tile form that quantizes its own
// inputs takes the fused calls of the one-tile form whose query rows fit
// its cluster (at most 256 at D 64), and nothing else; its cluster's
// blocks hold every key of the tile, OneTileBlockM each, and its launch is
// one cluster a query head.
func TestHopperOneTileQuantizing(t *testing.T) {
	for _, tc := range []struct {
		d, sq, sk int
		want      bool
	}{
		{64, 256, 256, true}, {64, 1, 129, true}, {64, 77, 130, true}, {64, 193, 200, true},
		{64, 257, 256, false}, {64, 0, 256, false}, {64, 256, 128, false}, {64, 100, 257, false},
		{96, 100, 200, false}, {128, 64, 256, false},
	} {
		c, _ := Hopper(tc.d)
		if got := c.OneTileQuantizing(tc.sq, tc.sk); got != tc.want {
			t.Errorf("D %d, Sq %d, Sk %d: OneTileQuantizing %v, want %v", tc.d, tc.sq, tc.sk, got, tc.want)
		}
		if tc.want && (!c.OneTile(tc.sk) || OneTileCluster*OneTileBlockM != Pad(tc.sk, c.BlockN)) {
			t.Errorf("D %d, Sk %d: a cluster of %d blocks of %d keys does not hold the tile's %d", tc.d, tc.sk, OneTileCluster, OneTileBlockM, Pad(tc.sk, c.BlockN))
		}
	}
	c, _ := Hopper(64)
	if x, y, z, th := c.QuantizingLaunch(2, 8); x != OneTileCluster || y != 8 || z != 2 || th != OneTileThreads {
		t.Errorf("QuantizingLaunch(2, 8) = %d, %d, %d, %d threads; want %d, 8, 2, %d", x, y, z, th, OneTileCluster, OneTileThreads)
	}
}

// TestHopperSchedule: the Hopper kernel's schedule per head dim (the
// choices measured fastest, HopperConfig), and what the kernel needs of it:
// ping-pong and softmax turns are two uses of the same barriers' protocol
// and exclude each other, one P set needs P·V in one part, and each column
// part is a wgmma N (a multiple of 8, at most 256).
func TestHopperSchedule(t *testing.T) {
	for _, tc := range []struct {
		d                        int
		pingPong, smTurns, onePA bool
		parts                    int
		fusedPingPong            bool
	}{
		{64, false, true, true, 1, false}, {96, false, false, false, 1, false}, {128, true, false, false, 2, false},
		{192, true, false, false, 2, true}, {256, true, false, false, 4, true},
	} {
		c, err := Hopper(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if c.PingPong != tc.pingPong || c.SoftmaxTurns != tc.smTurns || c.OnePA != tc.onePA || c.PVParts != tc.parts ||
			c.FusedPingPong != tc.fusedPingPong {
			t.Errorf("D %d: schedule %+v, want ping-pong %v, softmax turns %v, one P set %v, %d parts, fused ping-pong %v",
				tc.d, c, tc.pingPong, tc.smTurns, tc.onePA, tc.parts, tc.fusedPingPong)
		}
		if c.PingPong && c.SoftmaxTurns || c.FusedPingPong && c.SoftmaxTurns || c.OnePA && c.PVParts != 1 || c.PVParts < 1 || c.PVParts > 4 ||
			c.D%c.PVParts != 0 || (c.D/c.PVParts)%8 != 0 {
			t.Errorf("D %d: schedule %+v is not one the kernel can run", tc.d, c)
		}
		want := []int{b2i(tc.pingPong), b2i(tc.smTurns), b2i(tc.onePA), tc.parts, b2i(tc.fusedPingPong)}
		if got := c.Schedule(); !slices.Equal(got, want) {
			t.Errorf("D %d: Schedule() = %v, want %v", tc.d, got, want)
		}
	}
}

// hopperSMSharedBytes is the shared memory an H100 or H200 SM holds (228
// KB), and hopperBlockReserved what the system reserves of it a block (1
// KB).
const hopperSMSharedBytes, hopperBlockReserved = 233472, 1024

// TestHopperNarrow: the narrow form is built at D 128 alone, with one
// consumer warpgroup (which takes no turns whatever the wide form's
// schedule: a static_assert of the kernel's); NarrowPerSM of its blocks fit an
// SM's shared memory, each NarrowBlockM rows of Q, the ring, the ones and
// barriers (and no staging buffers: the tensor form's budget would fit
// one); and its launch covers the query rows in blocks of NarrowBlockM.
func TestHopperNarrow(t *testing.T) {
	for _, d := range HopperHeadDims {
		c, err := Hopper(d)
		if err != nil {
			t.Fatal(err)
		}
		if c.Narrow != (d == 128) {
			t.Errorf("D %d: Narrow %v", d, c.Narrow)
		}
		if !c.Narrow {
			continue
		}
		if NarrowThreads != 2*128 || NarrowBlockM != 64 {
			t.Errorf("D %d: narrow blocks of %d threads, %d rows: not one consumer warpgroup of 64 rows", d, NarrowThreads, NarrowBlockM)
		}
		need := NarrowBlockM*c.DK + c.Ring*c.BlockN*(c.DK+c.D) + 1024 + 8*(4+3*c.Ring) + 1023
		if got := c.NarrowSharedBytes(); got < need || NarrowPerSM*(got+hopperBlockReserved) > hopperSMSharedBytes {
			t.Errorf("D %d: NarrowSharedBytes %d: need %d, and %d blocks in %d bytes", d, got, need, NarrowPerSM, hopperSMSharedBytes)
		}
		if 2*(c.TensorSharedBytes()+hopperBlockReserved) <= hopperSMSharedBytes {
			t.Errorf("D %d: the tensor form's %d bytes would fit two blocks too", d, c.TensorSharedBytes())
		}
		for _, g := range []struct{ b, hq, sq, x int }{{4, 32, 4096, 64}, {1, 2, 1, 1}, {2, 8, 65, 2}, {1, 1, 128, 2}} {
			if x, y, z, th := c.NarrowLaunch(g.b, g.hq, g.sq); x != g.x || y != g.hq || z != g.b || th != NarrowThreads {
				t.Errorf("D %d: NarrowLaunch(%d, %d, %d) = %d, %d, %d, %d; want %d, %d, %d, %d", d, g.b, g.hq, g.sq, x, y, z, th, g.x, g.hq, g.b, NarrowThreads)
			}
		}
		spec := fmt.Sprintf("NARROW = 1, NARROW_BM = %d, NARROW_THREADS = %d, NARROW_PER_SM = %d, NSMEM = %d,", NarrowBlockM, NarrowThreads, NarrowPerSM, c.NarrowSharedBytes())
		if !strings.Contains(Header(), fmt.Sprintf("struct HopperTiles<%d>", d)) || !strings.Contains(Header(), spec) {
			t.Errorf("D %d: the header lacks %q", d, spec)
		}
	}
}

// TestHopperPagedRing: the paged forms' ring is the tensor form's but at
// D 128, where they are built, whose block holds a deeper one (at least
// 4, so that two slots stay free beside the consumers' two) in the
// shared memory a Hopper block may have; PagedSharedBytes is the tensor
// form's layout at that ring, and the header says both.
func TestHopperPagedRing(t *testing.T) {
	for _, d := range HopperHeadDims {
		c, err := Hopper(d)
		if err != nil {
			t.Fatal(err)
		}
		if d != 128 && (c.PagedRing != c.Ring || c.PagedSharedBytes() != c.TensorSharedBytes()) {
			t.Errorf("D %d: paged ring %d, %d bytes, where the tensor form has %d, %d", d, c.PagedRing, c.PagedSharedBytes(), c.Ring,
				c.TensorSharedBytes())
		}
		need := c.BlockM*c.DK + c.PagedRing*c.BlockN*(c.DK+c.D) + 1024 + 2*c.BlockN*c.DK + 8*(4+3*c.PagedRing) + 1023
		if got := c.PagedSharedBytes(); got < need || got+hopperBlockReserved > hopperSMSharedBytes {
			t.Errorf("D %d: PagedSharedBytes %d: need %d, within %d", d, got, need, hopperSMSharedBytes-hopperBlockReserved)
		}
		if d == 128 && c.PagedRing < 4 {
			t.Errorf("D 128: paged ring %d, under two free slots beside the consumers'", c.PagedRing)
		}
		spec := fmt.Sprintf("RING = %d, PAGED_RING = %d, SMEM = %d, TSMEM = %d, PTSMEM = %d,", c.Ring, c.PagedRing, c.SharedBytes(),
			c.TensorSharedBytes(), c.PagedSharedBytes())
		if i := strings.Index(Header(), fmt.Sprintf("struct HopperTiles<%d>", d)); i < 0 || !strings.Contains(Header()[i:], spec) {
			t.Errorf("D %d: the header lacks %q", d, spec)
		}
	}
}

// TestHopperNoLSEEntries: the entries without the float32 row sums are
// built at D 64 alone (the other head dims hold both copies of the loop
// in one function), and tiles.h says so (the kernel's static_assert).
func TestHopperNoLSEEntries(t *testing.T) {
	for _, d := range HopperHeadDims {
		c, err := Hopper(d)
		if err != nil {
			t.Fatal(err)
		}
		if c.NoLSEEntries != (d == 64) {
			t.Errorf("D %d: NoLSEEntries %v", d, c.NoLSEEntries)
		}
		spec := fmt.Sprintf("struct HopperTiles<%d> { static constexpr int D = %d,", d, d)
		i := strings.Index(Header(), spec)
		if i < 0 {
			t.Fatalf("D %d: the header lacks %q", d, spec)
		}
		line, _, _ := strings.Cut(Header()[i:], "\n")
		if want := fmt.Sprintf("NOLSE_ENTRIES = %d; };", b2i(c.NoLSEEntries)); !strings.HasSuffix(line, want) {
			t.Errorf("D %d: the header's line %q does not end in %q", d, line, want)
		}
	}
}

// TestKernelDim: a head dim runs its own kernel, or the next one up when it
// is a multiple of 16; other dims and dims above the largest have none.
func TestKernelDim(t *testing.T) {
	for _, tc := range []struct {
		dims    []int
		d, want int // want 0: no kernel
	}{
		{HopperHeadDims, 64, 64}, {HopperHeadDims, 16, 64}, {HopperHeadDims, 32, 64}, {HopperHeadDims, 48, 64},
		{HopperHeadDims, 80, 96}, {HopperHeadDims, 96, 96}, {HopperHeadDims, 112, 128}, {HopperHeadDims, 160, 192},
		{HopperHeadDims, 208, 256}, {HopperHeadDims, 256, 256}, {HopperHeadDims, 272, 0}, {HopperHeadDims, 72, 0},
		{HopperHeadDims, 8, 0}, {HopperHeadDims, 0, 0}, {HopperHeadDims, -16, 0},
		{AdaHeadDims, 32, 64}, {AdaHeadDims, 80, 96}, {AdaHeadDims, 160, 256}, {AdaHeadDims, 200, 0},
	} {
		got, err := KernelDim(tc.dims, tc.d)
		if tc.want == 0 {
			if !errors.Is(err, ErrNoKernel) {
				t.Errorf("KernelDim(%v, %d) = %d, %v; want ErrNoKernel", tc.dims, tc.d, got, err)
			}
			continue
		}
		if got != tc.want || err != nil {
			t.Errorf("KernelDim(%v, %d) = %d, %v; want %d", tc.dims, tc.d, got, err, tc.want)
		}
	}
}
