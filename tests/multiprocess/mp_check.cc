// Multi-process checks, one program with one mode per check; started by
// chorus-run (or mpirun) from ctest, one process per rank:
//
//   mp_check grid [--small]  every registered algorithm over the collective
//                            grid (all dtypes, ops, in/out of place, counts
//                            0, 1, N-1, N+1 and a large prime; --small: a
//                            reduced slice for high rank counts)
//   mp_check allreduce       one float32 sum, checked on every rank; rank 0
//                            prints "ALL OK" with the launcher it detected
//   mp_check kill            rank N-1 kills itself (SIGKILL) in the middle of
//                            an AllReduce; every other rank must raise
//                            peer_failure within 5 s, and rank 0 prints
//                            "SURVIVORS OK" once all of them have
//   mp_check timeout         rank 1 joins an AllReduce late; rank 0 must get
//                            Error(timeout) naming itself and the collective
//   mp_check stop            rank N-1 stops itself (SIGSTOP) before its fifth
//                            AllReduce; every other rank's call must fail
//                            with an error that names rank N-1 as the one
//                            behind; rank 0 then continues it (SIGCONT) and
//                            prints "STOP OK" once every survivor's error did
//   mp_check split           the split checks of tests/support/split_check.h
//                            (parity, blocks, key reversal, negative colors,
//                            a child of a child, interleaving, split_by_host;
//                            each child's collectives checked exactly); rank 0
//                            prints "SPLIT OK N ranks" when no rank saw a
//                            problem
//   mp_check deterministic   the deterministic reductions of
//                            tests/support/deterministic_check.h (user
//                            buffers, and window buffers where the transport
//                            shares memory); rank 0 prints "DETERMINISTIC OK
//                            N ranks"
//   mp_check recv-any        the checks of tests/support/recv_any_check.h;
//                            rank 0 prints "RECV ANY OK N ranks"
//   mp_check mismatch        every scenario of tests/support/mismatch.h, each
//                            on a new communicator; rank 0 prints
//                            "MISMATCH OK" when it saw no problem (each rank
//                            checks itself and exits 1 on a problem)
//   mp_check window-kill V   every rank makes a window (an anonymous memory
//                            file: /proc/self/maps names it memfd:, never
//                            /dev/shm) and runs two-shot AllReduces on it;
//                            rank V kills itself (SIGKILL) in the middle of
//                            one; every survivor must raise peer_failure
//                            within 5 s, and once all have let go the
//                            first survivor finds nothing of any rank's left in /dev/shm:
//                            "WINDOW KILL OK"
//   mp_check shrink V W [S]  rank V is killed between calls (W = between) or
//                            inside a large AllReduce (W = inside), and rank
//                            S, where given, during the shrink; the
//                            survivors shrink and check the new
//                            communicator (support/shrink_check.h); its
//                            rank 0 prints "SHRINK OK K survivors"
//   mp_check shrink-stop     rank N-1 stops itself (SIGSTOP) and never
//                            shrinks; the others shrink without it after
//                            the timeout, kill it and print "SHRINK STOP OK"
//   mp_check revoke          rank 0 revokes from a second thread while every
//                            rank is blocked; "REVOKE OK" with the slowest
//                            rank's time
//   mp_check grow            rank N-1 is killed, the survivors shrink, and a
//                            new process (mp_check join) joins by grow; the
//                            N ranks reduce exactly; then a late joiner and
//                            one of a wrong generation (mp_check
//                            join-refused) must be refused: "GROW OK N ranks"
//   mp_check elastic         under chorus-run --elastic --replace 1: rank N-1
//                            is killed, the survivors shrink and grow by
//                            one, and the launcher's replacement joins:
//                            "ELASTIC OK N ranks"
//   mp_check init            init_from_env() and a barrier, then "INIT OK";
//                            with MP_CHECK_SET=key=value in its environment a
//                            rank first sets key to value in the store (to
//                            plant a bad value for launch_test)
//
// Exit status 0 when the check holds on this rank, 1 otherwise.
#include "algorithms/algorithm.h"
#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "support/deterministic_check.h"
#include "support/grid.h"
#include "support/mismatch.h"
#include "support/progress.h"
#include "support/recv_any_check.h"
#include "support/shrink_check.h"
#include "support/split_check.h"

