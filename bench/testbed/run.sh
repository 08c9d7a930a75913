#!/usr/bin/env bash
# AllReduce on the testbed (scripts/testbed): the figures of docs/PERFORMANCE.md's
# "Testbed" section. Needs root. Each part makes its own testbed (name
# "tbbench"), runs, and removes it; results go to OUT (build-testbed-bench/),
# and analyze.py turns them into the tables.
#
#   bench/testbed/run.sh [-r RATE] [-R "RATES"] [-H HOSTS] [-e MAXBYTES] [-n ITERS]
#                        [-w WARMUP] [-m MIN_TIME_MS] [-k ROUNDS] [-o OUT] PART...
#
# -n and -w (default 5 and 2) are chorus-perf's iterations per row, -m its
# --min-time for the switch and ring sweeps (default 0); -e (default 64M)
# caps every sweep, for a quick trial of the script. OUT/machine.txt keeps
# the load average before and after each part.
#
# PART:
#   cpu      the ring's busbw at 64 MiB on a HOSTS-host switch at each of RATES
#            (default "1gbit 500mbit 250mbit"), with the share of the CPUs that
#            was busy meanwhile (/proc/stat, nice time left out): where busbw
#            stays near the link rate and the CPUs are not all busy, the link
#            is the bottleneck
#   switch   chorus-perf allreduce -a all, 8 B to 64 MiB (factor 2), HOSTS x 1
#            rank on a switch at RATE (default 1gbit) -> OUT/switch.json
#   ring     chorus-perf -a ring,bidir_ring,halving_doubling, 64 KiB to 64 MiB,
#            on a HOSTS-host ring at RATE -> OUT/ring.json
#   sim      chorus-sim's predictions with the link's alpha and beta from
#            OUT/switch.json: switch (1 port) and ring (2 ports: a host sends on
#            both of its links at once) -> OUT/sim_switch.json, OUT/sim_ring.json
#   compare  chorus (automatic choice), Open MPI (mpirun on host 0 through the
#            testbed's rsh agent, btl tcp) and Gloo, 64 KiB to 64 MiB (factor
#            4), HOSTS-host switch at RATE, ROUNDS rounds (default 3) taking
#            turns -> OUT/compare/<system>.<round>
#   hier     AllReduce 8 B to 64 MiB (factor 4) on 2 hosts x 4 ranks and 4 x 2
#            at RATE (use -r 500mbit): chorus's flat algorithms, its
#            hierarchical ones and its own pick (auto; ring, bidir_ring and
#            halving_doubling from 1 MiB, where the others are log N times
#            the bytes), Open MPI (btl tcp,vader) and Gloo at the same sizes,
#            ROUNDS rounds taking turns -> OUT/hier/<layout>.<system>.<round>;
#            then the bytes each host's eth0 sent and received during one
#            hier_two_level AllReduce of 64 MiB (tb_check host-bytes) ->
#            OUT/hier/<layout>.veth
#            (bench/testbed/hier_table.py OUT prints the tables)
#   hier_peers  the Open MPI and Gloo rounds of `hier` alone
# then: python3 bench/testbed/analyze.py OUT
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
testbed="$root/scripts/testbed"
rate=1gbit rates="1gbit 500mbit 250mbit" hosts=8 iters=5 warmup=2 rounds=3 max=64M min_time=0
skip_chorus=""  # hier_peers: the hier part without its chorus runs
out="$root/build-testbed-bench"
while getopts "r:R:H:e:n:w:m:k:o:" opt; do
  case $opt in
    r) rate=$OPTARG ;; R) rates=$OPTARG ;; H) hosts=$OPTARG ;; e) max=$OPTARG ;; n) iters=$OPTARG ;;
    w) warmup=$OPTARG ;; m) min_time=$OPTARG ;; k) rounds=$OPTARG ;; o) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: run.sh [options] cpu|switch|ring|sim|compare..." >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "run.sh: the testbed needs root" >&2; exit 1; }
