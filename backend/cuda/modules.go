//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cuda/kernels"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// loadModules loads the kernel modules the device runs: the attention
// module (the compute_89 PTX, or on Ampere the compute_80 build without
// the FP8 mma.sync stages) with the ladder's kernels, the quantization
// kernels and, beyond Ampere, the Ada kernel; the paged module; and on
// compute capability 9.0 the Hopper module. Every module's parameter
// layouts and every kernel's compiled geometry are checked against Go and
// internal/tiles as they load. The caller holds the context current.
func (d *device) loadModules() error {
	// Ampere (sm_80-sm_88) loads the compute_80 build: the stages that
	// decode FP8 to f16 before the MMA.
	ampere := d.ComputeCapability < 89 || forceCompute80
	ptxEnv, ptxEmbedded := "FP8ATTN_PTX", kernels.PTX
	if ampere {
		ptxEnv, ptxEmbedded = "FP8ATTN_PTX80", kernels.PTX80
		d.fp8mmaErr = fmt.Errorf("%w: stages %v use FP8 mma.sync, which needs compute capability 8.9; %s is %d", backend.ErrUnsupported,
			fp8mmaStages, d.Name, d.ComputeCapability)
	}
	ptx, err := moduleImage(ptxEnv, ptxEmbedded)
	if err != nil {
		return err
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("cuda: loading PTX: %w", err)
	}
	if err := d.checkParamsLayout(d.mod); err != nil {
		return err
	}
	if err := d.loadQuant(); err != nil {
		return err
	}
	for _, st := range tiles.Stages {
		if ampere && slices.Contains(fp8mmaStages, st) {
			continue
		}
		for _, hd := range headDims {
			name := tiles.KernelName(st, hd)
			fn, err := d.mod.Function(name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", name, err)
			}
			if err := d.checkConfig(st, hd); err != nil {
				return err
			}
			d.fns[[2]int{st, hd}] = cFunction(fn)
		}
	}
	if !ampere {
		if err := d.loadAda(); err != nil {
			return err
		}
	}
	if err := d.loadPaged(ampere); err != nil {
		return err
	}
	if d.ComputeCapability == 90 && !forceCompute80 {
		// A module that does not load on the GPU it was built for is a
		// failure, not a fallback.
		return d.loadHopper()
	}
	d.hopperErr = fmt.Errorf("%w: the Hopper kernel (stage %d) needs compute capability 9.0; %s is %d", backend.ErrUnsupported,
		tiles.HopperStage, d.Name, d.ComputeCapability)
	return nil
}

