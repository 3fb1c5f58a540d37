# Run 3 (session 37): the issue's own measure on another fresh machine, both thread counts
# (THREADS="1 all" ROUNDS=9 scripts/cpu-side-by-side.sh, bin/sdpabench of 6a2bbe5; round 1 validates
# against the oracle).
set -u
r=$OUT/run3; mkdir -p $r
THREADS="1 all" ROUNDS=9 OUT=$r/sbs bash scripts/cpu-side-by-side.sh 2>&1 | grep -E 'Model|MEDIAN|BEST|FAIL'
cp $r/sbs/summary.txt $r/sbs-summary.txt
cd $OUT && tar czf run3.tgz run3 && rm -rf run3/sbs
