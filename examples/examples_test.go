// Package examples holds runnable programs; this test builds and runs each.
package examples

import (
	"os/exec"
	"testing"
)

func TestExamplesRun(t *testing.T) {
	for _, ex := range []string{"./basic", "./kvcache"} {
		out, err := exec.Command("go", "run", ex).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", ex, err, out)
		}
		t.Logf("%s:\n%s", ex, out)
	}
}