// hopperKernels are the Hopper module's kernels for one head dim.
type hopperKernels struct {
	cfg                       tiles.HopperConfig
	attn, packQ, packK, packV C.CUfunction
	// quantPack quantizes float32 inputs into the images (quant_pack9),
	// quantPackLong the same for longer heads (its long form);
	// attnFused is the attention after either (its score factors from the
	// scales they wrote).
	quantPack, quantPackLong, attnFused C.CUfunction
	// attnOne and attnFusedOne are attn and attnFused in one tile, for the
	// calls cfg.OneTile takes (D 64 only; nil for the other head dims).
	attnOne, attnFusedOne C.CUfunction
	// attnQuantizing is the one-tile form quantizing its own float32
	// inputs, for the fused calls cfg.OneTileQuantizing takes (no
	// quant_pack9 before it; nil where attnOne is).
	attnQuantizing C.CUfunction
	// attnTensors and attnTensorsOne are the tensor form of attn and
	// attnOne: the caller's FP8 tensors through tensor maps, no pack
	// kernels (kernels/hopper/tensors.cuh; attnTensorsOne nil where
	// attnOne is).
	attnTensors, attnTensorsOne C.CUfunction
	// packVTensor writes the V image from the caller's V through the
	// tensor form's map, a block a tile (fp8attn_pack9vt), with
	// packVTensorSmem bytes of dynamic shared memory.
	packVTensor     C.CUfunction
	packVTensorSmem int
	// attnTensorsHead is attnTensors' head start, for tiled grids of one
	// wave (fp8attn_stage9th: V's first tiles transposed in the kernel
	// while the V pack before it, packVTensorHead, finishes; the pair keeps
	// kernels/pdl.cuh's other order). Nil in the softcap twin.
	attnTensorsHead, packVTensorHead C.CUfunction
	// attnTensorsSplit is attnTensors' key split (fp8attn_stage9ts: each
	// block's key tiles in parts run as blocks of their own, whose rows
	// the device's hopperMerge merges; launchTensors). Nil in the softcap
	// twin.
	attnTensorsSplit C.CUfunction
	// attnFusedSplit is attnFused's key split (fp8attn_stage9fs: the same
	// parts over quant_pack9's images, TensorParams without maps). Nil in
	// the softcap twin.
	attnFusedSplit C.CUfunction
	// attnTensorsNarrow is attnTensors in blocks of one consumer
	// warpgroup of tiles.NarrowBlockM rows, tiles.NarrowPerSM an SM
	// (fp8attn_stage9tn, where cfg.Narrow), for the calls with a causal
	// mask that narrowPlan gives it (launchTensors); nil where cfg.Narrow
	// is false, where an SM of the device holds fewer of its blocks, and
	// in the softcap twin.
	attnTensorsNarrow C.CUfunction
	// attnTensorsPaged is attnTensors reading K and V from the paged
	// cache's pages in place (fp8attn_stage9tp, at pagedTilesHeadDim only;
	// kernels/hopper/paged.cuh), for the paged prefill (pagedTiles); nil
	// at the other head dims and in the softcap twin.
	attnTensorsPaged C.CUfunction
	// attnTensorsPacked is attnTensorsPaged over a varlen batch in one
	// launch, a block an item (fp8attn_stage9tv; kernels/hopper/packed.cuh),
	// for the packed calls (packed.go); nil where attnTensorsPaged is.
	attnTensorsPacked C.CUfunction
	// softcap is these kernels with the attention entries (attn,
	// attnFused, attnOne, attnFusedOne, attnQuantizing, attnTensors,
	// attnTensorsOne) replaced by their softcap twins (the entry names'
	// form letters followed by c), for the calls with a softcap; nil in
	// the twin itself.
	softcap *hopperKernels
	// noLSE is these kernels with the fused and tensor forms' entries
	// (attnFused, attnTensors, attnTensorsHead and the one-tile forms)
	// replaced by their copies without the float32 row sums (the entry
	// names followed by _nolse), for the launches that write no LSE: in
	// the softcap twin at every head dim, and where cfg.NoLSEEntries;
	// nil otherwise, and in the copies themselves.
	noLSE *hopperKernels
}