#include <chorus/chorus.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace chorus {
namespace {

int run_grid_mode(bool small) {
  Communicator comm = init_from_env();
  const size_t n = static_cast<size_t>(comm.size());
  // small: the slice for many ranks on few cores: two counts, three dtypes,
  // two ops, both placements.
  const size_t wrong = test::run_every_algorithm(
      comm, /*include_large=*/!small, [small, n](const test::GridCase& c) {
        if (!small) return true;
        const bool dtype_ok = c.type == DataType::float32 || c.type == DataType::int32 ||
                              c.type == DataType::bfloat16;
        const bool op_ok = c.op == ReduceOp::sum || c.op == ReduceOp::max;
        return dtype_ok && op_ok && (c.count == 1 || c.count == n + 1);
      });
  return wrong == 0 ? 0 : 1;
}

int run_allreduce_mode() {
  const BootstrapEnv env = read_bootstrap_env();
  Communicator comm = init_from_env();
  const int n = comm.size();
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(comm.rank() + 1) * static_cast<float>(i % 7);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  int32_t ok = 1;
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != ranks_sum * static_cast<float>(i % 7)) ok = 0;
  // Every rank's verdict, so that rank 0 can speak for all of them.
  comm.allreduce(&ok, &ok, 1, DataType::int32, ReduceOp::min);
  std::printf("rank %d of %d (from %s variables): %s\n", comm.rank(), n, env.source.c_str(),
              ok ? "correct" : "WRONG");
  if (comm.rank() == 0 && ok) std::printf("ALL OK ranks=%d source=%s\n", n, env.source.c_str());
  return ok ? 0 : 1;
}

// How many mappings of this process are windows (memfd:chorus-window), and
// whether any window is mapped from a file system path instead.
std::pair<int, bool> window_mappings() {
  std::ifstream maps("/proc/self/maps");
  int memfd = 0;
  bool file = false;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("chorus-window") == std::string::npos) continue;
    if (line.find("/memfd:chorus-window") != std::string::npos)
      ++memfd;
    else
      file = true;
  }
  return {memfd, file};
}

int run_window_kill_mode(int victim) {
  const BootstrapEnv env = read_bootstrap_env();
  OpenedStore store =
      open_store(env.store, false, Clock::now() + std::chrono::seconds(30), Config::from_env());
  const pid_t pid = ::getpid();
  store.store->set("window_kill/pid/" + std::to_string(env.rank),
                   std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&pid),
                                        reinterpret_cast<const uint8_t*>(&pid) + sizeof pid));
  const size_t count = size_t{1} << 18;
  {
    Communicator comm = init_from_env();
    const int n = comm.size();
    Window w = comm.window(count * sizeof(float));
    auto* v = static_cast<float*>(w.data());
    const auto [memfd, file] = window_mappings();
    if (memfd < n || file) {
      std::printf("rank %d: %d window mappings from memfd (want >= %d)%s\n", comm.rank(), memfd, n,
                  file ? ", and one from a file" : "");
      return 1;
    }
    CallOptions o;
    o.algorithm = "two_shot";
    auto start = std::chrono::steady_clock::now();
    try {
      for (int round = 0; round < 100000; ++round) {
        std::fill(v, v + count, 1.0f);
        start = std::chrono::steady_clock::now();
        if (comm.rank() == victim && round == 3) {
          Work work = comm.allreduce_async(v, v, count, DataType::float32, ReduceOp::sum, o);
          work.done();  // signal kReady, then die in the middle of the call
          ::raise(SIGKILL);
        }
        comm.allreduce(v, v, count, DataType::float32, ReduceOp::sum, o);
        if (v[0] != static_cast<float>(n) || v[count - 1] != v[0]) {
          std::printf("rank %d: wrong sum %g\n", comm.rank(), static_cast<double>(v[0]));
          return 1;
        }
      }
      std::printf("rank %d: no error although rank %d was killed\n", comm.rank(), victim);
      return 1;
    } catch (const Error& e) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank %d: %s after %.3f s: %s\n", comm.rank(),
                  std::string(to_string(e.code())).c_str(), s, e.what());
      if (e.code() != ErrorCode::peer_failure || s >= 5.0) return 1;
    }
  }  // the survivor lets go of its window and communicator here
  store.store->add("window_kill/released", 1);
  const int checker = victim == 0 ? 1 : 0;  // the first survivor
  if (env.rank != checker) return 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (store.store->add("window_kill/released", 0) < env.world_size - 1) {
    if (Clock::now() > deadline) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The shm transport's segments are named /dev/shm/chorus-PID-...; windows
  // have no name at all. Nothing of any rank of this job may be left.
  int left = 0;
  for (int r = 0; r < env.world_size; ++r) {
    const auto bytes = store.store->get("window_kill/pid/" + std::to_string(r), deadline);
    pid_t p = 0;
    std::memcpy(&p, bytes.data(), sizeof p);
    const std::string prefix = "chorus-" + std::to_string(p) + "-";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0 || name.find("chorus-window") != std::string::npos) {
        std::printf("left behind: /dev/shm/%s\n", name.c_str());
        ++left;
      }
    }
  }
  if (left > 0) return 1;
  std::printf("WINDOW KILL OK rank %d killed, %d survivors raised peer_failure, nothing left\n",
              victim, env.world_size - 1);
  return 0;
}

