// Command gen writes the kernels' geometry header from package tiles:
//
//	go run ./internal/tiles/gen          # writes backend/cuda/kernels/tiles.h
//	go run ./internal/tiles/gen -check   # fails if the header is stale
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/fp8attn/fp8attn/internal/tiles"
)

func main() {
	out := flag.String("o", "backend/cuda/kernels/tiles.h", "header to write or check")
	check := flag.Bool("check", false, "fail if the header differs from what would be generated")
	flag.Parse()
	want := []byte(tiles.Header())
	if *check {
		got, err := os.ReadFile(*out)
		if err != nil || !bytes.Equal(got, want) {
			fmt.Fprintf(os.Stderr, "%s is stale: run go run ./internal/tiles/gen (then rebuild the PTX)\n", *out)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(*out, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