// loadNoLSE returns k with its fused and tensor forms' entries replaced by
// those without the float32 row sums (hopperKernels.noLSE), their shared
// memory limits raised as k's are; twin is the softcap twin's letter ("c",
// k being the twin, which has no head start) or "" (k.cfg.NoLSEEntries).
func (d *device) loadNoLSE(k hopperKernels, hd int, twin string) (*hopperKernels, error) {
	type entry struct {
		form string
		fn   *C.CUfunction
		smem int
	}
	n := k
	entries := []entry{
		{"f", &n.attnFused, k.cfg.SharedBytes()},
		{"t", &n.attnTensors, k.cfg.TensorSharedBytes()},
	}
	if k.attnTensorsHead != nil {
		entries = append(entries, entry{"th", &n.attnTensorsHead, k.cfg.TensorSharedBytes()})
	}
	if k.attnOne != nil {
		entries = append(entries,
			entry{"fo", &n.attnFusedOne, k.cfg.SharedBytes()},
			entry{"qo", &n.attnQuantizing, k.cfg.SharedBytes()},
			entry{"to", &n.attnTensorsOne, k.cfg.TensorSharedBytes()})
	}
	for _, e := range entries {
		name := fmt.Sprintf("fp8attn_stage9%s%s_d%d_nolse", e.form, twin, hd)
		fn, err := d.hmod.Function(name)
		if err != nil {
			return nil, fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		*e.fn = cFunction(fn)
		markPDL(*e.fn)
		if err := setMaxSharedMemory(*e.fn, e.smem); err != nil {
			return nil, err
		}
	}
	return &n, nil
}

// hopperFor returns the Hopper kernels of shape p: those of the kernel
// head dim that runs its head dim (hopperDim), or their softcap twins for
// a problem with a softcap. The caller checked that the module loaded and
// that the kernel runs p's head dim.
func (d *device) hopperFor(p *backend.Problem) hopperKernels {
	k := d.hopper[hopperDim(p.D)]
	if p.Softcap != 0 {
		return *k.softcap
	}
	return k
}

// adaKernels are the Ada kernel and its V image pack for one head dim.
type adaKernels struct {
	cfg         tiles.AdaConfig
	attn, packV C.CUfunction
	// attnWindow and attnSoftcap are attn's twins of the same geometry
	// (fp8attn_stage10w_d<D>, fp8attn_stage10c_d<D>): the first bounds the
	// rows' keys by a sliding window, the second also caps the scores; attn
	// reads no window.
	attnWindow, attnSoftcap C.CUfunction
}

// attention returns the attention entry for a call of shape p: the
// softcap twin for a problem with a softcap (window or not), the window
// twin for one with a sliding window, attn otherwise.
func (k *adaKernels) attention(p *backend.Problem) C.CUfunction {
	switch {
	case p.Softcap != 0:
		return k.attnSoftcap
	case p.SlidingWindow != 0:
		return k.attnWindow
	}
	return k.attn
}

// loadHopper loads the sm_90a module (the embedded cubin, or in a kernel
// development build the file FP8ATTN_CUBIN names; its PTX if the driver
// refuses the cubin), checks its
// Params layout and every kernel's geometry (and the attention kernels'
// schedule) against internal/tiles, and raises each attention kernel's
// dynamic shared-memory limit.
func (d *device) loadHopper() error {
	image, err := moduleImage("FP8ATTN_CUBIN", string(kernels.HopperCubin))
	if err != nil {
		return err
	}
	if len(image) == 0 {
		return errors.New("cuda: no sm_90a cubin embedded (run go generate ./backend/cuda/kernels on a machine with nvcc)")
	}
	// cu.LoadData copies the image with C.CString, which copies every byte
	// (NULs included) and appends one.
	if d.hmod, err = cu.LoadData(image); err != nil {
		var perr error
		if d.hmod, perr = cu.LoadData(kernels.HopperPTX); perr != nil {
			return fmt.Errorf("cuda: loading the sm_90a module: cubin: %v; PTX: %w", err, perr)
		}
	}
	if err := d.checkParamsLayout(d.hmod); err != nil {
		return err
	}
	if err := d.checkLayouts(d.hmod, hopperLayouts); err != nil {
		return err
	}
	for _, hd := range hopperHeadDims {
		cfg, _ := tiles.Hopper(hd)
		var k hopperKernels
		k.cfg = cfg
		type entry struct {
			name string
			fn   *C.CUfunction
		}
		capped := hopperKernels{cfg: cfg}
		entries := []entry{
			{fmt.Sprintf("fp8attn_pack9q_d%d", hd), &k.packQ},
			{fmt.Sprintf("fp8attn_pack9k_d%d", hd), &k.packK},
			{fmt.Sprintf("fp8attn_pack9v_d%d", hd), &k.packV},
			{fmt.Sprintf("fp8attn_quantpack9_d%d", hd), &k.quantPack},
			{fmt.Sprintf("fp8attn_quantpack9l_d%d", hd), &k.quantPackLong},
			{fmt.Sprintf("fp8attn_pack9vt_d%d", hd), &k.packVTensor},
			{fmt.Sprintf("fp8attn_pack9vth_d%d", hd), &k.packVTensorHead},
			{fmt.Sprintf("fp8attn_stage9th_d%d", hd), &k.attnTensorsHead},
			{fmt.Sprintf("fp8attn_stage9ts_d%d", hd), &k.attnTensorsSplit},
			{fmt.Sprintf("fp8attn_stage9fs_d%d", hd), &k.attnFusedSplit},
		}
		// The attention entries (forms f, t; one tile o, fo, qo, to), and
		// their softcap twins (c after the form letters).
		for _, set := range []struct {
			k   *hopperKernels
			cap string
		}{{&k, ""}, {&capped, "c"}} {
			entries = append(entries,
				entry{fmt.Sprintf("fp8attn_stage9%s_d%d", set.cap, hd), &set.k.attn},
				entry{fmt.Sprintf("fp8attn_stage9f%s_d%d", set.cap, hd), &set.k.attnFused},
				entry{fmt.Sprintf("fp8attn_stage9t%s_d%d", set.cap, hd), &set.k.attnTensors})
			if cfg.OneTile(2 * cfg.BlockN) {
				entries = append(entries,
					entry{fmt.Sprintf("fp8attn_stage9o%s_d%d", set.cap, hd), &set.k.attnOne},
					entry{fmt.Sprintf("fp8attn_stage9fo%s_d%d", set.cap, hd), &set.k.attnFusedOne},
					entry{fmt.Sprintf("fp8attn_stage9qo%s_d%d", set.cap, hd), &set.k.attnQuantizing},
					entry{fmt.Sprintf("fp8attn_stage9to%s_d%d", set.cap, hd), &set.k.attnTensorsOne})
			}
		}
		for _, f := range entries {
			fn, err := d.hmod.Function(f.name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", f.name, err)
			}
			*f.fn = cFunction(fn)
			markPDL(*f.fn) // the sm_90a module's entry points keep kernels/pdl.cuh's contract
		}
		// The geometry, then the schedule the kernel was compiled with.
		want := append([]int{cfg.D, cfg.DK, cfg.BlockM, cfg.BlockN, cfg.Threads, cfg.Ring, cfg.SharedBytes()}, cfg.Schedule()...)
		if err := d.checkExported(d.hmod, tiles.KernelName(tiles.HopperStage, hd)+"_config", want...); err != nil {
			return err
		}
		if k.attnOne != nil {
			if err := errors.Join(
				d.checkExported(d.hmod, fmt.Sprintf("fp8attn_stage9o_d%d_config", hd), tiles.OneTileBlockM, tiles.OneTileThreads),
				d.checkExported(d.hmod, fmt.Sprintf("fp8attn_stage9qo_d%d_config", hd), tiles.OneTileCluster, tiles.OneTileBlockM, tiles.OneTileThreads),
			); err != nil {
				return err
			}
		}
		for _, fn := range []C.CUfunction{k.attn, k.attnFused, k.attnFusedSplit, k.attnOne, k.attnFusedOne, k.attnQuantizing,
			capped.attn, capped.attnFused, capped.attnOne, capped.attnFusedOne, capped.attnQuantizing} {
			if fn == nil {
				continue
			}
			if err := setMaxSharedMemory(fn, cfg.SharedBytes()); err != nil {
				return err
			}
		}
		smem, err := d.global(d.hmod, fmt.Sprintf("fp8attn_pack9vt_d%d_smem", hd), 1)
		if err != nil {
			return err
		}
		k.packVTensorSmem = int(smem[0])
		for _, fn := range []C.CUfunction{k.packVTensor, k.packVTensorHead} {
			if err := setMaxSharedMemory(fn, k.packVTensorSmem); err != nil {
				return err
			}
		}
		for _, fn := range []C.CUfunction{k.attnTensors, k.attnTensorsOne, k.attnTensorsHead, k.attnTensorsSplit, capped.attnTensors, capped.attnTensorsOne} {
			if fn == nil {
				continue
			}
			if err := setMaxSharedMemory(fn, cfg.TensorSharedBytes()); err != nil {
				return err
			}
		}
		if cfg.Narrow {
			if err := d.loadNarrow(&k, hd); err != nil {
				return err
			}
		}
		if hd == pagedTilesHeadDim {
			// (Both paged forms: the ring and shared memory they were compiled with.)
			if err := d.checkExported(d.hmod, fmt.Sprintf("fp8attn_stage9tp_d%d_config", hd), cfg.PagedRing, cfg.PagedSharedBytes()); err != nil {
				return err
			}
			for _, e := range []struct {
				form string
				fn   *C.CUfunction
			}{{"p", &k.attnTensorsPaged}, {"v", &k.attnTensorsPacked}} {
				name := fmt.Sprintf("fp8attn_stage9t%s_d%d", e.form, hd)
				f, err := d.hmod.Function(name)
				if err != nil {
					return fmt.Errorf("cuda: kernel %s: %w", name, err)
				}
				*e.fn = cFunction(f)
				markPDL(*e.fn)
				if err := setMaxSharedMemory(*e.fn, cfg.PagedSharedBytes()); err != nil {
					return err
				}
			}
		}
		// The twin shares the packs (a copy of k before the twin is set).
		capped.packQ, capped.packK, capped.packV, capped.quantPack, capped.quantPackLong = k.packQ, k.packK, k.packV, k.quantPack, k.quantPackLong
		capped.packVTensor, capped.packVTensorSmem = k.packVTensor, k.packVTensorSmem
		if capped.noLSE, err = d.loadNoLSE(capped, hd, "c"); err != nil {
			return err
		}
		k.softcap = &capped
		if cfg.NoLSEEntries {
			if k.noLSE, err = d.loadNoLSE(k, hd, ""); err != nil {
				return err
			}
		}
		d.hopper[hd] = k
	}
	merge, err := d.hmod.Function("fp8attn_merge9")
	if err != nil {
		return fmt.Errorf("cuda: kernel fp8attn_merge9: %w", err)
	}
	d.hopperMerge = cFunction(merge)
	markPDL(d.hopperMerge)
	g, err := d.global(d.hmod, "fp8attn_quantpack9_config", 3)
	if err != nil {
		return err
	}
	d.quantPack = quantPackGeometry{Threads: int(g[0]), Cluster: int(g[1]), Codes: int(g[2])}
	if t, c := d.quantPack.Threads, d.quantPack.Cluster; t <= 0 || t%32 != 0 || t > 1024 || c <= 0 || c > 8 || d.quantPack.Codes <= 0 {
		return fmt.Errorf("cuda: fp8attn_quantpack9_config %v is not a launchable geometry", g)
	}
	if g, err = d.global(d.hmod, "fp8attn_quantpack9l_config", 4); err != nil {
		return err
	}
	d.quantLong = quantLongGeometry{Threads: int(g[0]), PerSM: int(g[1]), Codes: int(g[2]), Held: int(g[3])}
	if gl := d.quantLong; gl.Threads <= 0 || gl.Threads%32 != 0 || gl.Threads > 1024 || gl.PerSM <= 0 || gl.Codes <= 0 || gl.Held < 0 {
		return fmt.Errorf("cuda: fp8attn_quantpack9l_config %v is not a launchable geometry", g)
	}
	smem := d.quantLong.Codes + 2*d.quantLong.Held
	for _, k := range d.hopper {
		if err := setMaxSharedMemory(k.quantPackLong, smem); err != nil {
			return err
		}
	}
	// The long form's grid: blocks that all run at once (a chunk waits for
	// the other chunks of its head to run), its SMs times what one holds at
	// the largest shared memory a block asks for, at most the launch
	// bounds' PerSM. Where one holds none, or cannot say, Blocks stays 0
	// and the long form is off: its heads take the Quantize path.
	if n, err := maxActiveBlocks(d.hopper[hopperHeadDims[0]].quantPackLong, d.quantLong.Threads, smem); err == nil && n > 0 {
		d.quantLong.Blocks = d.SMs * min(n, d.quantLong.PerSM) // (every head dim's entry has the same geometry)
	}
	return nil
}

// loadNarrow finds the narrow tiled tensor form of head dim hd
// (fp8attn_stage9tn_d<hd>) for k, checks its exported geometry against
// internal/tiles, raises its shared-memory limit and asks for the largest
// carveout. It leaves k.attnTensorsNarrow nil where an SM of the device
// holds fewer than tiles.NarrowPerSM of its blocks: the form is built for
// two blocks sharing one.
func (d *device) loadNarrow(k *hopperKernels, hd int) error {
	name := fmt.Sprintf("fp8attn_stage9tn_d%d", hd)
	f, err := d.hmod.Function(name)
	if err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", name, err)
	}
	fn := cFunction(f)
	smem := k.cfg.NarrowSharedBytes()
	if err := errors.Join(
		d.checkExported(d.hmod, name+"_config", tiles.NarrowBlockM, tiles.NarrowThreads, tiles.NarrowPerSM, smem),
		setMaxSharedMemory(fn, smem),
		setCarveoutMax(fn),
	); err != nil {
		return err
	}
	if n, err := maxActiveBlocks(fn, tiles.NarrowThreads, smem); err != nil || n < tiles.NarrowPerSM {
		return err
	}
	markPDL(fn)
	k.attnTensorsNarrow = fn
	return nil
}

