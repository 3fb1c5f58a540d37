# Run 1 (session 38): twelve rounds of old (1c6907e), new (the prefetches of the next panel's and
# the next block's first inputs) and PyTorch at 1 thread, the order rotated round by round
# (scripts/cpu-ab-torch.sh; run 1 ran the same commands inline); then the issue's own measure
# (THREADS=1 ROUNDS=9 scripts/cpu-side-by-side.sh, new only); then the whole backend suite on the
# Xeon (AMX set included) with the new tree's test binary.
set -u
r=$OUT/run1; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
OUT=$r scripts/cpu-ab-torch.sh | grep -E "MEDIAN|BEST"
OUT=$r/sbs THREADS=1 ROUNDS=9 scripts/cpu-side-by-side.sh > $r/sbs.log 2>&1; grep -E "MEDIAN|BEST" $r/sbs/summary.txt
(cd backend/cpu && timeout 120 ../../bin/cpu-new.test -test.count=1 > $r/suite.txt 2>&1; echo "suite rc $?"; tail -3 $r/suite.txt)
cd $OUT && tar czf run1.tgz run1 && rm -rf run1/*.json run1/*.log run1/sbs/*.json run1/sbs/*.log
