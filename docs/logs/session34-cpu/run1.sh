set -u
which perf || echo "no perf"
lscpu | grep -E "Model name|MHz|L1d|L2"
cd bin
run() { # name env binary
  local n=$1 e=$2 b=$3 thr=$4
  env $e GOMAXPROCS=$thr ./$b -test.run XXX -test.bench 'CPU/(mission|long)/fp(32|8)/avx512$' -test.benchtime 1s | grep GFLOP | awk -v n=$n -v r=$r -v t=$thr '{print "r" r, "t" t, n, $1, $5}'
}
for r in 1 2 3 4 5 6; do
  if [ $((r%2)) = 1 ]; then order="old new nopipe"; else order="nopipe new old"; fi
  for v in $order; do
    case $v in old) run old X=1 cpu-old.test 1;; new) run new X=1 cpu-new.test 1;; nopipe) run nopipe FP8ATTN_CPU_NOPIPE=1 cpu-new.test 1;; esac
  done
done
for r in 1 2 3; do
  run bq32 FP8ATTN_CPU_BQ=32 cpu-new.test 1; run bq16 FP8ATTN_CPU_BQ=16 cpu-new.test 1; run new X=1 cpu-new.test 1
done
for r in 1 2 3; do run old X=1 cpu-old.test 16; run new X=1 cpu-new.test 16; done
cd ..
THREADS=1 ROUNDS=5 OUT=$OUT/sbs bash scripts/cpu-side-by-side.sh