// loadAda finds the Ada kernel (stage 10), its window and softcap twins
// and its pack kernel for every head dim in the compute_89 module, checks
// their geometry (the one the three attention entries are compiled with)
// against internal/tiles, and raises the dynamic shared-memory limit of
// the attention entries where a block needs more than the default 48 KB.
func (d *device) loadAda() error {
	for _, hd := range adaHeadDims {
		cfg, _ := tiles.Ada(hd)
		k := adaKernels{cfg: cfg}
		for _, f := range []struct {
			name string
			fn   *C.CUfunction
		}{
			{tiles.KernelName(tiles.AdaStage, hd), &k.attn},
			{fmt.Sprintf("fp8attn_stage10w_d%d", hd), &k.attnWindow},
			{fmt.Sprintf("fp8attn_stage10c_d%d", hd), &k.attnSoftcap},
			{fmt.Sprintf("fp8attn_pack10v_d%d", hd), &k.packV},
		} {
			fn, err := d.mod.Function(f.name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", f.name, err)
			}
			*f.fn = cFunction(fn)
		}
		if err := d.checkExported(d.mod, tiles.KernelName(tiles.AdaStage, hd)+"_config",
			cfg.D, cfg.BlockM(), cfg.BlockN, cfg.Warps, cfg.Ring, cfg.KPitch(), cfg.VPitch(), cfg.SharedBytes()); err != nil {
			return err
		}
		// A block must fit the device's shared memory (less the 1 KB the
		// hardware reserves per block); a head dim that does not is left
		// out (Supports then says ErrUnsupported) rather than failing at
		// launch.
		if cfg.SharedBytes()+1024 > d.SharedPerSM {
			continue
		}
		if cfg.SharedBytes() > 48*1024 {
			for _, fn := range []C.CUfunction{k.attn, k.attnWindow, k.attnSoftcap} {
				if err := setMaxSharedMemory(fn, cfg.SharedBytes()); err != nil {
					return err
				}
			}
		}
		d.ada[hd] = k
	}
	return nil
}