int run_kill_mode() {
  const BootstrapEnv env = read_bootstrap_env();
  Communicator comm = init_from_env();
  const int n = comm.size();
  const int victim = n - 1;
  std::vector<float> v(size_t{1} << 20, 1.0f);
  // The victim dies after its fourth call is under way; a survivor may learn
  // of it in any call from its third on (the victim finishes its part of a
  // call before the others finish theirs), so every call is timed.
  auto start = std::chrono::steady_clock::now();
  try {
    for (int round = 0; round < 1000; ++round) {
      start = std::chrono::steady_clock::now();
      if (comm.rank() == victim && round == 3) {
        Work w =
            comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max);
        w.done();  // put some of it on the wire, then die mid-collective
        ::raise(SIGKILL);
      }
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max);
    }
    std::printf("rank %d: no error although rank %d was killed\n", comm.rank(), victim);
    return 1;
  } catch (const Error& e) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string msg = e.what();
    const bool names_rank = msg.find("rank " + std::to_string(comm.rank())) != std::string::npos;
    const bool good = e.code() == ErrorCode::peer_failure && s < 5.0 && names_rank &&
                      msg.find("peer") != std::string::npos;
    std::printf("rank %d: %s after %.3f s: %s\n", comm.rank(),
                std::string(to_string(e.code())).c_str(), s, msg.c_str());
    if (!good) return 1;
  }
  // Report through the store; rank 0 waits for every survivor.
  OpenedStore store =
      open_store(env.store, false, Clock::now() + std::chrono::seconds(20), Config::from_env());
  store.store->add("kill_test/survivors_ok", 1);
  if (comm.rank() == 0) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (store.store->add("kill_test/survivors_ok", 0) < n - 1) {
      if (Clock::now() > deadline) return 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::printf("SURVIVORS OK %d of %d raised peer_failure within 5 s\n", n - 1, n - 1);
  }
  return 0;
}

int run_timeout_mode() {
  Communicator comm = init_from_env();
  std::vector<int64_t> v(100, 1);
  if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(2));
  CallOptions o;
  o.timeout = std::chrono::milliseconds(comm.rank() == 0 ? 300 : 10000);
  try {
    comm.allreduce(v.data(), v.data(), v.size(), DataType::int64, ReduceOp::sum, o);
  } catch (const Error& e) {
    const std::string msg = e.what();
    std::printf("rank %d: %s: %s\n", comm.rank(), std::string(to_string(e.code())).c_str(),
                msg.c_str());
    if (comm.rank() == 0) {
      const bool good = e.code() == ErrorCode::timeout && msg.find("rank 0") != std::string::npos &&
                        msg.find("allreduce") != std::string::npos;
      if (good) std::printf("TIMEOUT OK\n");
      return good ? 0 : 1;
    }
    // The late rank finds its peer gone (it gave up): a peer failure.
    return e.code() == ErrorCode::peer_failure ? 0 : 1;
  }
  std::printf("rank %d: allreduce completed although rank 0 should have timed out\n", comm.rank());
  return 1;
}

