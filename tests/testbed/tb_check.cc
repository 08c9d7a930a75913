// The checks a testbed job runs, one mode per check; started by
// `scripts/testbed run` (one process per rank, each on its testbed host)
// from testbed_test.sh:
//
//   tb_check grid            every registered algorithm over a slice of the
//                            collective grid: counts 0, 1, N-1 and N+1 in
//                            float32, int32 and bfloat16 with sum and max, and
//                            1000003 elements (a prime, so that no split is
//                            even) in float32 sum; in and out of place; every
//                            output element compared exactly
//   tb_check allreduce BYTES one float32 sum AllReduce of BYTES, checked
//   tb_check host-bytes BYTES
//                            the bytes this host's eth0 sent and received
//                            during one float32 sum AllReduce of BYTES (after
//                            a first one, between barriers), checked; the
//                            first rank of each host prints them
//   tb_check host-death DIR VICTIM
//                            16 MiB AllReduces until one fails; the driver
//                            kills rank VICTIM's host and writes the time
//                            it did so (wall clock, seconds) to DIR/cut_at;
//                            every other rank must raise peer_failure naming
//                            the victim within kHostDeathLimit of that time
//   tb_check partition DIR CUT
//                            16 MiB AllReduces until one fails; the driver
//                            cuts off rank CUT's host (one rank per host) and
//                            writes DIR/cut_at; every rank, CUT included,
//                            must raise an error naming the ranks it cannot
//                            reach, within CHORUS_TIMEOUT plus
//                            kReportSlack of the cut; then, once the driver
//                            healed the link and wrote DIR/healed, a fresh
//                            init_from_env() must work
//   tb_check shrink VICTIM   rank VICTIM kills itself (SIGKILL) between two
//                            AllReduces; the others shrink across the hosts,
//                            without the store when VICTIM is rank 0 (which
//                            serves it), and check the new communicator
//                            (support/shrink_check.h); each survivor prints
//                            "SHRINK OK rank R" with its shrink's time
//   tb_check stragglers SLOW DELAY_MS CALLS   rank SLOW sleeps DELAY_MS
//                            before each of CALLS AllReduces; every rank's
//                            Communicator::stragglers must name it ("STRAGGLERS
//                            OK rank R: names rank SLOW, ...")
//
// Each rank writes DIR/looping.<rank> once its first AllReduce is done (so
// the driver strikes mid-loop) and, in the fault modes, DIR/failed.<rank>
// once its communicator is gone. It prints "<MODE> OK rank R ..." when its
// check holds; exit status 0 then, 1 otherwise.
#include "algorithms/algorithm.h"
#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "support/grid.h"
#include "support/shrink_check.h"
#include "support/split_check.h"

#include <chorus/chorus.h>

#include <signal.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

namespace fs = std::filesystem;

// The issue's bound for survivors of a dead host: an EOF on the dead host's
// connections reaches every survivor at once; the bound is loose on purpose.
constexpr double kHostDeathLimit = 1.0;
// A timed-out call waits up to a quarter of a second for its peers' answers
// to the stall report (src/exec) and then passes the error on; this allows
// for that and for a loaded test machine.
constexpr double kReportSlack = 1.0;
// How long the fault modes wait for the driver's files.
constexpr auto kDriverWait = std::chrono::seconds(60);
// The fault modes' AllReduce: 16 MiB of float32.
constexpr size_t kFaultCount = size_t{4} << 20;

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void touch(const fs::path& p) {
  std::ofstream(p) << "\n";
}

// Waits for the driver's file and returns its first number (a time in s).
std::optional<double> wait_for_file(const fs::path& p) {
  const auto until = std::chrono::steady_clock::now() + kDriverWait;
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream f(p);
    double v = 0;
    if (f >> v) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("no %s from the driver within %lld s\n", p.c_str(),
              static_cast<long long>(kDriverWait.count()));
  return std::nullopt;
}

