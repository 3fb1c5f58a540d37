#!/usr/bin/env bash
# Builds the PTX the cuda backend embeds, with its ptxas resource report, on a
# machine with nvcc (go generate ./backend/cuda/kernels runs it). The stages
# are compute_89 PTX: it runs on Ada (sm_89) and, JIT-compiled, on Hopper.
# tiles.h is generated from internal/tiles by Go (go run ./internal/tiles/gen)
# and committed, so this script needs no Go.
# The Hopper module (stage 9, attention_sm90a.cu) is built for sm_90a into a
# cubin and its compute_90a PTX; the script fails if ptxas ignores setmaxnreg
# (warning C7508), and records registers, spills and per kernel how many QGMMA
# (FP8 wgmma) instructions the SASS holds.
# The paged-cache kernels (paged.cu) are compute_89 PTX too, a module of
# their own, and an sm_90a cubin that adds the warp-specialized decode
# kernel (bulk copies), loaded on Hopper.
# The test modules hold the kernels only backend/cuda's tests launch
# (embedded by its _test.go files, never by a production module):
# testkernels.cu as compute_80 PTX (any GPU), testkernels_sm90a.cu as an
# sm_90a cubin.
# Writes attention_compute_89.ptx, paged_compute_89.ptx, their compute_80
# builds (Ampere), attention_sm_90a.cubin,
# attention_compute_90a.ptx, paged_sm_90a.cubin, testkernels_compute_80.ptx,
# testkernels_sm_90a.cubin, resources.txt and source_hash.go.
set -euo pipefail
cd "$(dirname "$0")"
# The builds are independent: they run in parallel, and the script fails if
# any of them does (its log printed).
# (--split-compile: ptxas takes the sm_90a modules' functions on every core, minutes
# instead of most of ten on the Hopper module; each function compiles alone either way.)
hopper_flags="-O3 -std=c++17 --split-compile=0 -gencode=arch=compute_90a,code=sm_90a"
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
pids=()
build() {  # build NAME COMMAND...: in the background, its output in $logs/NAME
  local name=$1; shift
  "$@" > "$logs/$name" 2>&1 &
  pids+=("$!:$name")
}
build attention_89 nvcc -O3 -std=c++17 -ptx -arch=compute_89 -o attention_compute_89.ptx attention.cu
build paged_89 nvcc -O3 -std=c++17 -ptx -arch=compute_89 -o paged_compute_89.ptx paged.cu
# Ampere (sm_80-sm_88): the stages without FP8 mma.sync, and the paged cache.
# The Ampere PTX must assemble for sm_80 (an sm_89 instruction in it fails
# only when an Ampere GPU, or TestAmpereModule, loads it).
build attention_80 sh -c 'nvcc -O3 -std=c++17 -ptx -arch=compute_80 -o attention_compute_80.ptx attention.cu && ptxas -arch=sm_80 -o /dev/null attention_compute_80.ptx'
build paged_80 sh -c 'nvcc -O3 -std=c++17 -ptx -arch=compute_80 -o paged_compute_80.ptx paged.cu && ptxas -arch=sm_80 -o /dev/null paged_compute_80.ptx'
build attention_sm90a nvcc $hopper_flags -cubin -Xptxas -v -o attention_sm_90a.cubin attention_sm90a.cu
build attention_90a nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=compute_90a -ptx -o attention_compute_90a.ptx attention_sm90a.cu
build paged_sm90a nvcc $hopper_flags -cubin -Xptxas -v -o paged_sm_90a.cubin paged.cu
build testkernels_80 sh -c 'nvcc -O3 -std=c++17 -ptx -arch=compute_80 -o testkernels_compute_80.ptx testkernels.cu && ptxas -arch=sm_80 -o /dev/null testkernels_compute_80.ptx'
build testkernels_sm90a nvcc $hopper_flags -cubin -o testkernels_sm_90a.cubin testkernels_sm90a.cu
failed=0
for pn in "${pids[@]}"; do
  wait "${pn%%:*}" || { echo "gen.sh: ${pn#*:} failed:" >&2; cat "$logs/${pn#*:}" >&2; failed=1; }
