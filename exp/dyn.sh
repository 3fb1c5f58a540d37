set -u
out=${OUT:-out}; mkdir -p $out
for z in bin/*.gz; do gunzip -f $z; done; chmod +x bin/*
K=backend/cuda/kernels
F="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
(cd $K && nvcc $F -cubin -o /tmp/static.cubin paged.cu) &
(cd $K && nvcc $F -DFP8ATTN_PAGED_WS_DYNAMIC=1 -cubin -Xptxas -v -o /tmp/dynamic.cubin paged.cu 2>&1 | grep -A2 "ws_d128" | tail -1) &
wait
for v in dynamic static; do
  FP8ATTN_PAGED_CUBIN=/tmp/$v.cubin timeout 200 bin/cuda.test -test.run 'PagedConformance|PagedAgainstCPU|PagedConcurrent' -test.timeout 190s > $out/test-$v.txt 2>&1; echo "$v tests rc=$? $(tail -1 $out/test-$v.txt)"
done
for r in 1 2; do for v in static dynamic; do
  FP8ATTN_PAGED_CUBIN=/tmp/$v.cubin timeout 200 bin/cuda.test -test.run '^$' -test.bench 'PagedDecodeWSSplits' -test.benchtime 200x > $out/bench-$v-$r.txt 2>&1
  grep -E "^Benchmark" $out/bench-$v-$r.txt | sed 's/  */ /g; s/BenchmarkPagedDecodeWSSplits.//' | awk -v n="$v r$r" '{print n, $1, $4}'
done; done
(cd $out && tar czf logs.tgz *.txt && rm -f *.txt)