int run_grid() {
  Communicator comm = init_from_env();
  const size_t n = static_cast<size_t>(comm.size());
  test::ReferenceCache cache;
  // Counts 0, 1, N-1, N+1 in three dtypes with two ops, and the large count
  // in float32 sum.
  const size_t wrong = test::run_every_algorithm(
      comm, /*include_large=*/true,
      [n](const test::GridCase& c) {
        if (c.count > n + 1) return c.type == DataType::float32 && c.op == ReduceOp::sum;
        return (c.type == DataType::float32 || c.type == DataType::int32 ||
                c.type == DataType::bfloat16) &&
               (c.op == ReduceOp::sum || c.op == ReduceOp::max);
      },
      &cache);
  if (wrong == 0) std::printf("GRID OK rank %d\n", comm.rank());
  return wrong == 0 ? 0 : 1;
}

// Fills v with values whose sum over the ranks is exact in float32, and
// says whether v holds that sum.
void fill(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((static_cast<size_t>(rank) + i) % 64);
}
bool holds_sum(const std::vector<float>& v, int n) {
  for (size_t i = 0; i < v.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<float>((static_cast<size_t>(r) + i) % 64);
    if (v[i] != want) return false;
  }
  return true;
}

int run_allreduce(size_t bytes) {
  Communicator comm = init_from_env();
  std::vector<float> v(bytes / sizeof(float));
  fill(v, comm.rank());
  comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  const bool ok = holds_sum(v, comm.size());
  std::printf("%s rank %d of %d: %zu B allreduced\n", ok ? "ALLREDUCE OK" : "ALLREDUCE WRONG",
              comm.rank(), comm.size(), v.size() * sizeof(float));
  return ok ? 0 : 1;
}

// Bytes this host's eth0 has sent and received so far.
std::pair<long long, long long> eth0_bytes() {
  auto read = [](const char* what) {
    std::ifstream in(std::string("/sys/class/net/eth0/statistics/") + what);
    long long v = -1;
    in >> v;
    return v;
  };
  return {read("tx_bytes"), read("rx_bytes")};
}

int run_host_bytes(size_t bytes) {
  Communicator comm = init_from_env();
  Communicator host = comm.split_by_host();
  std::vector<float> v(bytes / sizeof(float));
  fill(v, comm.rank());
  comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  fill(v, comm.rank());
  comm.barrier();
  const auto before = eth0_bytes();
  comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  comm.barrier();
  const auto after = eth0_bytes();
  const bool ok = holds_sum(v, comm.size()) && before.first >= 0;
  if (host.rank() == 0)
    std::printf("%s rank %d: eth0 sent %lld B, received %lld B during an AllReduce of %zu B\n",
                ok ? "HOST BYTES OK" : "HOST BYTES WRONG", comm.rank(), after.first - before.first,
                after.second - before.second, v.size() * sizeof(float));
  return ok ? 0 : 1;
}

// Whether `msg` names rank r as one that failed or does not answer: the tcp
// transport says "peer r ...", a stall report "rank r does not answer",
// "rank r has not entered ..." or "rank r has closed ...".
bool names_unreachable(const std::string& msg, int r) {
  const std::string k = std::to_string(r);
  const std::regex re("(peer " + k + "\\b)|(rank " + k + " (does not answer|has not|has closed))");
  return std::regex_search(msg, re);
}

struct Failure {
  Error error;
  double at;      // wall clock, s
  double call_s;  // how long the failing call ran
};

// AllReduces of 16 MiB until one fails. Writes DIR/looping.<rank> after the
// first. The communicator is gone when this returns.
std::optional<Failure> loop_until_failure(const fs::path& dir) {
  std::vector<float> v(kFaultCount);
  Communicator comm = init_from_env();
  const int rank = comm.rank();
  const auto give_up = std::chrono::steady_clock::now() + kDriverWait;
  for (int call = 0; std::chrono::steady_clock::now() < give_up; ++call) {
    fill(v, rank);
    const double start = wall_now();
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    } catch (const Error& e) {
      const double at = wall_now();
      return Failure{e, at, at - start};
    }
    if (!holds_sum(v, comm.size())) {
      std::printf("rank %d: call %d computed a wrong sum\n", rank, call);
      return std::nullopt;
    }
    if (call == 0) touch(dir / ("looping." + std::to_string(rank)));
  }
  std::printf("rank %d: no call failed within %lld s\n", rank,
              static_cast<long long>(kDriverWait.count()));
  return std::nullopt;
}