// adaMissing explains a head dim the Ada kernel runs but this device did
// not load the kernel of (its block needs more shared memory than an SM
// has).
func (d *device) adaMissing(hd int) error {
	cfg, _ := tiles.Ada(adaDim(hd))
	return fmt.Errorf("%w: stage %d at D=%d needs %d bytes of shared memory a block; %s has %d an SM", backend.ErrUnsupported,
		tiles.AdaStage, hd, cfg.SharedBytes(), d.Name, d.SharedPerSM)
}

// forceCompute80 makes openDevice load the compute_80 (Ampere) modules on
// any GPU, so that a test can run them where no Ampere GPU is lent.
var forceCompute80 bool

// forcePagedPTX makes openDevice load the paged module's compute_89 PTX on
// compute capability 9.0 instead of its sm_90a cubin (tests: the PTX is
// what an Ada GPU, and a Hopper whose driver refuses the cubin, runs).
var forcePagedPTX bool

// global reads the int32 array module mod exports under name.
func (d *device) global(mod cu.Module, name string, n int) ([]int32, error) {
	ptr, size, err := mod.Global(name)
	if err != nil || size != int64(4*n) {
		return nil, fmt.Errorf("cuda: %s (%d ints) missing from the module (size %d): %v", name, n, size, err)
	}
	got := make([]int32, n)
	if err := cu.MemcpyDtoH(unsafe.Pointer(&got[0]), ptr, size); err != nil {
		return nil, fmt.Errorf("cuda: reading %s: %w", name, err)
	}
	return got, nil
}

