//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// ReadPage implements backend.PagedReader.
func (s *pagedKV) ReadPage(page, head int, k, v []fp8.E4M3) (kScale, vScale float32, err error) {
	if err := s.errClosed(); err != nil {
		return 0, 0, err
	}
	c := s.cfg
	n := c.PageSize * c.HeadDim
	if page < 0 || page >= c.Pages || head < 0 || head >= c.KVHeads || len(k) != n || len(v) != n {
		return 0, 0, fmt.Errorf("%w: ReadPage(%d, %d) into %d and %d codes (pool of %d pages, %d heads, %d×%d a block)",
			backend.ErrInvalid, page, head, len(k), len(v), c.Pages, c.KVHeads, c.PageSize, c.HeadDim)
	}
	s.readV = freelist.Grow(s.readV, n)
	s.readK = freelist.Grow(s.readK, n)
	blk := int64(page*c.KVHeads+head) * int64(n)
	sc := int64(4 * (page*c.KVHeads + head))
	scales := make([]float32, 2) // (cgo: not inside a struct that holds Go pointers)
	if s.dev.capturing() != nil {
		return 0, 0, errCapture("reading a page")
	}
	err = s.dev.do(func() error {
		errs := []error{
			cu.MemcpyDtoHAsync(unsafe.Pointer(&s.readK[0]), s.k+cu.DevicePtr(blk), int64(n), s.dev.stream),
			cu.MemcpyDtoHAsync(unsafe.Pointer(&s.readV[0]), s.v+cu.DevicePtr(blk), int64(n), s.dev.stream),
			cu.MemcpyDtoHAsync(unsafe.Pointer(&scales[0]), s.ks+cu.DevicePtr(sc), 4, s.dev.stream),
			cu.MemcpyDtoHAsync(unsafe.Pointer(&scales[1]), s.vs+cu.DevicePtr(sc), 4, s.dev.stream),
			s.dev.stream.Synchronize(),
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: ReadPage: %w", err)
	}
	D, P := c.HeadDim, c.PageSize
	for j := range P {
		for d := range D {
			k[j*D+d] = s.readK[pagedKeyIndex(j, d, D)]
			v[j*D+d] = s.readV[pagedValueIndex(j, d, D)]
		}
	}
	return scales[0], scales[1], nil
}

// CopyPage implements backend.PagedKV: four device-to-device copies, in
// stream order with the cache's appends and attention calls (a page's
// blocks, all heads, are contiguous, and so are its scales).
func (s *pagedKV) CopyPage(dst, src int) error {
	if err := s.errClosed(); err != nil {
		return err
	}
	if err := s.cfg.CheckCopyPage(dst, src); err != nil {
		return err
	}
	if s.dev.capturing() != nil {
		return errCapture("copying a page")
	}
	c := s.cfg
	n := int64(c.KVHeads) * int64(c.HeadDim) * int64(c.PageSize)
	sc := 4 * int64(c.KVHeads)
	return s.dev.do(func() error {
		return errors.Join(
			cu.MemcpyDtoDAsync(s.k+cu.DevicePtr(int64(dst)*n), s.k+cu.DevicePtr(int64(src)*n), n, s.dev.stream),
			cu.MemcpyDtoDAsync(s.v+cu.DevicePtr(int64(dst)*n), s.v+cu.DevicePtr(int64(src)*n), n, s.dev.stream),
			cu.MemcpyDtoDAsync(s.ks+cu.DevicePtr(int64(dst)*sc), s.ks+cu.DevicePtr(int64(src)*sc), sc, s.dev.stream),
			cu.MemcpyDtoDAsync(s.vs+cu.DevicePtr(int64(dst)*sc), s.vs+cu.DevicePtr(int64(src)*sc), sc, s.dev.stream))
	})
}

// The cache's layout within a (page, KV head) block (kernels/paged.cu: the
// tile layout both attention kernels read): pagedKeyIndex is the offset of
// key (slot, d) and pagedValueIndex of value (slot, d). In each 32-key tile,
// key k's 16-byte chunk c sits at chunk c ^ pagedKeySwizzle(k), and values
// are [D][32] with the 16-key halves of row d swapped when bit 2 of d is set.
func pagedKeyIndex(slot, d, D int) int {
	return slot*D + 16*((d>>4)^pagedKeySwizzle(slot&31, D/16)) + d&15
}

func pagedValueIndex(slot, d, D int) int {
	return (slot>>5)*D*32 + d*32 + 16*(((slot>>4)&1)^((d>>2)&1)) + slot&15
}

// pagedKeySwizzle is paged.cu's k_swizzle: key k's ldmatrix row (mod 8)
// scaled to the largest power of two, at most 8, dividing nc.
func pagedKeySwizzle(k, nc int) int {
	row := k&16 + 8*((k>>1)&1) + 2*((k&15)>>2) + k&1
	return (row & 7) * min(nc&-nc, 8) >> 3
}
