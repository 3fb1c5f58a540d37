package sdpa

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// physicalMemory returns the bytes of memory this process may use: the
// smaller of /proc/meminfo's MemTotal and the cgroup v2 limit
// (/sys/fs/cgroup/memory.max) where one is set; 0 if neither can be read.
func physicalMemory() int64 {
	var n int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 && kb < 1<<53 {
					n = kb << 10
				}
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if c, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && c > 0 && (n == 0 || c < n) {
			n = c
		}
	}
	return n
}
