#!/bin/sh
# Runs a job whose outcome depends on the AllReduce algorithm the tuner picks,
# with the pick fixed by a tuning file (tests/support/picks/), and checks that
# the pick was the intended one before the job's own verdict.
#
#   picked_test.sh ALGORITHM MARKER command...
#
# The command runs under CHORUS_DEBUG=TUNING; every rank's output must show
# "measured rule -> ALGORITHM" for allreduce and no other allreduce pick, the
# output must hold a line with MARKER, and the command must exit 0.
set -u
algorithm=$1
marker=$2
shift 2
out=$(CHORUS_DEBUG=TUNING "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
ok=1
for r in 0 1; do
  if ! printf '%s\n' "$out" | grep -q "^\[$r\] .*tuning allreduce .*measured rule -> $algorithm\$"; then
    echo "PICK WRONG: rank $r did not pick $algorithm by the tuning file's rule"
    ok=0
  fi
done
if printf '%s\n' "$out" | grep "tuning allreduce " | grep -v -q -- "-> $algorithm\$"; then
  echo "PICK WRONG: an allreduce was given another algorithm than $algorithm"
  ok=0
fi
[ "$ok" -eq 1 ] && echo "PICK OK $algorithm"
if ! printf '%s\n' "$out" | grep -q -- "$marker"; then
  echo "FAILED: no '$marker' in the output (exit status $rc)"
  exit 1
fi
[ "$rc" -eq 0 ] || { echo "FAILED: exit status $rc"; exit 1; }
[ "$ok" -eq 1 ]
