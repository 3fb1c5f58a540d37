# Run 2 (session 38), on a fresh machine: the issue's own measure at both thread counts
# (THREADS="1 all" ROUNDS=9 scripts/cpu-side-by-side.sh, new only), then run 1's twelve rotated
# rounds of old (1c6907e), new and PyTorch at 1 thread (scripts/cpu-ab-torch.sh).
set -u
r=$OUT/run2; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
OUT=$r/sbs THREADS="1 all" ROUNDS=9 scripts/cpu-side-by-side.sh > $r/sbs.log 2>&1; grep -E "MEDIAN|BEST" $r/sbs/summary.txt
OUT=$r scripts/cpu-ab-torch.sh | grep -E "MEDIAN|BEST"
cd $OUT && tar czf run2.tgz run2 && rm -rf run2/*.json run2/*.log run2/sbs/*.json run2/sbs/*.log