// After a failure, a new communicator from the same environment works.
bool works_again() {
  Communicator again = init_from_env();
  std::vector<float> v(64, 1.0f);
  again.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  const bool ok = v[0] == static_cast<float>(again.size()) && v[63] == v[0];
  std::printf("rank %d: a new communicator after the abort %s\n", again.rank(),
              ok ? "works" : "computed a wrong sum");
  return ok;
}

// Rank 1 stops itself (SIGSTOP) while rank 0 is blocked in an allreduce with
// it; a second thread of rank 0 aborts. Rank 0's call must end with aborted
// at once (well before its 60 s timeout), and rank 1, continued by rank 0,
// must raise aborted naming rank 0 and the reason in its next call.
int run_abort_mode() {
  const BootstrapEnv env = read_bootstrap_env();
  Communicator comm = init_from_env();
  OpenedStore store =
      open_store(env.store, false, Clock::now() + std::chrono::seconds(20), Config::from_env());
  const std::string reason = "abort test: operator stop";
  std::vector<float> v(1024, 1.0f);
  CallOptions patient;
  patient.timeout = std::chrono::seconds(60);
  comm.barrier();
  if (comm.rank() == 1) {
    const std::string pid = std::to_string(::getpid());
    store.store->set("abort_test/pid", std::vector<uint8_t>(pid.begin(), pid.end()));
    ::raise(SIGSTOP);
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum, patient);
      std::printf("rank 1: allreduce completed although rank 0 aborted\n");
      return 1;
    } catch (const Error& e) {
      const std::string msg = e.what();
      std::printf("rank 1: %s: %s\n", std::string(to_string(e.code())).c_str(), msg.c_str());
      const bool good = e.code() == ErrorCode::aborted && msg.find("peer 0") != std::string::npos &&
                        msg.find(reason) != std::string::npos;
      if (good) store.store->add("abort_test/peer_ok", 1);
      return good && works_again() ? 0 : 1;
    }
  }
  if (comm.rank() != 0) return 0;
  const std::vector<uint8_t> pid_bytes =
      store.store->get("abort_test/pid", Clock::now() + std::chrono::seconds(20));
  const std::string pid(pid_bytes.begin(), pid_bytes.end());
  std::atomic<int64_t> aborted_at{0};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    aborted_at = Clock::now().time_since_epoch().count();
    comm.abort(reason);
  });
  int rc = 1;
  try {
    // Submitted and watched: with the progress thread on (the default), that
    // thread is inside the transport when the abort comes.
    test::finish(comm, comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32,
                                            ReduceOp::sum, patient));
    std::printf("rank 0: allreduce completed although rank 1 is stopped\n");
  } catch (const Error& e) {
    const auto now = Clock::now().time_since_epoch().count();
    const double ms = static_cast<double>(now - aborted_at.load()) / 1e6;
    const std::string msg = e.what();
    std::printf("rank 0: %s %.3f ms after abort(): %s\n", std::string(to_string(e.code())).c_str(),
                ms, msg.c_str());
    // Generous against a loaded host; the figure is printed for the record.
    if (e.code() == ErrorCode::aborted && msg.find(reason) != std::string::npos && ms < 1000)
      rc = 0;
  }
  aborter.join();
  ::kill(static_cast<pid_t>(std::stol(pid)), SIGCONT);
  if (rc != 0) return rc;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (store.store->add("abort_test/peer_ok", 0) < 1) {
    if (Clock::now() > deadline) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!works_again()) return 1;
  std::printf("ABORT OK\n");
  return 0;
}