// checkParamsLayout compares the Go params struct with the kernels' Params
// as the kernel compiler laid it out (sizeof, then every field's offset).
func (d *device) checkParamsLayout(mod cu.Module) error {
	want := paramsLayout()
	got, err := d.global(mod, "fp8attn_params_layout", len(want))
	if err != nil {
		return err
	}
	for i := range want {
		if int(got[i]) != want[i] {
			return fmt.Errorf("cuda: Params layout: the kernels have %v (sizeof, offsets), Go has %v", got, want)
		}
	}
	return nil
}

// checkLayouts compares each parameter-block layout a module exports with
// its Go mirror.
func (d *device) checkLayouts(mod cu.Module, checks []layoutCheck) error {
	for _, c := range checks {
		got, err := d.global(mod, c.name, len(c.want))
		if err != nil {
			return err
		}
		for i := range c.want {
			if int(got[i]) != c.want[i] {
				return fmt.Errorf("cuda: %s: the kernels have %v (sizeof, offsets), Go has %v", c.name, got, c.want)
			}
		}
	}
	return nil
}

// checkConfig compares a kernel's compiled tile constants with internal/tiles.
func (d *device) checkConfig(stage, hd int) error {
	c, _ := tiles.Get(stage, hd)
	return d.checkExported(d.mod, tiles.KernelName(stage, hd)+"_config", c.BlockM, c.BlockN, c.Threads, c.Ring)
}

