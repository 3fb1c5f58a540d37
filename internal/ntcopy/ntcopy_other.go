//go:build !amd64 || purego

package ntcopy

// streamed reports that move does not stream: Copy is the built-in copy.
const streamed = false

// move is never called where streamed is false.
func move(dst, src *byte, blocks int) {}