done
[ $failed = 0 ] || exit 1
cp "$logs/attention_sm90a" sm90a_build.log
cp "$logs/paged_sm90a" paged_sm90a_build.log
grep -i warning sm90a_build.log paged_sm90a_build.log >&2 || true
if grep -q C7508 sm90a_build.log paged_sm90a_build.log; then echo "gen.sh: ptxas ignored setmaxnreg (C7508)" >&2; exit 1; fi
# C7514 is only an info line: ptxas serialized a function's wgmmas (an
# accumulator read where its analysis cannot prove the wgmma done, e.g. a
# wait or an issue under a branch; docs/design/hopper-prefill.md). Stage 9 must
# not have it.
if grep C7514 sm90a_build.log >&2; then echo "gen.sh: ptxas serialized wgmma in attention_sm90a.cu (C7514)" >&2; exit 1; fi
grep C7514 paged_sm90a_build.log >&2 || true
{
  echo "# ptxas resource usage of attention_compute_89.ptx ($(nvcc --version | tail -1))"
  for arch in sm_89 sm_90; do
    echo "## $arch"
    ptxas -v -arch=$arch -o /dev/null attention_compute_89.ptx 2>&1 | grep -E "Compiling entry|Used|spill|stack" | sed 's/^ptxas info    : //'
  done
  for arch in sm_89 sm_90; do
    echo "## $arch paged_compute_89.ptx"
    ptxas -v -arch=$arch -o /dev/null paged_compute_89.ptx 2>&1 | grep -E "Compiling entry|Used|spill|stack" | sed 's/^ptxas info    : //'
  done
  echo "## sm_80 attention_compute_80.ptx (Ampere: stages 1-6) and paged_compute_80.ptx"
  for ptx in attention_compute_80.ptx paged_compute_80.ptx; do
    ptxas -v -arch=sm_80 -o /dev/null $ptx 2>&1 | grep -E "Compiling entry|Used|spill|stack|error" | sed 's/^ptxas info    : //'
  done
  echo "## sm_89 SASS of stage 10 (ptxas for sm_89 from attention_compute_89.ptx): the main loop (scripts/sass_loop.py)"
  ptxas -arch=sm_89 -o sm89.cubin attention_compute_89.ptx
  cuobjdump -sass sm89.cubin > sm89.sass
  python3 ../../../scripts/sass_loop.py 'stage10_d' < sm89.sass
  echo "## sm_89 SASS: tensor-core instructions per kernel (QMMA = FP8 mma.sync)"
  awk '/Function :/ {if (f) printf "%s QMMA=%d HMMA=%d F2FP=%d total=%d\n", f, q, hm, cv, n; f=$3; q=hm=cv=n=0}
    /\/\*[0-9a-f]+\*\/ / {n++} /QMMA/ {q++} /HMMA/ {hm++} /F2FP/ {cv++}
    END {if (f) printf "%s QMMA=%d HMMA=%d F2FP=%d total=%d\n", f, q, hm, cv, n}' sm89.sass | grep -E "stage(7|8|10)"
  echo "## sm_90a (attention_sm_90a.cubin)"
  grep -E "Compiling entry|Used|spill|stack" sm90a_build.log | sed 's/^ptxas info    : //'
  echo "## sm_90a paged_sm_90a.cubin (the paged module on Hopper, with the warp-specialized kernel)"
  grep -E "Compiling entry|Used|spill|stack" paged_sm90a_build.log | sed 's/^ptxas info    : //'
  echo "## sm_90a SASS: tensor-core instructions per kernel (QGMMA = FP8 wgmma)"
  cuobjdump -sass attention_sm_90a.cubin | awk '/Function :/ {if (f) printf "%s QGMMA=%d HGMMA=%d HMMA=%d\n", f, q, hg, hm; f=$3; q=hg=hm=0}
    /QGMMA/ {q++} /HGMMA/ {hg++} /HMMA/ {hm++} END {if (f) printf "%s QGMMA=%d HGMMA=%d HMMA=%d\n", f, q, hg, hm}'
} > resources.txt
rm -f sm90a_build.log paged_sm90a_build.log sm89.cubin sm89.sass
# The hashed sources: every *.cu, *.cuh and *.h here and in the folders
# below but mutants/, by path in byte order, then the fragment and wgmma
# headers (kernels_test.go's sourceFiles follows the rule).
srcs=$(find . -path ./mutants -prune -o -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) -print | sed 's|^\./||' | LC_ALL=C sort)
hash=$(cat $srcs ../../../wmma/include/fp8attn_fragments.h ../../../wmma/include/fp8attn_wgmma.h | sha256sum | cut -c1-64)
cat > source_hash.go <<GO
// Code generated by gen.sh; DO NOT EDIT.

package kernels

// SourceHash is the SHA-256 of the kernel sources (see sourceFiles) when
// attention_compute_89.ptx was built from them.
const SourceHash = "$hash"
GO