int run_stop_mode() {
  const BootstrapEnv env = read_bootstrap_env();
  Communicator comm = init_from_env();
  OpenedStore store =
      open_store(env.store, false, Clock::now() + std::chrono::seconds(30), Config::from_env());
  const int n = comm.size();
  const int victim = n - 1;
  std::vector<float> v(1024, 1.0f);
  CallOptions o;
  o.timeout = std::chrono::seconds(2);
  if (comm.rank() == victim) {
    const std::string pid = std::to_string(::getpid());
    store.store->set("stop_test/pid", std::vector<uint8_t>(pid.begin(), pid.end()));
  }
  for (int call = 1; call <= 4; ++call)
    comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max, o);
  if (comm.rank() == victim) {
    ::raise(SIGSTOP);  // until rank 0 continues it
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max, o);
    } catch (const Error& e) {
      std::printf("rank %d (continued): %s\n", comm.rank(), e.what());
    }
    return 0;
  }
  bool good = false;
  try {
    comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max, o);
    std::printf("rank %d: no error although rank %d is stopped\n", comm.rank(), victim);
  } catch (const Error& e) {
    const std::string msg = e.what();
    const std::string who = "rank " + std::to_string(victim);
    good = msg.find(who + " has not") != std::string::npos ||
           msg.find(who + " does not answer") != std::string::npos;
    // A rank that has not entered the call is named with how late it is.
    if (msg.find(who + " has not entered") != std::string::npos)
      good = good && msg.find(who + " has not entered call 5 (late by ") != std::string::npos;
    std::printf("rank %d: %s: %s\n", comm.rank(), std::string(to_string(e.code())).c_str(),
                msg.c_str());
  }
  store.store->add("stop_test/survivors", 1);
  if (good) store.store->add("stop_test/named", 1);
  if (comm.rank() != 0) return good ? 0 : 1;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (store.store->add("stop_test/survivors", 0) < n - 1 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto pid_bytes = store.store->get("stop_test/pid", deadline);
  ::kill(std::stoi(std::string(pid_bytes.begin(), pid_bytes.end())), SIGCONT);
  const int64_t named = store.store->add("stop_test/named", 0);
  if (named == n - 1)
    std::printf("STOP OK %d of %d survivors named rank %d\n", n - 1, n - 1, victim);
  return named == n - 1 ? 0 : 1;
}

int run_mismatch_mode() {
  bool ok = true;
  for (const std::string& kind : testing::mismatch_kinds()) {
    Communicator comm = init_from_env();
    // Every rank has its communicator before any makes the mismatched call
    // (a rank still creating its own would fail there, which is right, but
    // not this check). A rank still in the barrier when a fast one finds the
    // mismatch may fail there already: then both its calls below must
    // raise mismatch too.
    try {
      comm.barrier();
    } catch (const Error& e) {
      if (e.code() != ErrorCode::mismatch) throw;
    }
    const testing::MismatchOutcome out = testing::run_mismatch_case(comm, kind);
    const std::string& problems = out.problems;
    std::printf("rank %d: mismatch %s (N=%d): %s (first error after %.3f ms)\n", comm.rank(),
                kind.c_str(), comm.size(), problems.empty() ? "ok" : problems.c_str(),
                out.seconds_to_error * 1e3);
    ok &= problems.empty();
  }
  if (ok && read_bootstrap_env().rank == 0) std::printf("MISMATCH OK\n");
  return ok ? 0 : 1;
}

// Communicator::split and split_by_host (support/split_check.h): every case,
// every collective on each child checked exactly.
int run_split_mode() {
  Communicator comm = init_from_env();
  const std::vector<std::string> problems = test::check_splits(comm);
  for (const std::string& p : problems) std::printf("rank %d: split: %s\n", comm.rank(), p.c_str());
  int64_t bad = static_cast<int64_t>(problems.size());
  comm.allreduce(&bad, &bad, 1, DataType::int64, ReduceOp::sum);
  if (comm.rank() == 0 && bad == 0) std::printf("SPLIT OK %d ranks\n", comm.size());
  return bad == 0 ? 0 : 1;
}

