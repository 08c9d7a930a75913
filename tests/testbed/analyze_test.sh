#!/usr/bin/env bash
# bench/testbed/analyze.py turns a testbed run's results into the tables of
# docs/PERFORMANCE.md's "Testbed" section, the seed's closed forms asked of
# chorus-verify (--closed-forms --json). On two result directories it must
# print exactly the committed tables:
#   analyze/n8  8 hosts: switch and ring parts, the seed's figure for every
#               AllReduce but bidir_ring (chorus-sim's prediction instead)
#   analyze/n6  6 hosts: no figure for halving_doubling and
#               recursive_doubling (N not a power of two), log2 6 unrounded
#               in double_binary_tree's and rounded up in reduce_broadcast's
# The times in them are synthetic, shaped like a run's; the tables n8.md and
# n6.md are what analyze.py printed while it kept its own copies of the
# formulas.
#
# Usage: analyze_test.sh CHORUS_VERIFY SOURCE_DIR
set -euo pipefail
verify="$1"
src="$2"
here="$src/tests/testbed/analyze"
failed=0
for case in n8 n6; do
  got=$(CHORUS_VERIFY="$verify" /usr/bin/python3 "$src/bench/testbed/analyze.py" "$here/$case")
  if [ "$got" != "$(cat "$here/$case.md")" ]; then
    echo "analyze.py on $case differs from $case.md:"
    diff <(printf '%s\n' "$got") "$here/$case.md" || true
    failed=1
  else
    echo "ok: $case"
  fi
done
exit $failed
