set -u
k=backend/cuda/kernels
cp $k/attention_sm_90a.cubin /tmp/committed.cubin
cp $k/attention_compute_90a.ptx /tmp/committed.ptx
(cd $k && ./gen.sh) > $OUT/gen.log 2>&1 || { tail -20 $OUT/gen.log; exit 1; }
cmp $k/attention_sm_90a.cubin /tmp/committed.cubin && echo "cubin byte-identical"
cmp $k/attention_compute_90a.ptx /tmp/committed.ptx && echo "ptx byte-identical"
git status --short
tar czf $OUT/kernels.tgz -C $k attention_compute_89.ptx attention_sm_90a.cubin attention_compute_90a.ptx paged_compute_89.ptx paged_sm_90a.cubin attention_compute_80.ptx paged_compute_80.ptx resources.txt source_hash.go