// checkExported reads the geometry array name that mod exports (a
// kernel's *_config, as many ints as want) and compares it with want
// (configError).
func (d *device) checkExported(mod cu.Module, name string, want ...int) error {
	got, err := d.global(mod, name, len(want))
	if err != nil {
		return err
	}
	return configError(name, got, want)
}

// quantKernels are the device quantization kernels (kernels/quant.cuh),
// and the float16 output of a host-slice call (kernels/half.cuh).
type quantKernels struct {
	amax, encode [2]C.CUfunction // [0]: one element at a time; [1]: four (D % 4 == 0)
	iota, scores C.CUfunction
	// The accuracy options (SmoothK, Hadamard) and the LSE correction.
	smoothK, rotate, correctLSE C.CUfunction
	scratch                     pooled // words kept 0 between launches (zeroWords)
	scratchWords                int

	// outHalf is a host-slice call's output in float16 for the way down.
	outHalf C.CUfunction
}

// loadQuant finds the quantization kernels (and fp8attn_out_half) in the
// attention module and checks their parameter blocks' layouts.
func (d *device) loadQuant() error {
	if err := d.checkLayouts(d.mod, quantLayouts); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		fn   *C.CUfunction
	}{
		{"fp8attn_quant_amax", &d.quant.amax[0]}, {"fp8attn_quant_encode", &d.quant.encode[0]},
		{"fp8attn_quant_amax4", &d.quant.amax[1]}, {"fp8attn_quant_encode4", &d.quant.encode[1]},
		{"fp8attn_quant_iota", &d.quant.iota}, {"fp8attn_score_factors", &d.quant.scores},
		{"fp8attn_smooth_k", &d.quant.smoothK}, {"fp8attn_rotate", &d.quant.rotate}, {"fp8attn_correct_lse", &d.quant.correctLSE},
		{"fp8attn_out_half", &d.quant.outHalf},
	} {
		fn, err := d.mod.Function(f.name)
		if err != nil {
			return fmt.Errorf("cuda: kernel %s: %w", f.name, err)
		}
		*f.fn = cFunction(fn)
	}
	return nil
}

// pagedKernels are the paged module's kernels.
type pagedKernels struct {
	append, merge, check C.CUfunction
	prefillInputs        C.CUfunction         // a chunk's queries quantized and the cache laid out as tensors, for the prefill kernels
	attn                 map[int]C.CUfunction // the cp.async kernel, by head dim
	attnCap              map[int]C.CUfunction // its softcap twin (fp8attn_pagedc_d), by head dim
	ws                   map[int]C.CUfunction // the warp-specialized kernel (sm_90a module only), by head dim
	wsq                  map[int]C.CUfunction // the same with units drawn at run time (a ticket), by head dim
}

