# Run 3: issue #11's 1-thread side-by-side at HEAD (02bae52's CPU code), 15 rounds; bin/sdpabench
# built from HEAD on the workplace machine.
set -u
THREADS=1 ROUNDS=15 OUT=$OUT/sbs bash scripts/cpu-side-by-side.sh
