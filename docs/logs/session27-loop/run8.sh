#!/usr/bin/env bash
# Session 27, run 8 (review): gen.sh after next_part/later_parts replaced three copies of the
# column-part step in hopper.cuh; every cubin and PTX must equal the committed one byte for byte
# (OUT/kernels.tgz for source_hash.go). Then the stamps build runs TestStage9LoopTimeline at D 128
# with the softmax overlap printed block by block.
set -u
export OUT; name=run8; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r8; mkdir -p $w
for f in attention_sm_90a.cubin attention_compute_90a.ptx attention_compute_89.ptx attention_compute_80.ptx paged_sm_90a.cubin; do cp $k/$f $w/; done
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -DFP8ATTN_S9_LOOP_STAMPS=1 -o $w/st.cubin attention_sm90a.cu > $w/build-st.log 2>&1) &
build_kernels || { tail -20 $OUT/gen.log; exit 1; }
wait
for f in attention_sm_90a.cubin attention_compute_90a.ptx attention_compute_89.ptx attention_compute_80.ptx paged_sm_90a.cubin; do
  cmp $k/$f $w/$f && echo "$f: byte-identical to the committed one"
done
FP8ATTN_S9_LOOP_STAMPS=1 FP8ATTN_LOOP_SHAPE=4x32x4096x4096x128 FP8ATTN_CUBIN=$w/st.cubin timeout 120 bin/cuda.test -test.run 'TestStage9LoopTimeline' -test.v > $w/timeline-d128.txt 2>&1
grep -E "µs a call|warpgroup|softmaxes|producer" $w/timeline-d128.txt | sed 's/^ *//'
rm -f $w/*.cubin $w/*.ptx
tar czf $OUT/run8.tgz -C $w .