int run_host_death(const fs::path& dir, int victim) {
  const int rank = read_bootstrap_env().rank;
  const std::optional<Failure> f = loop_until_failure(dir);
  if (!f) return 1;
  touch(dir / ("failed." + std::to_string(rank)));
  const std::optional<double> cut = wait_for_file(dir / "cut_at");
  if (!cut) return 1;
  const double after = f->at - *cut;
  const std::string msg = f->error.what();
  const std::string code(to_string(f->error.code()));
  const bool good = f->error.code() == ErrorCode::peer_failure && names_unreachable(msg, victim) &&
                    after <= kHostDeathLimit;
  std::printf("%s rank %d: %s %.3f s after the kill (limit %.1f s): %s\n",
              good ? "HOST-DEATH OK" : "HOST-DEATH BAD", rank, code.c_str(), after, kHostDeathLimit,
              msg.c_str());
  return good ? 0 : 1;
}

int run_partition(const fs::path& dir, int cut_rank) {
  const BootstrapEnv env = read_bootstrap_env();
  const Config config = Config::from_env();
  const double limit = std::chrono::duration<double>(config.timeout).count() + kReportSlack;
  const std::optional<Failure> f = loop_until_failure(dir);
  if (!f) return 1;
  touch(dir / ("failed." + std::to_string(env.rank)));
  const std::optional<double> cut = wait_for_file(dir / "cut_at");
  if (!cut) return 1;
  const double after = f->at - *cut;
  const std::string msg = f->error.what();
  // The cut-off rank reaches nobody; the others do not reach it.
  std::vector<int> unreachable;
  for (int r = 0; r < env.world_size; ++r)
    if (r != env.rank && (env.rank == cut_rank || r == cut_rank)) unreachable.push_back(r);
  std::string missing;
  for (int r : unreachable)
    if (!names_unreachable(msg, r)) missing += " " + std::to_string(r);
  const bool good = missing.empty() && after <= limit;
  std::printf(
      "%s rank %d: %s %.3f s after the cut (call ran %.3f s; limit CHORUS_TIMEOUT + "
      "%.1f s = %.1f s)%s: %s\n",
      good ? "PARTITION ERROR OK" : "PARTITION ERROR BAD", env.rank,
      std::string(to_string(f->error.code())).c_str(), after, f->call_s, kReportSlack, limit,
      missing.empty() ? "" : (" does not name rank(s)" + missing).c_str(), msg.c_str());
  if (!good) return 1;
  if (!wait_for_file(dir / "healed")) return 1;
  Communicator again = init_from_env();
  std::vector<float> v(size_t{1} << 16);
  fill(v, again.rank());
  again.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  const bool sum_ok = holds_sum(v, again.size());
  std::printf("%s rank %d: a fresh communicator after heal %s\n",
              sum_ok ? "PARTITION OK" : "PARTITION BAD", again.rank(),
              sum_ok ? "works" : "computed a wrong sum");
  return sum_ok ? 0 : 1;
}

// split_by_host across testbed hosts: each rank's group is exactly the ranks
// with its host identity, over shared memory; then every split check
// (support/split_check.h) over the job's shm+tcp communicator.
int run_split() {
  Communicator comm = init_from_env();
  Communicator local = comm.split_by_host();
  const std::string me = host_identity();
  std::array<char, 256> mine{};
  std::snprintf(mine.data(), mine.size(), "%s", me.c_str());
  std::vector<char> all(mine.size() * static_cast<size_t>(comm.size()));
  comm.allgather(mine.data(), all.data(), mine.size(), DataType::uint8);
  int same_host = 0;
  for (int r = 0; r < comm.size(); ++r)
    same_host += std::string(all.data() + static_cast<size_t>(r) * mine.size()) == me;
  std::vector<char> local_all(mine.size() * static_cast<size_t>(local.size()));
  local.allgather(mine.data(), local_all.data(), mine.size(), DataType::uint8);
  bool good = local.size() == same_host && local.transport() == "shm";
  for (int r = 0; r < local.size(); ++r)
    good = good && std::string(local_all.data() + static_cast<size_t>(r) * mine.size()) == me;
  const std::vector<std::string> problems = test::check_splits(comm);
  for (const std::string& p : problems) std::printf("rank %d: split: %s\n", comm.rank(), p.c_str());
  good = good && problems.empty();
  std::printf("%s rank %d: split_by_host gave %d of %d ranks (%d on this host) over %s\n",
              good ? "SPLIT OK" : "SPLIT BAD", comm.rank(), local.size(), comm.size(), same_host,
              local.transport().c_str());
  return good ? 0 : 1;
}

