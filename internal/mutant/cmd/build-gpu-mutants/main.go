// Command build-gpu-mutants builds the test binary of each GPU mutant
// (package gpumutants) for scripts/gpu-decode.sh to run on the GPU
// machine, where each must fail its tests:
//
//	eval "$(scripts/cuda-env.sh)"
//	go run ./internal/mutant/cmd/build-gpu-mutants -tags cuda,kerneldev -o bin
//	go run ./internal/mutant/cmd/build-gpu-mutants -check   # each applies; builds nothing
//
// It writes each mutant's binary into the -o directory under
// gpumutants.BinName (broken-stalelens.test, sdpa-broken-nosync.test),
// and beside it the -test.run pattern of the mutant's tests
// (broken-stalelens.run). -only takes a regexp of the mutants' names.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fp8attn/fp8attn/internal/mutant"
	"github.com/fp8attn/fp8attn/internal/mutant/gpumutants"
)

func main() {
	tags := flag.String("tags", "cuda,kerneldev", "build tags of the test binaries")
	dir := flag.String("o", "bin", "directory the binaries go to")
	check := flag.Bool("check", false, "check that each mutant applies, and build nothing")
	only := flag.String("only", "", "a regexp of the names of the mutants to build (all when empty)")
	flag.Parse()
	if err := run(*tags, *dir, *only, *check); err != nil {
		fmt.Fprintln(os.Stderr, "build-gpu-mutants:", err)
		os.Exit(1)
	}
}

func run(tags, dir, only string, check bool) error {
	sel, err := regexp.Compile(only)
	if err != nil {
		return err
	}
	if !check {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, m := range gpumutants.List {
		if !sel.MatchString(m.Name) {
			continue
		}
		if check {
			if err := mutant.Check(m); err != nil {
				return err
			}
			fmt.Printf("%s applies (%s)\n", m.Name, m.File)
			continue
		}
		bin := filepath.Join(dir, gpumutants.BinName(m))
		if err := mutant.Build(m, tags, bin); err != nil {
			return err
		}
		if err := os.WriteFile(strings.TrimSuffix(bin, ".test")+".run", []byte(m.RunPattern()+"\n"), 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %s with %s's variant, must fail %s\n", bin, m.Pkg, m.File, m.RunPattern())
	}
	return nil
}
