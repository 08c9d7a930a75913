#!/usr/bin/env bash
# Tests on a virtual cluster (scripts/testbed): each case makes its own
# testbed under a name no other run uses, removes it on exit whatever
# happened (trap), and prints what it checked. ctest runs each case as
# testbed.<case> (label testbed).
#
#   testbed_test.sh CASE TESTBED TB_CHECK
#
# CASE is one of:
#   lifecycle        up/show/exec/kill-host/partition/heal/down on small
#                    testbeds: hostnames, private /dev/shm, qdiscs on both
#                    ends of every link, routes, clear errors on bad input,
#                    nothing left behind
#   grid_switch_4x1  the collective grid (tb_check grid) on 4 hosts x 1 rank,
#                    switch, 1gbit: every rank picks tcp
#   grid_switch_2x2  the same on 2 hosts x 2 ranks: shm within a host, tcp
#                    across (the composite transport); the hierarchical
#                    algorithms (hier_*) among them
#   split_2x2        2 hosts x 2 ranks: split_by_host gives each rank the two
#                    ranks of its host, over shm, and every split check
#                    (tb_check split) passes over the composite transport
#   grid_ring_4x1    the same on a 4-host ring, 1gbit; the hosts in the
#                    middle of two-hop routes forward datagrams, the others
#                    none
#   shrink_4x1       4 hosts x 1 rank: rank 0, which serves the store, kills
#                    itself; the 3 survivors shrink across the hosts and
#                    reduce exactly on the new communicator
#   tcp_bytes        2 hosts x 2 ranks: an 8 MiB AllReduce moves at least
#                    8 MiB each way through each host's veth
#   host_death       kill-host 2 mid-AllReduce (16 MiB): every survivor raises
#                    peer_failure naming rank 2 within 1 s; the job fails
#   partition        partition 1 mid-AllReduce with CHORUS_TIMEOUT=5 (s): every
#                    rank raises an error naming the ranks it cannot reach
#                    within CHORUS_TIMEOUT (plus the stall report's time);
#                    after heal 1 a fresh init_from_env() works; the job ends
#                    by itself with status 0
#   stragglers_4x1   4 hosts x 1 rank: rank 2 sleeps 20 ms before each of 20
#                    AllReduces; every rank's stragglers() names it (last in
#                    at least 18, late by at least 10 ms on rank 0's clock)
#
# Exit status: 0 pass, 1 fail, 77 skipped (not root: no namespaces).
set -uo pipefail

case_name=${1:?usage: testbed_test.sh CASE TESTBED TB_CHECK}
testbed=${2:?testbed script}
tb_check=${3:?tb_check program}

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP testbed.$case_name: making network namespaces needs root (running as uid $(id -u))"
  exit 77
fi

# Unique per run: this shell's pid and the case.
name="t$$-${case_name//_/}"
name=${name:0:32}

