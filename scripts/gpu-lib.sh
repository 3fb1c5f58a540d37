# gpu-lib.sh: what the GPU-machine scripts share (gpu-run.sh, gpu-graphs.sh,
# gpu-decode.sh source it after setting `name`): the output folder, failure
# bookkeeping, unpacking the cross-compiled binaries, and the kernels gen.sh
# builds (one list: what goes into kernels.tgz and what the FP8ATTN_*
# variables point the binaries at).
out=${OUT:-out}
mkdir -p "$out"
status=0

# failed records a failure: the script goes on and exits non-zero.
failed() { echo "$name: FAILED: $*" | tee -a "$out/failures.txt"; status=1; }

# unpack_bins gunzips bin/*.gz and makes the binaries executable.
unpack_bins() {
  local z
  for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done
  chmod +x bin/* 2>/dev/null
  return 0
}

kernels_dir=$PWD/backend/cuda/kernels
kernel_files="attention_compute_89.ptx attention_sm_90a.cubin attention_compute_90a.ptx paged_compute_89.ptx
  paged_sm_90a.cubin attention_compute_80.ptx paged_compute_80.ptx testkernels_compute_80.ptx
  testkernels_sm_90a.cubin resources.txt source_hash.go"

# use_built_kernels points the binaries at the kernels in the source tree
# (instead of the ones embedded when they were compiled). Only binaries built
# with -tags cuda,kerneldev read these variables (go test -c -tags
# cuda,kerneldev -o bin/cuda.test ./backend/cuda; go build -tags
# cuda,kerneldev -o bin/sdpabench ./cmd/sdpabench): a production build
# (-tags cuda) always runs its embedded kernels and ignores them, as it
# ignores FP8ATTN_PDL=0.
use_built_kernels() {
  require_kerneldev
  export FP8ATTN_PTX=$kernels_dir/attention_compute_89.ptx FP8ATTN_CUBIN=$kernels_dir/attention_sm_90a.cubin \
    FP8ATTN_PAGED_PTX=$kernels_dir/paged_compute_89.ptx FP8ATTN_PAGED_CUBIN=$kernels_dir/paged_sm_90a.cubin \
    FP8ATTN_PTX80=$kernels_dir/attention_compute_80.ptx FP8ATTN_PAGED_PTX80=$kernels_dir/paged_compute_80.ptx \
    FP8ATTN_TEST_PTX=$kernels_dir/testkernels_compute_80.ptx FP8ATTN_TEST_CUBIN=$kernels_dir/testkernels_sm_90a.cubin
}

# require_kerneldev fails the run for each Go binary in bin/ built without
# -tags kerneldev (whose symbol table lacks overrides_kerneldev.go): such a
# binary ignores the FP8ATTN_* module variables and FP8ATTN_PDL, so it would
# time and test its embedded kernels in place of the ones built here.
require_kerneldev() {
  local b
  for b in bin/cuda.test bin/sdpa-cuda.test bin/sdpabench; do
    [ -f "$b" ] || continue
    grep -aq overrides_kerneldev.go "$b" ||
      failed "$b was built without -tags kerneldev: it would run its embedded kernels, not these"
  done
  return 0
}

# build_kernels runs gen.sh (its output in gen.log) and packs what it built
# into kernels.tgz; it fails if gen.sh does.
build_kernels() {
  (cd "$kernels_dir" && ./gen.sh) > "$out/gen.log" 2>&1 || return 1
  tar czf "$out/kernels.tgz" -C "$kernels_dir" $kernel_files
}
