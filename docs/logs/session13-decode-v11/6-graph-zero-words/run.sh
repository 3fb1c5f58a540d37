set -u
out=${OUT:-out}; mkdir -p $out
for z in bin/*.gz; do gunzip -f $z; done; chmod +x bin/*
bin/sdpa-cuda.test -test.run 'Graph|Capture|KVCache|DeviceGPU' -test.v -test.timeout 300s > $out/sdpa-tests.txt 2>&1; echo "new tests rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)' $out/sdpa-tests.txt | head -5
bin/sdpa-broken-zero-one.test -test.run 'Graph' -test.v -test.timeout 200s > $out/broken-zero-one.txt 2>&1; echo "broken rc=$? (must be nonzero)"; grep -E '_test.go:[0-9]+' $out/broken-zero-one.txt | head -3
for r in 1 2; do for v in old cuda; do echo "# round $r $v" >> $out/bench.txt; bin/sdpa-$v.test -test.run '^$' -test.bench 'GraphGPU' -test.benchtime 3000x >> $out/bench.txt 2>&1; done; done
grep -E '^(# round|Benchmark)' $out/bench.txt | sed -E 's/ +/ /g'
cd $out && tar czf logs.tgz *.txt && rm -f *.txt
