package sdpa

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's memory (sysctl hw.memsize), 0 if it
// cannot be read.
func physicalMemory() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil || n > 1<<62 {
		return 0
	}
	return int64(n)
}
