//go:build !purego && !linux

package cpu

// amxPermit: the AMX path is enabled on Linux only, where the OS's
// permission for the tile state is asked for (amx_linux_amd64.go).
func amxPermit() bool { return false }