int run_shrink(int victim) {
  Communicator comm = init_from_env();
  const int rank = comm.rank();
  std::optional<Communicator> next;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> problems = test::check_shrink_after_death(
      comm, victim, false, [] { ::raise(SIGKILL); }, -1, &next);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& p : problems) std::printf("rank %d: shrink: %s\n", rank, p.c_str());
  if (!next) return 1;
  int64_t bad = static_cast<int64_t>(problems.size());
  next->allreduce(&bad, &bad, 1, DataType::int64, ReduceOp::sum);
  if (bad != 0) return 1;
  std::printf("SHRINK OK rank %d: %d survivors over %s (the check took %.3f s)\n", rank,
              next->size(), next->transport().c_str(), s);
  return 0;
}

// Rank `slow` sleeps `delay_ms` before each of `calls` AllReduces (after one
// that lines the ranks up); every rank's stragglers() must name it: last in
// all but two calls, late by at least half the delay.
int run_stragglers(int slow, int delay_ms, int calls) {
  Communicator comm = init_from_env();
  float x = 1;
  comm.allreduce(&x, &x, 1, DataType::float32, ReduceOp::sum);
  for (int i = 0; i < calls; ++i) {
    if (comm.rank() == slow) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    comm.allreduce(&x, &x, 1, DataType::float32, ReduceOp::sum);
  }
  const std::vector<StragglerStats> report = comm.stragglers(calls);
  const StragglerStats& s = report.at(static_cast<size_t>(slow));
  int named = 0;
  for (const StragglerStats& r : report)
    if (r.last_count > report[static_cast<size_t>(named)].last_count) named = r.rank;
  const bool good = named == slow && s.calls == calls && s.last_count >= calls - 2 &&
                    s.mean_late_s >= delay_ms * 0.5e-3;
  std::printf(
      "%s rank %d: names rank %d, last in %d of %d calls, late %.3f ms mean, %.3f ms p90, "
      "%.1f%% of the waiting, clock error %.3f ms\n",
      good ? "STRAGGLERS OK" : "STRAGGLERS BAD", comm.rank(), named, s.last_count, s.calls,
      s.mean_late_s * 1e3, s.p90_late_s * 1e3, s.wait_share * 100, s.error_s * 1e3);
  return good ? 0 : 1;
}

int usage() {
  std::fprintf(
      stderr,
      "usage: tb_check grid | split | allreduce BYTES | host-bytes BYTES | host-death DIR VICTIM "
      "| partition DIR CUT | shrink VICTIM | stragglers SLOW DELAY_MS CALLS\n");
  return 2;
}

}  // namespace
}  // namespace chorus

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return chorus::usage();
  try {
    if (args[0] == "grid" && args.size() == 1) return chorus::run_grid();
    if (args[0] == "split" && args.size() == 1) return chorus::run_split();
    if (args[0] == "allreduce" && args.size() == 2)
      return chorus::run_allreduce(std::stoull(args[1]));
    if (args[0] == "host-bytes" && args.size() == 2)
      return chorus::run_host_bytes(std::stoull(args[1]));
    if (args[0] == "host-death" && args.size() == 3)
      return chorus::run_host_death(args[1], std::stoi(args[2]));
    if (args[0] == "shrink" && args.size() == 2) return chorus::run_shrink(std::stoi(args[1]));
    if (args[0] == "stragglers" && args.size() == 4)
      return chorus::run_stragglers(std::stoi(args[1]), std::stoi(args[2]), std::stoi(args[3]));
    if (args[0] == "partition" && args.size() == 3)
      return chorus::run_partition(args[1], std::stoi(args[2]));
    return chorus::usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tb_check %s: %s\n", args[0].c_str(), e.what());
    return 1;
  }
}
