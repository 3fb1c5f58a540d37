# Run 2: which cores run fast (the old binary on each core, mission fp32, 1 thread), then the
# A/B of run 1 pinned to one core, then the 16-thread A/B over more rounds.
set -u
cd bin
b() { # label env binary threads cpuset benchregex
  env $2 GOMAXPROCS=$4 taskset -c $5 ./$3 -test.run XXX -test.bench "$6" -test.benchtime 0.5s | grep GFLOP | awk -v n="$1" '{print n, $1, $5}'
}
for pass in 1 2; do for c in $(seq 0 15); do b "p$pass core$c" X=1 cpu-old.test 1 $c 'CPU/mission/fp32/avx512$'; done; done
for pass in 1 2; do for c in 0 5 10 15; do b "kern p$pass core$c" X=1 cpu-old.test 1 $c 'Kernels/(pv4|scores4|scoresSoftmax4)/avx512$|PeakFMA/avx512$'; done; done
for r in 1 2 3 4 5 6; do
  if [ $((r%2)) = 1 ]; then order="old new nopipe"; else order="nopipe new old"; fi
  for v in $order; do
    case $v in old) b "r$r pin old" X=1 cpu-old.test 1 3 'CPU/(mission|long)/fp(32|8)/avx512$';;
      new) b "r$r pin new" X=1 cpu-new.test 1 3 'CPU/(mission|long)/fp(32|8)/avx512$';;
      nopipe) b "r$r pin nopipe" FP8ATTN_CPU_NOPIPE=1 cpu-new.test 1 3 'CPU/(mission|long)/fp(32|8)/avx512$';; esac
  done
done
for r in 1 2 3 4 5 6; do
  if [ $((r%2)) = 1 ]; then order="old new nopipe"; else order="nopipe new old"; fi
  for v in $order; do
    case $v in old) b "r$r t16 old" X=1 cpu-old.test 16 0-15 'CPU/(mission|long)/fp(32|8)/avx512$';;
      new) b "r$r t16 new" X=1 cpu-new.test 16 0-15 'CPU/(mission|long)/fp(32|8)/avx512$';;
      nopipe) b "r$r t16 nopipe" FP8ATTN_CPU_NOPIPE=1 cpu-new.test 16 0-15 'CPU/(mission|long)/fp(32|8)/avx512$';; esac
  done
done
