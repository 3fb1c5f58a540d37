package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTestingLinked: the runner uses the conformance helpers without
// linking package testing (sdpatest.Run takes its T as a type parameter).
func TestNoTestingLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.HasPrefix(pkg, "golang.org/x/exp") {
			t.Errorf("sdpabench links %s", pkg)
		}
	}
}
