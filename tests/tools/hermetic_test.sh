#!/bin/sh
# The suite leaves the user's calibration cache alone: with a fake user cache
# ($XDG_CACHE_HOME/chorus and $HOME/.cache/chorus, both holding entries), a
# few representative tests run through ctest in the build tree, so that their
# real test properties (cmake/ChorusTestCache.cmake) apply, must leave both
# byte for byte as they were, and their calibrations must land in the build
# tree's test cache instead.
#
#   hermetic_test.sh CTEST BUILD_DIR TEST_CACHE_HOME REGEX
#
# REGEX selects the tests (a multi-process shm test, a Python test, a tool);
# at least one of them calibrates over shm (so writes a cache entry).
set -u
ctest=$1
build=$2
test_cache=$3
regex=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

user_xdg=$tmp/usercache
user_home=$tmp/home
mkdir -p "$user_xdg/chorus" "$user_home/.cache/chorus"
host=$(hostname)
# Entries named as this host's would be (tune/calibration_cache.h), and junk.
for d in "$user_xdg/chorus" "$user_home/.cache/chorus"; do
  for n in 2 3 4; do
    printf '{"format": "chorus-tuning", "version": 2, "links": {"shm": {"alpha_s": 1, "beta_Bps": 1}}}\n' \
      >"$d/$host-shm-n$n.p4.json"
    cp "$d/$host-shm-n$n.p4.json" "$d/$host-shm-n$n.p5.json"
  done
  printf 'not a calibration\n' >"$d/notes.txt"
done

# listing DIR: every path under DIR with its type, and each file's checksum.
listing() {
  (cd "$1" && find . -printf '%y %p %s\n' | sort && find . -type f -exec sha256sum {} + | sort)
}
listing "$user_xdg" >"$tmp/xdg.before"
listing "$user_home" >"$tmp/home.before"

status=0
XDG_CACHE_HOME=$user_xdg HOME=$user_home "$ctest" --test-dir "$build" -R "$regex" \
  --output-on-failure >"$tmp/ctest.out" 2>&1 || status=$?
sed 's/^/    /' "$tmp/ctest.out"
# Every test the regex names ran (the fixture's wipe aside): one per '|' + 1.
expected=$(($(printf '%s' "$regex" | tr -cd '|' | wc -c) + 1))
ran=$(grep -E "Test +#[0-9]+: " "$tmp/ctest.out" | grep -vc "test_cache.wipe")
if [ "$ran" -lt "$expected" ]; then
  echo "FAIL: ctest -R '$regex' ran $ran tests, expected $expected"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "FAIL: the nested tests failed (ctest exit status $status)"
  exit 1
fi

listing "$user_xdg" >"$tmp/xdg.after"
listing "$user_home" >"$tmp/home.after"
ok=1
if ! diff -u "$tmp/xdg.before" "$tmp/xdg.after"; then
  echo "FAIL: \$XDG_CACHE_HOME/chorus changed"
  ok=0
fi
if ! diff -u "$tmp/home.before" "$tmp/home.after"; then
  echo "FAIL: \$HOME/.cache changed"
  ok=0
fi
# The calibrations went somewhere: the build tree's test cache.
if ! ls "$test_cache"/chorus/*-shm-n*.json >/dev/null 2>&1; then
  echo "FAIL: no shm calibration in the test cache $test_cache/chorus:"
  ls -la "$test_cache" "$test_cache/chorus" 2>&1
  ok=0
fi
[ "$ok" -eq 1 ] || exit 1
echo "HERMETIC OK: $ran tests; the user's caches are unchanged; the test cache holds:"
ls "$test_cache/chorus"