// Deterministic reductions (support/deterministic_check.h): every algorithm
// gives the bits the contributions' deterministic sum has.
int run_deterministic_mode() {
  Communicator comm = init_from_env();
  std::vector<std::string> problems = test::check_deterministic_suite(comm, false);
  if (comm.transport() == "shm") {
    std::vector<std::string> w = test::check_deterministic_suite(comm, true);
    problems.insert(problems.end(), w.begin(), w.end());
  }
  for (size_t i = 0; i < std::min<size_t>(problems.size(), 20); ++i)
    std::printf("rank %d: deterministic: %s\n", comm.rank(), problems[i].c_str());
  int64_t bad = static_cast<int64_t>(problems.size());
  comm.allreduce(&bad, &bad, 1, DataType::int64, ReduceOp::sum);
  if (comm.rank() == 0 && bad == 0) std::printf("DETERMINISTIC OK %d ranks\n", comm.size());
  return bad == 0 ? 0 : 1;
}

// Communicator::recv_any (support/recv_any_check.h).
int run_recv_any_mode() {
  Communicator comm = init_from_env();
  const std::vector<std::string> problems = test::check_recv_any(comm);
  for (const std::string& p : problems)
    std::printf("rank %d: recv_any: %s\n", comm.rank(), p.c_str());
  int64_t bad = static_cast<int64_t>(problems.size());
  comm.allreduce(&bad, &bad, 1, DataType::int64, ReduceOp::sum);
  if (comm.rank() == 0 && bad == 0) std::printf("RECV ANY OK %d ranks\n", comm.size());
  return bad == 0 ? 0 : 1;
}

// The survivors' verdict over their new communicator: rank 0 of it prints
// `ok_line` when no survivor saw a problem.
int report_survivors(const std::vector<std::string>& problems, int old_rank,
                     std::optional<Communicator>& next, const std::string& ok_line) {
  for (const std::string& p : problems) std::printf("rank %d: %s\n", old_rank, p.c_str());
  if (!next) return problems.empty() ? 0 : 1;
  int64_t bad = static_cast<int64_t>(problems.size());
  next->allreduce(&bad, &bad, 1, DataType::int64, ReduceOp::sum);
  if (next->rank() == 0 && bad == 0) std::printf("%s\n", ok_line.c_str());
  return bad == 0 ? 0 : 1;
}

// Communicator::shrink after rank `victim` is killed between calls or in the
// middle of a large AllReduce, and optionally `second` during the shrink
// (support/shrink_check.h); "SHRINK OK" from the survivors.
int run_shrink_mode(int victim, bool inside, int second) {
  Communicator comm = init_from_env();
  const int old_rank = comm.rank();
  std::optional<Communicator> next;
  const auto problems = test::check_shrink_after_death(
      comm, victim, inside, [] { ::raise(SIGKILL); }, second, &next);
  return report_survivors(problems, old_rank, next,
                          str_cat("SHRINK OK ", next ? next->size() : 0, " survivors"));
}

// The last rank stops itself (SIGSTOP) and never calls shrink: the others
// time out, shrink without it once its timeout has passed, and kill it.
int run_shrink_stop_mode() {
  Communicator comm = init_from_env();
  const int n = comm.size();
  const int old_rank = comm.rank();
  std::vector<int32_t> pids(static_cast<size_t>(n));
  const int32_t mine = static_cast<int32_t>(::getpid());
  comm.allgather(&mine, pids.data(), 1, DataType::int32);
  std::vector<float> v(1000, 1.0f);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  if (old_rank == n - 1) {
    ::raise(SIGSTOP);
    return 0;
  }
  std::vector<std::string> problems;
  CallOptions quick;
  quick.timeout = std::chrono::milliseconds(500);
  try {
    comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum, quick);
    problems.push_back("an AllReduce without the stopped rank returned");
  } catch (const Error&) {
  }
  const auto start = std::chrono::steady_clock::now();
  std::optional<Communicator> next(comm.shrink(std::chrono::milliseconds(4000)));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d: shrink without the stopped rank took %.3f s\n", old_rank, took);
  std::vector<int> members;
  for (int r = 0; r < n - 1; ++r) members.push_back(r);
  for (auto& p : test::check_exact_allreduce(*next, members, old_rank)) problems.push_back(p);
  if (next->rank() == 0) ::kill(pids[static_cast<size_t>(n - 1)], SIGKILL);
  return report_survivors(problems, old_rank, next, "SHRINK STOP OK");
}

