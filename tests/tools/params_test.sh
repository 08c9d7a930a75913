#!/bin/sh
# chorus-run --params lists every setting of the environment reader (the
# rows of --params --markdown), with the value in effect and its source, and
# a malformed value is an error naming the variable.
#
#   params_test.sh CHORUS_RUN
set -u
run=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

env -u CHORUS_TIMEOUT -u CHORUS_TRANSPORT CHORUS_SPIN_US=7 CHORUS_STORE_SECRET=hush \
  "$run" --params >"$tmp/params" 2>&1 || fail "chorus-run --params exited non-zero: $(cat "$tmp/params")"
"$run" --params --markdown >"$tmp/md" || fail "chorus-run --params --markdown exited non-zero"

# Every setting of the table, one line each in --params.
names=$(sed -n 's/^| `\(CHORUS_[A-Z_]*\)` |.*/\1/p' "$tmp/md")
[ -n "$names" ] || fail "--params --markdown lists no setting"
count=0
for name in $names; do
  count=$((count + 1))
  [ "$(grep -c "^$name " "$tmp/params")" -eq 1 ] || fail "--params does not list $name once"
done
[ "$(grep -c '^CHORUS_' "$tmp/params")" -eq "$count" ] ||
  fail "--params lists $(grep -c '^CHORUS_' "$tmp/params") settings, the table $count"
# Bootstrap and tuner settings are among them.
for name in CHORUS_RANK CHORUS_STORE CHORUS_JOIN_GENERATION CHORUS_TIMEOUT CHORUS_TUNER; do
  grep -q "^$name " "$tmp/params" || fail "$name is missing"
done

# Value in effect and source.
grep -Eq '^CHORUS_SPIN_US +7 +environment +50 ' "$tmp/params" ||
  fail "CHORUS_SPIN_US=7 is not shown as 7 from the environment: $(grep CHORUS_SPIN_US "$tmp/params")"
grep -Eq '^CHORUS_TIMEOUT +300 +default +300 ' "$tmp/params" ||
  fail "CHORUS_TIMEOUT is not its default: $(grep CHORUS_TIMEOUT "$tmp/params")"
grep -Eq '^CHORUS_STORE_SECRET +\(set\) +environment ' "$tmp/params" ||
  fail "CHORUS_STORE_SECRET is not shown as (set)"
if grep -q hush "$tmp/params"; then fail "--params prints the store secret"; fi

# A malformed value: an error that names it, and a non-zero exit.
if CHORUS_TIMEOUT=soon "$run" --params >"$tmp/bad" 2>&1; then fail "CHORUS_TIMEOUT=soon exits 0"; fi
grep -q "CHORUS_TIMEOUT" "$tmp/bad" || fail "the error does not name CHORUS_TIMEOUT: $(cat "$tmp/bad")"
echo "ok: --params lists $count settings"
