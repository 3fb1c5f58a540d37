//go:build cuda

package cuda

/*
#include <cuda.h>
#include <stdint.h>

// The tensor-map encoder of the CUDA 12 driver API, which the CUDA 11.8
// headers the build uses lack: its prototype, with the enums as the
// integers cuda.h 12 gives them, resolved at run time by cuGetProcAddress.
typedef CUresult (*fp8attn_encode_tiled_fn)(void* tensorMap, int dataType, cuuint32_t rank, void* globalAddress,
                                            const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                            const cuuint32_t* boxDim, const cuuint32_t* elementStrides, int interleave,
                                            int swizzle, int l2Promotion, int oobFill);

static fp8attn_encode_tiled_fn fp8attn_encode_tiled;

static CUresult fp8attn_resolve_encode_tiled(void) {
	void* fn = 0;
#if CUDA_VERSION >= 12000
	// (cuda.h 12 maps cuGetProcAddress to cuGetProcAddress_v2, which also
	// reports the symbol's status.)
	CUresult r = cuGetProcAddress("cuTensorMapEncodeTiled", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL);
#else
	CUresult r = cuGetProcAddress("cuTensorMapEncodeTiled", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT);
#endif
	if (r != CUDA_SUCCESS) return r;
	if (!fn) return CUDA_ERROR_NOT_FOUND;
	fp8attn_encode_tiled = (fp8attn_encode_tiled_fn)fn;
	return CUDA_SUCCESS;
}

// fp8attn_encode_rows encodes the map of a rank-4 byte tensor (dims[0]
// contiguous bytes, strides of dims 1-3 in bytes) with boxes of box0 bytes
// by box1 rows, swizzled in swizzle's mode (2: 64 bytes, 3: 128 bytes),
// 256-byte L2 promotion, zeros out of bounds. map: 128 bytes, 64-aligned.
static CUresult fp8attn_encode_rows(void* map, cuuint64_t addr, const cuuint64_t* dims, const cuuint64_t* strides,
                                    cuuint32_t box0, cuuint32_t box1, int swizzle) {
	const cuuint32_t box[4] = {box0, box1, 1, 1};
	const cuuint32_t ones[4] = {1, 1, 1, 1};
	return fp8attn_encode_tiled(map, 0, 4, (void*)(uintptr_t)addr, dims, strides, box, ones, 0, swizzle, 3, 0);
}

// fp8attn_encode_pages encodes the map of a paged cache's K pool as five
// dimensions (hopper/paged.cuh): the row's d bytes; slot bit 0, 2 rows d
// bytes apart; slot bits 2-3, 4 at 4·d; slot bit 1, 2 at 2·d; the 16-key
// groups of every (page, KV head) block, groups of them at 16·d. Boxes of
// (d, 2, 4, 2, 4), one 64-key page, no swizzle, 256-byte L2 promotion.
static CUresult fp8attn_encode_pages(void* map, cuuint64_t addr, cuuint64_t d, cuuint64_t groups) {
	const cuuint64_t dims[5] = {d, 2, 4, 2, groups};
	const cuuint64_t strides[4] = {d, 4 * d, 2 * d, 16 * d};
	const cuuint32_t box[5] = {(cuuint32_t)d, 2, 4, 2, 4};
	const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
	return fp8attn_encode_tiled(map, 0, 5, (void*)(uintptr_t)addr, dims, strides, box, ones, 0, 0, 3, 0);
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/fp8attn/fp8attn/internal/tiles"
)

var (
	encodeOnce sync.Once
	encodeErr  error
)

// resolveEncoder finds cuTensorMapEncodeTiled in the driver, once.
func resolveEncoder() error {
	encodeOnce.Do(func() {
		encodeErr = check("cuGetProcAddress(cuTensorMapEncodeTiled)", C.fp8attn_resolve_encode_tiled())
	})
	return encodeErr
}

// swizzleMode is the tensor-map swizzle of rows of w bytes (the kernels'
// swizzle<w>): CU_TENSOR_MAP_SWIZZLE_64B or _128B.
func swizzleMode(w int) (C.int, error) {
	switch w {
	case 64:
		return 2, nil
	case 128:
		return 3, nil
	}
	return 0, fmt.Errorf("cuda: no tensor-map swizzle for %d-byte rows", w)
}

// encodeRows writes into m the map of the FP8 tensor at addr with b
// batches of h heads of s rows of d bytes, at the given strides in bytes,
// in boxes of w bytes by rows rows (one panel of an image block of the
// Hopper kernel: w = its WK, swizzled so).
func encodeRows(m *tensorMap, addr uint64, b, h, s, d int, batchStride, headStride, rowStride int64, w, rows int) error {
	if err := resolveEncoder(); err != nil {
		return err
	}
	sw, err := swizzleMode(w)
	if err != nil {
		return err
	}
	dims := [4]C.cuuint64_t{C.cuuint64_t(d), C.cuuint64_t(s), C.cuuint64_t(h), C.cuuint64_t(b)}
	strides := [3]C.cuuint64_t{C.cuuint64_t(rowStride), C.cuuint64_t(headStride), C.cuuint64_t(batchStride)}
	err = encodeInto(m, func(at unsafe.Pointer) C.CUresult {
		return C.fp8attn_encode_rows(at, C.cuuint64_t(addr), &dims[0], &strides[0], C.cuuint32_t(w), C.cuuint32_t(rows), sw)
	})
	if err != nil {
		return fmt.Errorf("%w (dims %d×%d×%d×%d, strides %d/%d/%d bytes, box %d×%d)", err, d, s, h, b, rowStride, headStride, batchStride, w, rows)
	}
	return nil
}

// encodeInto runs encode on 64-byte-aligned memory of a map's 128 bytes
// (the driver writes it there and wants that alignment) and copies the
// map into m.
func encodeInto(m *tensorMap, encode func(at unsafe.Pointer) C.CUresult) error {
	var buf [128 + 64]byte
	p := unsafe.Pointer(&buf[0])
	aligned := unsafe.Add(p, (64-uintptr(p)%64)%64)
	if err := check("cuTensorMapEncodeTiled", encode(aligned)); err != nil {
		return err
	}
	copy(m[:], unsafe.Slice((*byte)(aligned), 128))
	return nil
}

// encodePages writes into m the map the paged form reads a paged cache's K
// pool through (fp8attn_encode_pages): blocks (page, KV head) blocks of 64
// keys of d bytes at addr, each landed by one box in key_row's order.
func encodePages(m *tensorMap, addr uint64, blocks, d int) error {
	if err := resolveEncoder(); err != nil {
		return err
	}
	// (The box's first dimension is at most 256 elements, a stride a
	// multiple of 16 bytes; a dimension at most 2^32.)
	// (The kernel takes a block's first coordinate, 4·block, as an int.)
	if d < 16 || d%16 != 0 || d > 256 || blocks < 1 || int64(blocks)*4 > math.MaxInt32 || addr%16 != 0 {
		return fmt.Errorf("cuda: no page map of %d blocks of %d-byte rows at %#x", blocks, d, addr)
	}
	err := encodeInto(m, func(at unsafe.Pointer) C.CUresult {
		return C.fp8attn_encode_pages(at, C.cuuint64_t(addr), C.cuuint64_t(d), C.cuuint64_t(4*blocks))
	})
	if err != nil {
		return fmt.Errorf("%w (the K pool: %d blocks of 64 rows of %d bytes)", err, blocks, d)
	}
	return nil
}

// qBlockRows is the rows of one Q image block (one consumer warpgroup's),
// the Q map's box.
const qBlockRows = 64

// tensorMappable reports whether the tensor maps can describe a resident's
// Q, K and V (its params): every address and stride a multiple of 16
// bytes, as cuTensorMapEncodeTiled requires.
func tensorMappable(p *params) bool {
	for _, x := range []int64{int64(p.Q), int64(p.K), int64(p.V), p.QBatchStride, p.QHeadStride, p.QRowStride,
		p.KVBatchStride, p.KVHeadStride, p.KVRowStride} {
		if x%16 != 0 {
			return false
		}
	}
	return true
}

// tensorMapsFor fills the tensor maps of a resident's Q, K and V (its
// params' addresses and strides) for the Hopper kernel of config cfg.
func tensorMapsFor(tp *tensorParams, cfg tiles.HopperConfig) error {
	p := &tp.F.P
	wk := min(cfg.DK, 128)
	return joinFirst(
		encodeRows(&tp.Q, p.Q, int(p.B), int(p.Hq), int(p.Sq), int(p.D), p.QBatchStride, p.QHeadStride, p.QRowStride, wk, qBlockRows),
		encodeRows(&tp.K, p.K, int(p.B), int(p.Hkv), int(p.Sk), int(p.D), p.KVBatchStride, p.KVHeadStride, p.KVRowStride, wk, cfg.BlockN),
		encodeRows(&tp.V, p.V, int(p.B), int(p.Hkv), int(p.Sk), int(p.D), p.KVBatchStride, p.KVHeadStride, p.KVRowStride, wk, cfg.BlockN),
	)
}

// joinFirst returns the first non-nil error.
func joinFirst(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