// Rank 0 revokes from a second thread while every rank is blocked; every
// rank's call raises revoked within 2 s ("REVOKE OK", with the slowest
// rank's time).
int run_revoke_mode() {
  Communicator comm = init_from_env();
  const int old_rank = comm.rank();
  std::optional<Communicator> next;
  double measured = 0;
  const auto problems = test::check_revoke_unblocks(comm, 2000, measured, &next);
  double worst = measured;
  if (next) next->allreduce(&worst, &worst, 1, DataType::float64, ReduceOp::max);
  char line[128];
  std::snprintf(line, sizeof line, "REVOKE OK slowest rank %.2f ms after the revoke", worst);
  return report_survivors(problems, old_rank, next, line);
}

// Starts this program as a joiner of generation `generation`:
// "mp_check <args...>" with CHORUS_JOIN_GENERATION and `extra` set.
pid_t spawn_joiner(int generation, const std::vector<std::string>& args,
                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "CHORUS_JOIN_GENERATION=", 23) != 0) env.emplace_back(*e);
  env.push_back(str_cat("CHORUS_JOIN_GENERATION=", generation));
  for (const auto& e : extra) env.push_back(e);
  std::vector<std::string> argv{"mp_check"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargv.data(), cenv.data()) != 0)
    return -1;
  return pid;
}