# A run killed before its trap ran (ctest's timeout sends SIGKILL) leaves its
# testbed behind: remove those whose driver is gone.
for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E '^t[0-9]+-[a-z0-9]+-h0$'); do
  stale=${ns%-*}
  pid=${stale%%-*}
  pid=${pid#t}
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "removing testbed $stale, left by a run that is gone (pid $pid)"
    "$testbed" down --name "$stale" >/dev/null
  fi
done
work=$(mktemp -d /tmp/chorus-testbed-test.XXXXXX)
cleanup() {
  "$testbed" down --name "$name" >/dev/null || echo "cleanup: testbed down --name $name failed"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The log of the job under test, shown when a check fails before it was.
job_log=""
die() {
  if [ -n "$job_log" ] && [ -s "$job_log" ]; then
    echo "--- the job's output so far ($job_log):"
    cat "$job_log"
    echo "---"
  fi
  echo "FAIL testbed.$case_name: $*"
  exit 1
}

# expect_count PATTERN N FILE: FILE has exactly N lines matching PATTERN.
expect_count() {
  local got
  got=$(grep -c -E -- "$1" "$3")
  [ "$got" -eq "$2" ] || die "expected $2 lines matching '$1', found $got"
  echo "ok: $2 lines match '$1'"
}

# wait_files N PREFIX: waits (60 s at most) for PREFIX0 .. PREFIX<N-1>.
wait_files() {
  local n=$1 prefix=$2 i deadline=$((SECONDS + 60))
  for ((i = 0; i < n; i++)); do
    while [ ! -e "$prefix$i" ]; do
      [ $SECONDS -lt $deadline ] || die "no $prefix$i within 60 s"
      sleep 0.02
    done
  done
}

# fault_time OUTPUT: the time kill-host or partition says the fault began.
fault_time() {
  local t=${1##* at }
  [[ $t =~ ^[0-9]+\.[0-9]+$ ]] || return 1
  echo "$t"
}

# in_host I COMMAND...: runs a command inside host I of this testbed.
in_host() {
  local i=$1
  shift
  "$testbed" exec --name "$name" "$i" -- "$@"
}

# snmp_ip I FIELD: host I's counter from the Ip: lines of /proc/net/snmp.
snmp_ip() {
  in_host "$1" awk -v f="$2" '/^Ip:/ { if (!n++) { for (i = 1; i <= NF; i++) if ($i == f) c = i } else print $c }' /proc/net/snmp
}

# iface_bytes I DEV DIR: tx or rx bytes of DEV in host I.
iface_bytes() {
  in_host "$1" cat "/sys/class/net/$2/statistics/$3_bytes"
}

# expect_error SUBSTRING COMMAND...: the command fails and says SUBSTRING.
expect_error() {
  local want=$1 out
  shift
  if out=$("$@" 2>&1); then die "'$*' succeeded; expected an error saying '$want'"; fi
  [[ $out == *"$want"* ]] || die "'$*' said '$out'; expected '$want'"
  echo "ok: '$*' fails: $out"
}

# run_grid HOSTS RANKS_PER_HOST TOPOLOGY TRANSPORT_LINE
run_grid() {
  local hosts=$1 per_host=$2 topology=$3 transport=$4 log=$work/grid.log
  "$testbed" up --name "$name" --hosts "$hosts" --rate 1gbit --topology "$topology" ||
    die "testbed up failed"
  CHORUS_DEBUG=INFO "$testbed" run --name "$name" --ranks-per-host "$per_host" --timeout 900 \
    -- "$tb_check" grid >"$log" 2>&1
  local status=$?
  grep -E "grid:|MISMATCH|testbed:|tb_check" "$log"
  [ $status -eq 0 ] || die "the job exited with status $status"
  local ranks=$((hosts * per_host))
  expect_count "GRID OK rank" "$ranks" "$log"
  expect_count "transport $transport" "$ranks" "$log"
  # Several hosts with several ranks: the hierarchical algorithms ran too.
  if [ "$hosts" -gt 1 ] && [ "$per_host" -gt 1 ]; then
    expect_count "\(5 hierarchical\)" "$ranks" "$log"
  fi
}

case_lifecycle() {
  expect_error "at least 3 hosts" "$testbed" up --name "$name" --hosts 2 --topology ring
  expect_error "--hosts 0" "$testbed" up --name "$name" --hosts 0
  expect_error "--rate '12 parsecs'" "$testbed" up --name "$name" --hosts 2 --rate "12 parsecs"
  expect_error "no testbed named '$name'" "$testbed" run --name "$name" -- true
  expect_error "testbed name" "$testbed" up --name "no/slash" --hosts 2
  [ -z "$(ip netns list | grep -E "^$name-")" ] || die "a failed up left namespaces behind"

  "$testbed" up --name "$name" --hosts 3 --topology ring --rate 100mbit || die "up (ring) failed"
  "$testbed" show --name "$name"
  local i dev
  for i in 0 1 2; do
    [ "$(in_host $i hostname)" = "$name-h$i" ] || die "host $i is not called $name-h$i"
    for dev in east west; do
      tc -n "$name-h$i" class show dev "$dev" | grep -q "rate 100Mbit ceil 100Mbit" ||
        die "host $i $dev: no 100mbit htb class"
    done
  done
  echo "ok: hostnames $name-h0..2; htb at 100Mbit on both ends of every link"
  # Routes along the shorter way round: on 3 hosts every other host is a neighbour.
  ip -n "$name-h0" route get 198.18.0.2 | grep -q "dev east" || die "h0 -> h1 not via east"
  ip -n "$name-h0" route get 198.18.0.3 | grep -q "dev west" || die "h0 -> h2 not via west"
  echo "ok: h0 reaches h1 through east and h2 through west"
  # /dev/shm is private to each host.
  in_host 0 sh -c "echo x > /dev/shm/$name-probe"
  in_host 0 test -e "/dev/shm/$name-probe" || die "host 0 lost its own /dev/shm file"
  if in_host 1 test -e "/dev/shm/$name-probe"; then die "host 1 sees host 0's /dev/shm"; fi
  [ ! -e "/dev/shm/$name-probe" ] || die "the root namespace sees host 0's /dev/shm"
  echo "ok: /dev/shm is private to each host"
  expect_error "hosts 0 to 2" "$testbed" kill-host --name "$name" 3

  # rsh, the launch agent: by address, from the root namespaces and from
  # inside another host (as mpirun on host 0 calls it).
  [ "$("$testbed" rsh --name "$name" 198.18.0.2 hostname)" = "$name-h1" ] ||
    die "rsh 198.18.0.2 did not run on host 1"
  [ "$(in_host 0 "$testbed" rsh --name "$name" 198.18.0.3 echo '$(hostname)' joined)" = \
    "$name-h2 joined" ] || die "rsh from inside host 0 did not run on host 2"
  expect_error "not a host of testbed" "$testbed" rsh --name "$name" 10.0.0.1 true
  echo "ok: rsh runs a shell line on the host an address names, also from inside a host"

  # kill-host ends every process of the host.
  in_host 1 sleep 600 &
  local pid=$! n
  for n in $(seq 100); do
    [ -n "$(ip netns pids "$name-h1")" ] && break
    sleep 0.05
  done
  "$testbed" kill-host 1 --name "$name" || die "kill-host failed"
  wait $pid
  local status=$?
  [ $status -eq 137 ] || die "the process on host 1 ended with $status, not 137 (SIGKILL)"
  [ -z "$(ip netns pids "$name-h1")" ] || die "processes left on host 1"
  echo "ok: kill-host 1 killed its process (status 137)"

  # partition takes the host's links down, heal brings them and the routes back.
  "$testbed" partition --name "$name" 1 || die "partition failed"
  for dev in east west; do
    ip -n "$name-h1" link show "$dev" | grep -q "state DOWN" || die "h1 $dev not down"
  done
  "$testbed" heal --name "$name" 1 || die "heal failed"
  for dev in east west; do
    ip -n "$name-h1" link show "$dev" | grep -q "state UP" || die "h1 $dev not up after heal"
    tc -n "$name-h1" class show dev "$dev" | grep -q "rate 100Mbit" || die "h1 $dev lost its qdisc"
  done
  ip -n "$name-h1" route get 198.18.0.3 | grep -q "dev east" || die "h1 lost its route to h2"
  echo "ok: partition 1 / heal 1: links down, then up with routes and qdiscs"

  # run: variables and prefixes; a failed rank stops the others; --timeout.
  local out
  out=$("$testbed" run --name "$name" --ranks-per-host 2 -- sh -c \
    'echo "$CHORUS_RANK/$CHORUS_WORLD_SIZE $CHORUS_TCP_ADDR $CHORUS_STORE $LOCAL_RANK $(hostname)"') ||
    die "run failed"
  echo "$out"
  [[ $out == *"[3] 3/6 198.18.0.2 tcp://198.18.0.1:29400 1 $name-h1"* ]] ||
    die "rank 3's variables are not those of host 1's second rank"
  [ "$(grep -c "^\[[0-5]\] [0-5]/6 " <<<"$out")" -eq 6 ] || die "not 6 prefixed lines"
  "$testbed" run --name "$name" --grace 0.2 -- sh -c '[ "$CHORUS_RANK" = 0 ] && exit 3; exec sleep 600'
  status=$?
  [ $status -eq 3 ] || die "a job whose rank 0 exited 3 ended with $status"
  for i in 0 1 2; do [ -z "$(ip netns pids "$name-h$i")" ] || die "ranks left on host $i"; done
  echo "ok: rank 0 failing (3) stopped the others; run exited 3"
  "$testbed" run --name "$name" --timeout 0.5 -- sleep 600
  status=$?
  [ $status -eq 124 ] || die "--timeout ended the job with $status, not 124"
  echo "ok: --timeout stopped the job with 124"

  # up on an existing name replaces it.
  "$testbed" up --name "$name" --hosts 2 || die "up over an existing testbed failed"
  [ "$(ip netns list | grep -cE "^$name-")" -eq 3 ] || die "up did not replace the ring"
  [ -z "$(ip -n "$name-h0" route show 198.18.0.3)" ] || die "the old ring's routes survived"
  echo "ok: up replaced the ring with a 2-host switch"

  "$testbed" down --name "$name" || die "down failed"
  [ -z "$(ip netns list | grep -E "^$name-")" ] || die "down left namespaces"
  [ ! -e "/run/chorus-testbed/$name" ] || die "down left /run/chorus-testbed/$name"
  ! grep -q "chorus-testbed/$name" /proc/self/mountinfo || die "down left mounts"
  [ "$("$testbed" down --name "$name")" = "testbed $name: nothing to remove" ] ||
    die "a second down did not say there was nothing"
  echo "ok: down removed namespaces, mounts and files"
}

case_tcp_bytes() {
  local bytes=$((8 << 20)) log=$work/bytes.log i
  "$testbed" up --name "$name" --hosts 2 --rate 1gbit || die "testbed up failed"
  declare -A before
  for i in 0 1; do
    for dir in tx rx; do before[$i$dir]=$(iface_bytes "$i" eth0 "$dir"); done
  done
  CHORUS_DEBUG=INFO "$testbed" run --name "$name" --ranks-per-host 2 --timeout 300 \
    -- "$tb_check" allreduce "$bytes" >"$log" 2>&1
  local status=$?
  cat "$log"
  [ $status -eq 0 ] || die "the job exited with status $status"
  expect_count "ALLREDUCE OK" 4 "$log"
  expect_count "transport shm\+tcp \(2 of 4 ranks on this host\)" 4 "$log"
  local d
  for i in 0 1; do
    for dir in tx rx; do
      d=$(($(iface_bytes "$i" eth0 "$dir") - before[$i$dir]))
      echo "host $i eth0 $dir: $d B during the job (AllReduce of $bytes B)"
      # Each host's ranks need all of the other host's contribution: at
      # least the whole vector crosses the link each way.
      [ "$d" -ge "$bytes" ] || die "host $i eth0 $dir moved $d B < $bytes B: not over the network"
    done
  done
}

case_host_death() {
  local dir=$work/run log=$work/host_death.log
  mkdir -p "$dir"
  job_log=$log
  "$testbed" up --name "$name" --hosts 4 --rate 1gbit || die "testbed up failed"
  "$testbed" run --name "$name" --grace 30 --timeout 180 -- "$tb_check" host-death "$dir" 2 \
    >"$log" 2>&1 &
  local job=$!
  wait_files 4 "$dir/looping."
  sleep 0.3
  local out t
  out=$("$testbed" kill-host --name "$name" 2) || die "kill-host failed"
  echo "$out"
  t=$(fault_time "$out") || die "no time in '$out'"
  echo "$t" >"$dir/cut_at.tmp" && mv "$dir/cut_at.tmp" "$dir/cut_at"
  wait $job
  local status=$?
  job_log=""
  cat "$log"
  [ $status -ne 124 ] || die "the job ran into testbed run's --timeout"
  [ $status -ne 0 ] || die "the job exited 0 although host 2 was killed"
  echo "ok: the job exited with status $status"
  expect_count "testbed: rank 2 \(host 2\) was killed by signal 9" 1 "$log"
  expect_count "HOST-DEATH OK rank" 3 "$log"
}

case_partition() {
  local dir=$work/run log=$work/partition.log
  mkdir -p "$dir"
  job_log=$log
  "$testbed" up --name "$name" --hosts 4 --rate 1gbit || die "testbed up failed"
  # CHORUS_TIMEOUT=5 bounds the start-up's calibration too, which 4 ranks of
  # a slow build (TSan) on these cores cannot finish in 5 s: the model comes
  # from a file instead (the job names its algorithm).
  printf '{"format": "chorus-tuning", "version": 1, "links": {"tcp": {"alpha_s": 2e-5, "beta_Bps": 1.25e8}}}\n' \
    >"$work/tuning.json"
  CHORUS_TUNING_FILE=$work/tuning.json CHORUS_TIMEOUT=5 "$testbed" run --name "$name" --grace 30 \
    --timeout 180 -- "$tb_check" partition "$dir" 1 >"$log" 2>&1 &
  local job=$!
  wait_files 4 "$dir/looping."
  sleep 0.3
  local out t
  out=$("$testbed" partition --name "$name" 1) || die "partition failed"
  echo "$out"
  t=$(fault_time "$out") || die "no time in '$out'"
  echo "$t" >"$dir/cut_at.tmp" && mv "$dir/cut_at.tmp" "$dir/cut_at"
  wait_files 4 "$dir/failed."
  "$testbed" heal --name "$name" 1 || die "heal failed"
  date +%s.%N >"$dir/healed.tmp" && mv "$dir/healed.tmp" "$dir/healed"
  wait $job
  local status=$?
  job_log=""
  cat "$log"
  [ $status -ne 124 ] || die "the job ran into testbed run's --timeout"
  [ $status -eq 0 ] || die "the job exited with status $status"
  expect_count "PARTITION ERROR OK rank" 4 "$log"
  expect_count "PARTITION OK rank" 4 "$log"
}

case_split_2x2() {
  local log=$work/split.log
  job_log=$log
  "$testbed" up --name "$name" --hosts 2 --rate 1gbit --topology switch || die "testbed up failed"
  "$testbed" run --name "$name" --ranks-per-host 2 --timeout 600 -- "$tb_check" split >"$log" 2>&1
  local status=$?
  grep -E "SPLIT|split:|testbed:|tb_check" "$log"
  [ $status -eq 0 ] || die "the job exited with status $status"
  expect_count "SPLIT OK rank [0-9]: split_by_host gave 2 of 4 ranks \(2 on this host\) over shm" 4 "$log"
}

case_shrink_4x1() {
  local log=$work/shrink.log
  job_log=$log
  "$testbed" up --name "$name" --hosts 4 --rate 1gbit --topology switch || die "testbed up failed"
  # Rank 0 serves the job's store: the survivors shrink without it.
  "$testbed" run --name "$name" --grace 60 --timeout 300 -- "$tb_check" shrink 0 >"$log" 2>&1
  grep -E "SHRINK|shrink:|testbed:|tb_check" "$log"
  expect_count "SHRINK OK rank [1-3]: 3 survivors over tcp" 3 "$log"
}

case_stragglers_4x1() {
  local log=$work/stragglers.log
  job_log=$log
  "$testbed" up --name "$name" --hosts 4 --rate 1gbit --topology switch || die "testbed up failed"
  "$testbed" run --name "$name" --timeout 300 -- "$tb_check" stragglers 2 20 20 >"$log" 2>&1 ||
    die "the job failed"
  grep -E "STRAGGLERS|testbed:|tb_check" "$log"
  expect_count "STRAGGLERS OK rank [0-3]: names rank 2" 4 "$log"
}

case "$case_name" in
  lifecycle) case_lifecycle ;;
  stragglers_4x1) case_stragglers_4x1 ;;
  shrink_4x1) case_shrink_4x1 ;;
  split_2x2) case_split_2x2 ;;
  grid_switch_4x1) run_grid 4 1 switch "tcp \(1 of 4 ranks on this host\)" ;;
  grid_switch_2x2) run_grid 2 2 switch "shm\+tcp \(2 of 4 ranks on this host\)" ;;
  grid_ring_4x1)
    run_grid 4 1 ring "tcp \(1 of 4 ranks on this host\)"
    # Two-hop routes: 0 <-> 2 through host 1, 1 <-> 3 through host 2.
    for i in 0 1 2 3; do
      f=$(snmp_ip "$i" ForwDatagrams)
      echo "host $i forwarded $f datagrams"
      if [ "$i" -eq 1 ] || [ "$i" -eq 2 ]; then
        [ "$f" -gt 0 ] || die "host $i forwarded nothing: no multi-hop route through it"
      else
        [ "$f" -eq 0 ] || die "host $i forwarded $f datagrams; no route passes it"
      fi
    done
    ;;
  tcp_bytes) case_tcp_bytes ;;
  host_death) case_host_death ;;
  partition) case_partition ;;
  *) die "unknown case '$case_name'" ;;
esac
echo "PASS testbed.$case_name"
