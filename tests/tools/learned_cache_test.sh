#!/bin/sh
# A learned decision survives a new job through the calibration cache, and an
# entry of another rank count, link class or probe revision is not used.
#
#   learned_cache_test.sh CHORUS_PERF
#
# Job 1 (2 ranks, shm, 64 KiB AllReduces) learns the class and rank 0 stores
# the winner in the cache. The test then rewrites the stored winner to
# another algorithm: job 2 must start decided on that one (its first learn
# line for the class is the drift check of it, and chorus-perf's algo column
# names it). Jobs at 3 ranks, over tcp, and with the entry renamed to another
# probe revision start from nothing (their first learn line is the first rounds).
set -u
perf=$1
dir=$(mktemp -d /tmp/chorus_learned_cache.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
export XDG_CACHE_HOME=$dir
export CHORUS_DEBUG=TUNE CHORUS_TUNER=learn CHORUS_TIMEOUT=120
unset CHORUS_TUNING_FILE CHORUS_ALGO CHORUS_TUNING_CACHE
class='learn allreduce float32 sum 2^16 B user'
job() {  # ranks transport calls
  "$perf" allreduce --ranks "$1" --transport "$2" -b 64K -e 64K -n "$3" -w 0 -c 0 \
    --min-time 0 -d float32 > "$dir/out" 2>&1 || { cat "$dir/out"; echo "FAILED: job $*"; exit 1; }
}
first_learn_line() {
  grep "^\[chorus rank 0\] INFO $class: " "$dir/out" | head -n 1
}
fail() { echo "FAILED: $*"; cat "$dir/out"; exit 1; }

job 2 shm 60
entry=$(ls "$dir"/chorus/*-shm-n2.p*.json 2>/dev/null | head -n 1)
[ -n "$entry" ] || fail "job 1 left no cache entry for shm at 2 ranks"
winner=$(/usr/bin/python3 - "$entry" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
picks = [p for p in t.get("learned", []) if p["collective"] == "allreduce" and p["size_class"] == 16]
print(picks[0]["algorithm"] if picks else "")
EOF
)
[ -n "$winner" ] || fail "job 1 stored no learned pick for 64 KiB AllReduce in $entry"
first_learn_line | grep -q ": rounds 1-2 " || fail "job 1 did not explore first"
echo "job 1 learned $winner"
# chorus-perf --tuning-report shows it.
"$perf" --tuning-report > "$dir/report" 2>&1 || fail "--tuning-report failed: $(cat "$dir/report")"
grep -q "learned picks: [1-9]" "$dir/report" || fail "--tuning-report: $(cat "$dir/report")"
grep -Eq "allreduce +float32 +sum +user +32769-65536 +$winner " "$dir/report" ||
  fail "--tuning-report does not show the pick: $(cat "$dir/report")"

# Another winner, as if an earlier job had learned it.
other=recursive_doubling
[ "$winner" = recursive_doubling ] && other=halving_doubling
/usr/bin/python3 - "$entry" "$other" <<'EOF'
import json, sys
path, other = sys.argv[1], sys.argv[2]
t = json.load(open(path))
for p in t["learned"]:
    if p["collective"] == "allreduce" and p["size_class"] == 16:
        p["algorithm"] = other
json.dump(t, open(path, "w"), indent=2)
EOF

job 2 shm 40
line=$(first_learn_line)
echo "$line" | grep -q ": $other now " || fail "job 2 did not start on the cached $other: '$line'"
grep -v '^#' "$dir/out" | grep -q " $other " || fail "chorus-perf's algo column does not name $other"
echo "job 2 started decided on $other"

job 3 shm 40
first_learn_line | grep -q ": rounds 1-2 " || fail "a job of 3 ranks used the 2-rank entry"
job 2 tcp 40
first_learn_line | grep -q ": rounds 1-2 " || fail "a tcp job used the shm entry"
old=$(echo "$entry" | sed 's/\.p\([0-9]*\)\.json$/.p0.json/')
mv "$entry" "$old"
job 2 shm 40
first_learn_line | grep -q ": rounds 1-2 " || fail "a job used an entry of another probe revision"
echo "PASS"
