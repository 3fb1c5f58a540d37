package fp8

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The tables in testdata/fp8 were made on an NVIDIA H200 by
// testdata/fp8/gen.sh: CUDA 13.0's cuda_fp8.h on the device and on the host,
// and PyTorch 2.11's casts on the GPU (a CPU sample agreed).

type run struct {
	start uint32
	code  uint8
}

func readRLE(t *testing.T, name string) []run {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "fp8", name))
	if err != nil {
		t.Fatal(err)
	}
	var runs []run
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r run
		if _, err := fmt.Sscanf(sc.Text(), "%x %x", &r.start, &r.code); err != nil {
			t.Fatalf("%s: %q: %v", name, sc.Text(), err)
		}
		if len(runs) > 0 && r.start <= runs[len(runs)-1].start {
			t.Fatalf("%s: runs out of order at %08x", name, r.start)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 || runs[0].start != 0 {
		t.Fatalf("%s: does not start at input 0", name)
	}
	return runs
}

// runEnd returns the last input of run i.
func runEnd(runs []run, i int) uint32 {
	if i+1 < len(runs) {
		return runs[i+1].start - 1
	}
	return math.MaxUint32
}

// gpuTable is a table made on the GPU and the conversion it holds: format
// 0 for E4M3, 1 for E5M2, in mode.
type gpuTable struct {
	file   string
	format int
	mode   Mode
}

var gpuTables = []gpuTable{
	{"cuda_device_e4m3_satfinite.rle", 0, SatFinite},
	{"cuda_device_e4m3_nosat.rle", 0, NoSat},
	{"cuda_device_e5m2_satfinite.rle", 1, SatFinite},
	{"cuda_device_e5m2_nosat.rle", 1, NoSat},
	{"torch_e4m3.rle", 0, Torch},
	{"torch_e5m2.rle", 1, Torch},
}

// convert is the conversion tb holds.
func (tb gpuTable) convert(x float32) uint8 {
	if tb.format == 0 {
		return uint8(ToE4M3(x, tb.mode))
	}
	return uint8(ToE5M2(x, tb.mode))
}

// TestGPUTables holds each run of the tables made on the GPU at its two
// ends and its middle. TestConvertExhaustive holds every input to them.
func TestGPUTables(t *testing.T) {
	for _, tb := range gpuTables {
		t.Run(tb.file, func(t *testing.T) {
			runs := readRLE(t, tb.file)
			for i, r := range runs {
				end := runEnd(runs, i)
				for _, u := range []uint32{r.start, r.start + (end-r.start)/2, end} {
					if got := tb.convert(math.Float32frombits(u)); got != r.code {
						t.Fatalf("input %08x: got %02x, GPU gave %02x", u, got, r.code)
					}
				}
			}
		})
	}
}

// TestCUDAHostMatchesDevice: cuda_fp8.h's software path (host) gave the same
// tables as the device's hardware conversions.
func TestCUDAHostMatchesDevice(t *testing.T) {
	for _, k := range []string{"e4m3_satfinite", "e4m3_nosat", "e5m2_satfinite", "e5m2_nosat"} {
		d, _ := os.ReadFile(filepath.Join("..", "testdata", "fp8", "cuda_device_"+k+".rle"))
		h, _ := os.ReadFile(filepath.Join("..", "testdata", "fp8", "cuda_host_"+k+".rle"))
		if len(d) == 0 || !bytes.Equal(d, h) {
			t.Errorf("%s: host and device tables differ or are missing", k)
		}
	}
}

func TestGPUDecodeTables(t *testing.T) {
	for _, c := range []struct {
		file string
		dec  func(uint8) float32
	}{
		{"cuda_decode_e4m3.txt", func(c uint8) float32 { return E4M3(c).Float32() }},
		{"cuda_decode_e5m2.txt", func(c uint8) float32 { return E5M2(c).Float32() }},
		{"torch_decode_e4m3.txt", func(c uint8) float32 { return E4M3(c).Float32() }},
		{"torch_decode_e5m2.txt", func(c uint8) float32 { return E5M2(c).Float32() }},
	} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "fp8", c.file))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		n := 0
		for ; sc.Scan(); n++ {
			var code uint8
			var bits uint32
			if _, err := fmt.Sscanf(sc.Text(), "%x %x", &code, &bits); err != nil {
				t.Fatal(err)
			}
			want := math.Float32frombits(bits)
			got := c.dec(code)
			if want != want {
				if got == got {
					t.Errorf("%s: code %02x: got %g, want NaN", c.file, code, got)
				}
				continue
			}
			if math.Float32bits(got) != bits {
				t.Errorf("%s: code %02x: got %g, want %g", c.file, code, got, want)
			}
		}
		if n != 256 {
			t.Errorf("%s: %d entries", c.file, n)
		}
	}
}
