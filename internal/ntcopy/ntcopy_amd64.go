//go:build !purego

package ntcopy

// streamed reports that move streams.
const streamed = true

// move copies blocks 64-byte blocks from src to dst (64-byte aligned) with
// non-temporal stores, then fences the stores:
//
//	for i := range blocks * 64 {
//		dst[i] = src[i]
//	}
//
//go:noescape
func move(dst, src *byte, blocks int)