build="${BUILD_DIR:-$root/build}"
perf="$build/tools/chorus-perf"
sim="$build/tools/chorus-sim"
name=tbbench
mkdir -p "$out"
trap '"$testbed" down --name "$name" >/dev/null' EXIT

# RATE in bits per second, parsed as scripts/testbed parses --rate.
rate_bits() {
  python3 -c 'import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("testbed", sys.argv[1])
testbed = importlib.util.module_from_spec(importlib.util.spec_from_loader("testbed", loader))
loader.exec_module(testbed)
print(testbed.parse_rate(sys.argv[2]))' "$testbed" "$1"
}

# Strips testbed run's "[rank] " prefix from rank 0's lines.
rank0() { sed -n 's/^\[0\] //p'; }

# /proc/stat's aggregate cpu line: busy and total jiffies. Busy leaves out
# nice time (processes at lower priority, which only fill cycles the job
# leaves idle) besides idle and iowait.
cpu_jiffies() {
  awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $3 - $5 - $6, t }' /proc/stat
}

load() { cut -d' ' -f1-3 /proc/loadavg; }

part_cpu() {
  local r f="$out/cpu.txt"
  echo "# rate busbw_GBps link_GBps pct_of_link cpu_busy_pct load_before (ring, $max, $hosts hosts, switch)" >"$f"
  for r in $rates; do
    "$testbed" up --name "$name" --hosts "$hosts" --rate "$r" >/dev/null
    local b0 t0 b1 t1 l0
    l0=$(cut -d' ' -f1 /proc/loadavg)
    read -r b0 t0 < <(cpu_jiffies)
    "$testbed" run --name "$name" -- "$perf" allreduce -b "$max" -e "$max" -a ring -n "$iters" \
      -w "$warmup" --json "$out/cpu_$r.json" | rank0 >"$out/cpu_$r.txt"
    read -r b1 t1 < <(cpu_jiffies)
    python3 -c 'import json, sys
bus = json.load(open(sys.argv[1]))["rows"][0]["out_of_place"]["busbw_GBps"]
link = int(sys.argv[3]) / 8e9
print(f"{sys.argv[2]} {bus:.4f} {link:.4f} {100 * bus / link:.1f} {int(sys.argv[4]) / 10:.1f} {sys.argv[5]}")' \
      "$out/cpu_$r.json" "$r" "$(rate_bits "$r")" "$(((b1 - b0) * 1000 / (t1 - t0)))" "$l0" >>"$f"
    tail -1 "$f"
  done
}

# The rate and size of the testbed the switch, ring and compare parts use.
write_params() {
  echo "{\"hosts\": $hosts, \"rate\": \"$rate\", \"rate_bits\": $(rate_bits "$rate")}" >"$out/params.json"
}

part_switch() {
  write_params
  "$testbed" up --name "$name" --hosts "$hosts" --rate "$rate"
  "$testbed" run --name "$name" -- "$perf" allreduce -b 8 -e "$max" -f 2 -a all -n "$iters" \
    -w "$warmup" --min-time "$min_time" --json "$out/switch.json" | rank0 | tee "$out/switch.txt"
}

part_ring() {
  write_params
  "$testbed" up --name "$name" --hosts "$hosts" --rate "$rate" --topology ring
  "$testbed" run --name "$name" -- "$perf" allreduce -b 64K -e "$max" -f 4 \
    -a ring,bidir_ring,halving_doubling -n "$iters" -w "$warmup" --min-time "$min_time" \
    --json "$out/ring.json" |
    rank0 | tee "$out/ring.txt"
}

