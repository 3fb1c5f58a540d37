# Run 15 (session 40): FP32 on the amxfp8 set (which runs FP32 on the avx512 kernels) against avx512,
# BenchmarkCPU mission and long, 1 thread, the two sets alternated in separate processes, three rounds.
set -u
r=$OUT/run15; mkdir -p $r
cd backend/cpu
for i in 1 2 3; do for s in avx512 amxfp8; do
  GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench "CPU/(mission|long)/fp32/$s\$" | grep ^Bench | sed "s/^/r$i /" >> $r/fp32.txt
done; done
awk '{print $1, $2, $(NF-5)}' $r/fp32.txt
