package par

import "syscall"

// threadCPU returns the CPU time the calling thread has used, in
// nanoseconds (getrusage RUSAGE_THREAD: microsecond resolution).
func threadCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(1, &ru) != nil { // 1: RUSAGE_THREAD
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
