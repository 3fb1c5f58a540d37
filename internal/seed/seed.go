// Package seed is the one place random tests and runners take their seed
// from: FP8ATTN_SEED when it is set (to reproduce a failure), otherwise a
// fresh one from the clock. Every caller logs the seed it used.
package seed

import (
	"os"
	"strconv"
	"time"
)

// Env is the environment variable that fixes the seed.
const Env = "FP8ATTN_SEED"

// Get returns FP8ATTN_SEED if it is set to an unsigned integer, otherwise
// a fresh seed from the clock.
func Get() uint64 {
	if s, err := strconv.ParseUint(os.Getenv(Env), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}
