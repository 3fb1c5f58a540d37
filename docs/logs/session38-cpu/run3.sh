# Run 3 (session 38): the issue's own measure at both thread counts again
# (THREADS="1 all" ROUNDS=9 scripts/cpu-side-by-side.sh, new only), with vmstat's per-second
# samples beside it (vmstat.txt: its "st" column is time stolen by the hypervisor).
set -u
r=$OUT/run3; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
vmstat -t 1 > $r/vmstat.txt 2>&1 & vm=$!
OUT=$r/sbs THREADS="1 all" ROUNDS=9 scripts/cpu-side-by-side.sh > $r/sbs.log 2>&1; grep -E "MEDIAN|BEST" $r/sbs/summary.txt
kill $vm
awk 'NR>2 {n++; us+=$13; sy+=$14; st+=$17} END {printf "vmstat: %d samples, mean us %.1f sy %.1f st %.1f\n", n, us/n, sy/n, st/n}' $r/vmstat.txt
cd $OUT && tar czf run3.tgz run3 && rm -rf run3/sbs/*.json run3/sbs/*.log