// loadPaged loads the paged module: on compute capability 9.0 its sm_90a
// build (the embedded cubin), which adds the warp-specialized attention
// kernel; elsewhere, or if the driver refuses the cubin, the compute_89 PTX
// (with ampere, the compute_80 build). A kernel development build may read
// each from a file instead (FP8ATTN_PAGED_CUBIN, FP8ATTN_PAGED_PTX,
// FP8ATTN_PAGED_PTX80: overrides_kerneldev.go). It
// checks the parameter layouts and every attention kernel's geometry against
// internal/tiles, and raises the kernels' dynamic shared-memory limits. The
// caller holds the context current.
func (d *device) loadPaged(ampere bool) error {
	env, embedded := "FP8ATTN_PAGED_PTX", kernels.PagedPTX
	if ampere {
		env, embedded = "FP8ATTN_PAGED_PTX80", kernels.PagedPTX80
	}
	loaded := false
	if d.ComputeCapability == 90 && !ampere && !forcePagedPTX {
		cubin, err := moduleImage("FP8ATTN_PAGED_CUBIN", string(kernels.PagedCubin))
		if err != nil {
			return err
		}
		if d.pmod, err = cu.LoadData(cubin); err == nil {
			loaded = true
		} else {
			d.pagedWSErr = fmt.Errorf("cuda: the sm_90a paged module did not load (%v); the cp.async kernel runs", err)
		}
	}
	if !loaded {
		ptx, err := moduleImage(env, embedded)
		if err != nil {
			return err
		}
		if d.pmod, err = cu.LoadData(ptx); err != nil {
			return fmt.Errorf("cuda: loading the paged-cache PTX: %w", err)
		}
	}
	if err := d.checkLayouts(d.pmod, pagedLayouts); err != nil {
		return err
	}
	fn := func(name string) (C.CUfunction, error) {
		f, err := d.pmod.Function(name)
		if err != nil {
			return nil, fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		return cFunction(f), nil
	}
	// config checks the geometry kernel name exports against want and
	// raises its shared-memory limit to smem.
	config := func(f C.CUfunction, name string, want []int, smem int) error {
		if err := d.checkExported(d.pmod, name+"_config", want...); err != nil {
			return err
		}
		return setMaxSharedMemory(f, smem)
	}
	k := pagedKernels{attn: map[int]C.CUfunction{}, attnCap: map[int]C.CUfunction{}, ws: map[int]C.CUfunction{}, wsq: map[int]C.CUfunction{}}
	var err error
	if k.append, err = fn("fp8attn_paged_append"); err != nil {
		return err
	}
	if k.merge, err = fn("fp8attn_paged_merge"); err != nil {
		return err
	}
	if k.check, err = fn("fp8attn_paged_check"); err != nil {
		return err
	}
	if k.prefillInputs, err = fn("fp8attn_paged_prefill_inputs"); err != nil {
		return err
	}
	if err := d.checkExported(d.pmod, "fp8attn_paged_prefill_inputs_config", prefillThreads, prefillTilesPerBlock, prefillBlocksPerSM); err != nil {
		return err
	}
	for _, hd := range tiles.PagedHeadDims {
		name := fmt.Sprintf("fp8attn_paged_d%d", hd) // (its _config serves its softcap twin too)
		cfg, _ := tiles.Paged(hd)
		want := []int{cfg.Rows, cfg.Keys, cfg.Warps, cfg.Ring, cfg.SharedBytes()}
		for _, e := range []struct {
			entry string
			m     map[int]C.CUfunction
		}{{name, k.attn}, {fmt.Sprintf("fp8attn_pagedc_d%d", hd), k.attnCap}} {
			f, err := fn(e.entry)
			if err != nil {
				return err
			}
			if err := config(f, name, want, max(cfg.SharedBytes(), d.SharedPerSM/2)); err != nil { // room for pagedOccupancy's padding
				return err
			}
			e.m[hd] = f
		}
	}
	if loaded {
		for _, hd := range tiles.PagedWSHeadDims {
			name := fmt.Sprintf("fp8attn_paged_ws_d%d", hd) // (its _config serves both entries)
			cfg, _ := tiles.PagedWS(hd)
			want := []int{cfg.Rows, cfg.Keys, cfg.Consumers, cfg.Producers, cfg.Ring, cfg.SharedBytes()}
			for _, e := range []struct {
				entry string
				m     map[int]C.CUfunction
			}{{name, k.ws}, {fmt.Sprintf("fp8attn_paged_wsq_d%d", hd), k.wsq}} {
				f, err := fn(e.entry)
				if err != nil {
					return err
				}
				if err := config(f, name, want, cfg.SharedBytes()); err != nil {
					return err
				}
				e.m[hd] = f
			}
		}
		// The sm_90a build's entry points keep kernels/pdl.cuh's contract.
		for _, f := range []C.CUfunction{k.append, k.merge, k.check, k.prefillInputs} {
			markPDL(f)
		}
		for _, m := range []map[int]C.CUfunction{k.attn, k.attnCap, k.ws, k.wsq} {
			for _, f := range m {
				markPDL(f)
			}
		}
	}
	d.paged = k
	return nil
}
