#!/bin/sh
# A bad value of every CHORUS_* variable (src/core/config.cc) ends chorus-run
# and every rank with an error that names the variable: a non-zero exit, the
# name in the output, never "terminate called".
#
#   bad_env_test.sh CHORUS_RUN MP_CHECK
#
# Each case runs twice where it can:
#   launcher  the variable is in chorus-run's own environment (chorus-run
#             checks the settings before it starts a rank, or passes the
#             value on to the ranks, which must fail);
#   ranks     the variable is set in the ranks' environment only (env(1)
#             between chorus-run and the program), so every rank meets it
#             itself: each rank's output ([0] and [1]) must name it.
# CHORUS_RANK, CHORUS_WORLD_SIZE and CHORUS_STORE are set by chorus-run for
# every rank, so they are tried in the ranks' environment only.
#
# Not tried, because no value is invalid:
#   CHORUS_HOST_ID   any string is a host identity (equal strings share memory).
set -u
run=$1
mp_check=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/file"
failures=0
cases=0

# check NAME MODE OUTPUT_FILE RC: the verdict of one run.
check() {
  name=$1 mode=$2 out=$3 rc=$4
  cases=$((cases + 1))
  problem=""
  if [ "$rc" -eq 0 ]; then
    problem="exit status 0"
  elif grep -q "terminate called" "$out"; then
    problem="terminate called"
  elif ! grep -q "$name" "$out"; then
    problem="the output does not name $name"
  elif [ "$mode" = ranks ]; then
    for r in 0 1; do
      grep -q "^\[$r\] .*$name" "$out" || problem="rank $r's output does not name $name"
    done
  elif [ "$mode" = launcher ] && grep -q "^chorus-run: error:" "$out" &&
       ! grep -q "^chorus-run: error: .*$name" "$out"; then
    problem="chorus-run's error does not name $name"
  fi
  if [ -n "$problem" ]; then
    failures=$((failures + 1))
    echo "FAIL $name ($mode): $problem (rc $rc); output:"
    sed 's/^/    /' "$out"
  else
    echo "ok   $name ($mode): rc $rc: $(grep -m1 "$name" "$out")"
  fi
}

# one MODE NAME VALUE [chorus-run options...]
one() {
  mode=$1 name=$2 value=$3
  shift 3
  out="$tmp/out"
  if [ "$mode" = launcher ]; then
    env "$name=$value" timeout 60 "$run" -n 2 --grace 5 "$@" -- "$mp_check" allreduce >"$out" 2>&1
  else
    timeout 60 "$run" -n 2 --grace 5 "$@" -- env "$name=$value" "$mp_check" allreduce >"$out" 2>&1
  fi
  check "$name" "$mode" "$out" $?
}

both() {
  one launcher "$@"
  one ranks "$@"
}

both CHORUS_ALGO nosuchalgorithm
both CHORUS_ALGO "nosuchcollective=ring"
both CHORUS_BIND bogus
both CHORUS_DEBUG LOUD
both CHORUS_DETERMINISTIC yes
both CHORUS_SEGMENT 1.5
both CHORUS_STREAM_BYTES lots
both CHORUS_SPIN_US soon
both CHORUS_TIMEOUT 0
both CHORUS_TRANSPORT carrier-pigeon
both CHORUS_TCP_STREAMS 0
both CHORUS_TUNING_CACHE maybe
both CHORUS_TUNER fastest
both CHORUS_TUNING_FILE "$tmp/no-such-tuning.json"
both CHORUS_TRACE "$tmp/file/trace"
both CHORUS_FLIGHT_RECORDER "$tmp/file/flight"
both CHORUS_STORE_SECRET ""
both CHORUS_METRICS ":http"
both CHORUS_METRICS "$tmp/file/metrics.prom"  # its directory is a file
both CHORUS_METRICS_INTERVAL 0
both CHORUS_STRAGGLERS yes
both CHORUS_TCP_ADDR 192.0.2.1 --transport tcp  # TEST-NET-1: no address of this host
one ranks CHORUS_RANK one
one ranks CHORUS_WORLD_SIZE 0
one ranks CHORUS_STORE "carrier://pigeon"

echo "$cases cases, $failures failed"
[ "$failures" -eq 0 ]