bool exited_zero(pid_t pid) {
  int status = 0;
  return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// After rank N-1 is killed and the survivors shrink, a new process joins by
// grow: the communicator is back at N and reduces exactly; then a late
// joiner and one of a wrong generation are refused ("GROW OK").
int run_grow_mode() {
  Communicator comm = init_from_env();
  const int n = comm.size();
  const int old_rank = comm.rank();
  std::optional<Communicator> next;
  auto problems = test::check_shrink_after_death(
      comm, n - 1, false, [] { ::raise(SIGKILL); }, -1, &next);
  if (!next) return report_survivors(problems, old_rank, next, "");
  pid_t joiner = -1;
  if (next->rank() == 0) joiner = spawn_joiner(1, {"join", std::to_string(n - 1)});
  std::optional<Communicator> grown(next->grow(1));
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  for (auto& p : test::check_exact_allreduce(*grown, all, old_rank)) problems.push_back(p);
  if (grown->rank() == 0) {
    if (!exited_zero(spawn_joiner(1, {"join-refused", "late"})))
      problems.push_back("a late joiner was not refused as late");
    if (!exited_zero(
            spawn_joiner(7, {"join-refused", "no grow of generation 7"}, {"CHORUS_TIMEOUT=1"})))
      problems.push_back("a joiner of a wrong generation was not refused naming it");
  }
  // The joiner reports its own problems in the verdict.
  const int verdict =
      report_survivors(problems, old_rank, grown, str_cat("GROW OK ", grown->size(), " ranks"));
  if (joiner > 0 && !exited_zero(joiner)) {
    std::printf("rank %d: the joiner did not exit 0\n", old_rank);
    return 1;
  }
  return verdict;
}

// A joiner (spawned by run_grow_mode): joins, checks the communicator as
// old rank `id`, and takes part in the verdict.
int run_join_mode(int id) {
  std::optional<Communicator> comm(join_from_env());
  std::vector<int> all;
  for (int r = 0; r < comm->size(); ++r) all.push_back(r);
  const auto problems = test::check_exact_allreduce(*comm, all, id);
  return report_survivors(problems, id, comm, "GROW OK");
}

// A joiner that must be refused with an error containing `expected`.
int run_join_refused_mode(const std::string& expected) {
  try {
    join_from_env();
    std::printf("a joiner that should have been refused joined\n");
    return 1;
  } catch (const Error& e) {
    const bool good = std::string(e.what()).find(expected) != std::string::npos;
    std::printf("JOIN REFUSED (%s): %s\n", good ? "as expected" : "UNEXPECTED", e.what());
    return good ? 0 : 1;
  }
}

// Under chorus-run --elastic --replace 1: rank N-1 is killed, the survivors
// shrink and grow by one, and the launcher's replacement (which has
// CHORUS_JOIN_GENERATION set) joins as rank N-1: "ELASTIC OK N ranks".
int run_elastic_mode() {
  if (env_var("CHORUS_JOIN_GENERATION")) {
    std::optional<Communicator> comm(join_from_env());
    std::vector<int> all;
    for (int r = 0; r < comm->size(); ++r) all.push_back(r);
    const auto problems = test::check_exact_allreduce(*comm, all, comm->size() - 1);
    return report_survivors(problems, comm->rank(), comm, "");
  }
  Communicator comm = init_from_env();
  const int n = comm.size();
  const int old_rank = comm.rank();
  std::optional<Communicator> next;
  auto problems = test::check_shrink_after_death(
      comm, n - 1, false, [] { ::raise(SIGKILL); }, -1, &next);
  if (!next) return report_survivors(problems, old_rank, next, "");
  std::optional<Communicator> grown(next->grow(1));
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  for (auto& p : test::check_exact_allreduce(*grown, all, old_rank)) problems.push_back(p);
  return report_survivors(problems, old_rank, grown,
                          str_cat("ELASTIC OK ", grown->size(), " ranks"));
}

int run_init_mode() {
  if (auto kv = env_var("MP_CHECK_SET")) {
    const size_t eq = kv->find('=');
    const std::string value = kv->substr(eq + 1);
    OpenedStore store = open_store(read_bootstrap_env().store, false,
                                   Clock::now() + std::chrono::seconds(30), Config::from_env());
    store.store->set(kv->substr(0, eq), std::vector<uint8_t>(value.begin(), value.end()));
  }
  Communicator comm = init_from_env();
  comm.barrier();
  std::printf("INIT OK rank %d\n", comm.rank());
  return 0;
}

}  // namespace
}  // namespace chorus

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool small = argc > 2 && std::strcmp(argv[2], "--small") == 0;
  try {
    if (mode == "grid") return chorus::run_grid_mode(small);
    if (mode == "allreduce") return chorus::run_allreduce_mode();
    if (mode == "kill") return chorus::run_kill_mode();
    if (mode == "timeout") return chorus::run_timeout_mode();
    if (mode == "abort") return chorus::run_abort_mode();
    if (mode == "init") return chorus::run_init_mode();
    if (mode == "split") return chorus::run_split_mode();
    if (mode == "recv-any") return chorus::run_recv_any_mode();
    if (mode == "deterministic") return chorus::run_deterministic_mode();
    if (mode == "mismatch") return chorus::run_mismatch_mode();
    if (mode == "stop") return chorus::run_stop_mode();
    if (mode == "window-kill" && argc > 2) return chorus::run_window_kill_mode(std::atoi(argv[2]));
    if (mode == "shrink" && argc > 3)
      return chorus::run_shrink_mode(std::atoi(argv[2]), std::strcmp(argv[3], "inside") == 0,
                                     argc > 4 ? std::atoi(argv[4]) : -1);
    if (mode == "shrink-stop") return chorus::run_shrink_stop_mode();
    if (mode == "revoke") return chorus::run_revoke_mode();
    if (mode == "grow") return chorus::run_grow_mode();
    if (mode == "elastic") return chorus::run_elastic_mode();
    if (mode == "join" && argc > 2) return chorus::run_join_mode(std::atoi(argv[2]));
    if (mode == "join-refused" && argc > 2) return chorus::run_join_refused_mode(argv[2]);
    std::fprintf(stderr,
                 "usage: mp_check grid [--small] | allreduce | kill | window-kill RANK | timeout | "
                 "abort | init | split | recv-any | mismatch | stop | shrink VICTIM between|inside "
                 "[SECOND] | shrink-stop | revoke | grow | elastic\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_check %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
}