part_sim() {
  local alpha beta
  read -r alpha beta < <(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print("%.3fus %.6fGB/s" % (j["alpha_us"], j["beta_GBps"]))' "$out/switch.json")
  "$sim" allreduce -n "$hosts" -b 8 -e "$max" -f 2 --alpha "$alpha" --beta "$beta" --algo all \
    --topology switch --ports 1 --json "$out/sim_switch.json" >"$out/sim_switch.txt"
  "$sim" allreduce -n "$hosts" -b 64K -e "$max" -f 4 --alpha "$alpha" --beta "$beta" \
    --algo ring,bidir_ring,halving_doubling --topology ring --ports 2 \
    --json "$out/sim_ring.json" >"$out/sim_ring.txt"
  "$sim" allreduce -n "$hosts" -b 64K -e "$max" -f 4 --alpha "$alpha" --beta "$beta" \
    --algo ring,bidir_ring,halving_doubling --topology switch --ports 1 \
    --json "$out/sim_switch_ring_algos.json" >/dev/null
  echo "sim: alpha $alpha, beta $beta"
}

part_compare() {
  local cmp="$build-compare/compare" round dir="$out/compare"
  mkdir -p "$dir"
  "$root/scripts/install-deps.sh" libopenmpi-dev libgloo-dev
  mkdir -p "$cmp"
  mpicxx.openmpi -O2 -std=c++20 -o "$cmp/mpi_openmpi" "$root/bench/compare/mpi_allreduce.cc"
  g++ -O2 -std=c++20 -o "$cmp/gloo_allreduce" "$root/bench/compare/gloo_allreduce.cc" -lgloo -pthread
  write_params
  "$testbed" up --name "$name" --hosts "$hosts" --rate "$rate"
  local sweep=(-b 64K -e "$max" -f 4 -n "$iters" -w "$warmup") addrs i
  addrs=$(for ((i = 1; i <= hosts; i++)); do printf "198.18.0.%d," "$i"; done)
  for ((round = 1; round <= rounds; round++)); do
    "$testbed" run --name "$name" -- "$perf" allreduce "${sweep[@]}" | rank0 >"$dir/chorus.$round"
    # Open MPI: mpirun on host 0, an orted on every other host through rsh; every
    # rank is alone on its host as far as Open MPI knows, so it is told to
    # yield while it waits, as chorus does (the hosts share 2 cores).
    "$testbed" exec --name "$name" 0 -- mpirun --allow-run-as-root -np "$hosts" -H "${addrs%,}" \
      --mca plm_rsh_agent "$testbed rsh --name $name" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      --mca mpi_yield_when_idle 1 "$cmp/mpi_openmpi" "${sweep[@]}" >"$dir/openmpi.$round"
    local store
    store=$(mktemp -d)
    "$testbed" run --name "$name" -- sh -c "exec '$cmp/gloo_allreduce' --rank \$CHORUS_RANK \
      --size \$CHORUS_WORLD_SIZE --store '$store' --host \$CHORUS_TCP_ADDR ${sweep[*]}" |
      rank0 >"$dir/gloo.$round"
    rm -rf "$store"
    echo "compare: round $round of $rounds done"
  done
}

# The lines of every rank that start with $1, without testbed run's prefix.
rank_lines() { sed -n "s/^\[[0-9]*\] \($1\)/\1/p"; }

# Open MPI and Gloo on the testbed that is up, LAYOUT H K ROUND: the sizes of
# the chorus sweeps (8 B to 256 KiB, 1 MiB to MAXBYTES, factor 4).
hier_peers_round() {
  local layout=$1 h=$2 k=$3 round=$4 dir="$out/hier" cmp="$build-compare/compare" i sweep store
  local addrs
  addrs=$(for ((i = 1; i <= h; i++)); do printf "198.18.0.%d:%d," "$i" "$k"; done)
  : >"$dir/$layout.openmpi.$round"
  : >"$dir/$layout.gloo.$round"
  for sweep in "-b 8 -e 256K -w 3" "-b 1M -e $max -w $warmup"; do
    # shellcheck disable=SC2086 # the sweep's flags are words
    "$testbed" exec --name "$name" 0 -- mpirun --allow-run-as-root -np $((h * k)) \
      -H "${addrs%,}" --mca plm_rsh_agent "$testbed rsh --name $name" \
      --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 \
      --mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1 \
      "$cmp/mpi_openmpi" $sweep -f 4 -n "$iters" >>"$dir/$layout.openmpi.$round"
    store=$(mktemp -d)
    "$testbed" run --name "$name" --ranks-per-host "$k" -- sh -c "exec '$cmp/gloo_allreduce' \
      --rank \$CHORUS_RANK --size \$CHORUS_WORLD_SIZE --store '$store' --host \$CHORUS_TCP_ADDR \
      $sweep -f 4 -n $iters" | rank0 >>"$dir/$layout.gloo.$round"
    rm -rf "$store"
  done
}

part_hier_peers() {
  skip_chorus=1 part_hier
}

part_hier() {
  local cmp="$build-compare/compare" dir="$out/hier" layout h k round i
  mkdir -p "$dir" "$cmp"
  "$root/scripts/install-deps.sh" libopenmpi-dev libgloo-dev
  mpicxx.openmpi -O2 -std=c++20 -o "$cmp/mpi_openmpi" "$root/bench/compare/mpi_allreduce.cc"
  g++ -O2 -std=c++20 -o "$cmp/gloo_allreduce" "$root/bench/compare/gloo_allreduce.cc" -lgloo -pthread
  echo "{\"rate\": \"$rate\", \"rate_bits\": $(rate_bits "$rate")}" >"$dir/params.json"
  local small=(-b 8 -e 256K -f 4 -n "$iters" -w 3)
  local large=(-b 1M -e "$max" -f 4 -n "$iters" -w "$warmup")
  for layout in 2x4 4x2; do
    h=${layout%x*} k=${layout#*x}
    "$testbed" up --name "$name" --hosts "$h" --rate "$rate" >/dev/null
    for ((round = 1; round <= rounds; round++)); do
      if [ -n "$skip_chorus" ]; then
        hier_peers_round "$layout" "$h" "$k" "$round"
        echo "hier_peers $layout: round $round of $rounds done"
        continue
      fi
      "$testbed" run --name "$name" --ranks-per-host "$k" -- "$perf" allreduce "${small[@]}" \
        -a ring,bidir_ring,halving_doubling,recursive_doubling,double_binary_tree,reduce_broadcast,hier_two_level,hier_leader,auto \
        --json "$dir/$layout.chorus_small.$round.json" >/dev/null
      "$testbed" run --name "$name" --ranks-per-host "$k" -- "$perf" allreduce "${large[@]}" \
        -a ring,bidir_ring,halving_doubling,hier_two_level,hier_leader,auto \
        --json "$dir/$layout.chorus_large.$round.json" >/dev/null
      hier_peers_round "$layout" "$h" "$k" "$round"
      echo "hier $layout: round $round of $rounds done"
    done
    if [ -n "$skip_chorus" ]; then
      "$testbed" down --name "$name" >/dev/null
      continue
    fi
    # Inter-host bytes of one two-level AllReduce of 64 MiB, counted on each
    # host's eth0 inside the job, between barriers, after a first call.
    CHORUS_ALGO=hier_two_level "$testbed" run --name "$name" --ranks-per-host "$k" -- \
      "$build/tests/testbed/tb_check" host-bytes $((64 << 20)) | rank_lines "HOST BYTES" >"$dir/$layout.veth"
    cat "$dir/$layout.veth"
    "$testbed" down --name "$name" >/dev/null
  done
}

for part in "$@"; do
  case $part in cpu | switch | ring | sim | compare | hier | hier_peers) ;; *) echo "run.sh: unknown part '$part'" >&2; exit 2 ;; esac
done
for part in "$@"; do
  before=$(load) start=$(date -u +%FT%TZ)
  "part_$part"
  echo "$start $part (rate $rate, $hosts hosts, -n $iters -w $warmup -m $min_time): load before $before, after $(load)" >>"$out/machine.txt"
done
