// The fault grid: every row of the registry, on every transport and buffer
// kind it supports, against every fault, with one expected outcome for all.
//
// The cells are generated from the registry, so a new algorithm is in the
// grid the moment it has a row, and FaultGrid.EveryRegistryRowIsReached
// fails, naming the row, if an algorithm declines every cell the grid offers
// it (say, an algorithm that needs more ranks than the grid runs).
//
//   transports:   inproc (threads), shm and tcp (processes: one fork per rank
//                 and cell, a FileStore in a fresh directory, init()), and
//                 "hosts": processes playing two hosts of two ranks
//                 (CHORUS_HOST_ID), joined by shm inside and tcp across, for
//                 the algorithms that need several hosts (hier_*); threads
//                 play hosts of two ranks too
//   buffer kinds: user memory, and shared windows (Communicator::window)
//                 where the transport shares memory (for the algorithms that
//                 also run without windows, which read window buffers as
//                 ordinary memory, at the smallest N only)
//   modes:        ordinary calls, and deterministic reductions
//                 (CallOptions::deterministic) of the collectives that reduce:
//                 every reducing row over threads (its algorithm carries the
//                 integer pass), and the automatic choice (no algorithm
//                 named: the gather road at N = 2) on every link
//   progress:     both CHORUS_PROGRESS modes in every cell: the ranks of a
//                 cell alternate between thread (the call is advanced, and
//                 its failure found, by the progress thread alone: the rank
//                 only watches the Work's flag) and caller, and the cells
//                 alternate which rank starts (support/progress.h)
//   N:            2 and 4 (the sanitizer builds: 2); an algorithm that serves
//                 neither gets the smallest N from 3 to 8 that it serves
//   faults:       the last rank ("odd") differs from the others in one respect
//                   count_large, count_small  twice / half the count
//                   collective                another collective
//                   dtype                     int32 against float32 (same size)
//                   op                        max against sum (reducing ones)
//                   root                      root 1 against 0 (rooted ones)
//                   algorithm                 another algorithm of the collective
//                   deterministic             the ordinary call where the others
//                                             ask for a deterministic one
//                 or something happens to a rank during the call
//                   timeout   rank 0 has a 100 ms per-call timeout; the last
//                             rank enters only after rank 0's call has ended
//                   abort     a second thread of rank 0 aborts 20 ms into the
//                             call; the last rank stays out until it has ended
//                   kill      the last rank dies (SIGKILL; over inproc its
//                             thread returns) while the ranks loop the call
//
// What must hold, whatever the algorithm:
//   - mismatch: every rank's mismatched call raises ErrorCode::mismatch
//     naming both sides ("mismatched calls: ... rank <odd> ...") or returns
//     exactly the data its own call asked for (a rank that only sends may be
//     done before the news arrives), and the AllReduce after it raises
//     mismatch;
//   - timeout: rank 0 raises ErrorCode::timeout naming itself and the
//     collective, or returns the right data without the last rank (its part
//     needed no data of it); it never waits for the last rank past its
//     deadline; the other ranks end with an error or the right data;
//   - abort: rank 0 raises ErrorCode::aborted with the reason, or had
//     finished with the right data before the abort (then its next call
//     raises aborted); it never waits for the last rank;
//   - kill: every survivor's loop ends with ErrorCode::peer_failure, and
//     every call that returned before it returned the right data.
// "Never waits past its deadline" is causal, not timed: the last rank enters
// only once rank 0's call has ended (a gate file), and rank 0's call failing
// to end before that within 8 s shows as the last rank's entry file existing
// when rank 0's call returns.
//
// One file of about 770 lines, on purpose: the cells, the per-rank runners of
// each transport and the outcome rules above are one contract, read top to
// bottom against this comment; the test helpers it shares with other grids
// (inputs, expected outputs) are in perf/perf_check.h and tests/support/.
#include "algorithms/algorithm.h"
#include "core/check.h"
#include "perf/perf_check.h"
#include "schedule/collective.h"
#include "schedule/rank_math.h"
#include "support/progress.h"

#include <chorus/chorus.h>
#include <chorus/testing.h>

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace chorus::test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

enum class Fault {
  count_large,
  count_small,
  collective,
  dtype,
  op,
  root,
  algorithm,
  deterministic,
  timeout,
  abort,
  kill
};
constexpr Fault kFaults[] = {
    Fault::count_large, Fault::count_small, Fault::collective, Fault::dtype,
    Fault::op,          Fault::root,        Fault::algorithm,  Fault::deterministic,
    Fault::timeout,     Fault::abort,       Fault::kill};

std::string_view to_string(Fault f) {
  switch (f) {
    case Fault::count_large:
      return "count_large";
    case Fault::count_small:
      return "count_small";
    case Fault::collective:
      return "collective";
    case Fault::dtype:
      return "dtype";
    case Fault::op:
      return "op";
    case Fault::root:
      return "root";
    case Fault::algorithm:
      return "algorithm";
    case Fault::deterministic:
      return "deterministic";
    case Fault::timeout:
      return "timeout";
    case Fault::abort:
      return "abort";
    case Fault::kill:
      return "kill";
  }
  return "?";
}

bool is_mismatch(Fault f) {
  return f != Fault::timeout && f != Fault::abort && f != Fault::kill;
}

// `hosts`: processes that play hosts of two ranks each (CHORUS_HOST_ID), so
// that the bootstrap joins shm inside a host and tcp across (shm+tcp); only
// for the algorithms that need several hosts (hier_*), at N = 4.
enum class Link { inproc, shm, tcp, hosts };
constexpr Link kLinks[] = {Link::inproc, Link::shm, Link::tcp, Link::hosts};
std::string_view to_string(Link l) {
  switch (l) {
    case Link::inproc:
      return "inproc";
    case Link::shm:
      return "shm";
    case Link::tcp:
      return "tcp";
    case Link::hosts:
      return "hosts";
  }
  return "?";
}
bool shares_memory(Link l) {
  return l == Link::inproc || l == Link::shm;
}
// Ranks per host: threads and the hosts link play hosts of two; shm and tcp
// run on one.
constexpr int kRanksPerHost = 2;
std::vector<int> hosts_of(Link l, int n) {
  return l == Link::inproc || l == Link::hosts ? consecutive_hosts(n, kRanksPerHost)
                                               : std::vector<int>(static_cast<size_t>(n), 0);
}

// 50021 elements (a prime; 195 KiB of float32) cross every algorithm's
// segments and slices; the odd rank's large count doubles it.
constexpr size_t kCount = 50021;

#ifdef CHORUS_REDUCED_GRIDS
constexpr int kGridRanks[] = {2};
#else
constexpr int kGridRanks[] = {2, 4};
#endif

// The call a cell makes: an ordinary one, a deterministic one with the
// cell's algorithm, or a deterministic one with none named (automatic).
enum class Mode { ordinary, deterministic, automatic };

struct Cell {
  const Algorithm* algo;  // automatic: names the collective only
  Link link;
  bool window;
  int n;
  Fault fault;
  Mode mode = Mode::ordinary;
  std::string name() const {
    std::string s =
        str_cat(to_string(link), "_", to_string(algo->collective), "_",
                mode == Mode::automatic ? "auto" : algo->name, window ? "_window" : "_user", "_N",
                n, "_", to_string(fault), mode == Mode::ordinary ? "" : "_deterministic");
    for (char& ch : s)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
  }
};

void PrintTo(const Cell& c, std::ostream* os) {
  *os << c.name();
}

// One collective call as a rank makes it.
struct CallSpec {
  Collective collective = Collective::allreduce;
  size_t count = kCount;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  std::string algorithm;
  milliseconds timeout{10000};
  bool deterministic = false;
};

CollectiveSpec spec_of(const CallSpec& c, int n, int rank, Link link) {
  CollectiveSpec s{c.collective, n, rank, c.count, dtype_size(c.type), c.root};
  s.windows = shares_memory(link);
  s.host_of = std::make_shared<const std::vector<int>>(hosts_of(link, n));
  return s;
}

bool served_on(const Algorithm& a, int n, Link link) {
  CallSpec base;
  base.collective = a.collective;
  return static_cast<bool>(supported_everywhere(a, spec_of(base, n, 0, link)));
}

bool served(const Algorithm& a, int n, Link link) {
  // The hosts link carries what one host cannot: N = 4, two hosts.
  if (link == Link::hosts) return n == 4 && served_on(a, n, link) && !served_on(a, n, Link::shm);
  return served_on(a, n, link);
}

// Another algorithm of the same collective that serves the call, if any.
const Algorithm* other_algorithm(const Algorithm& a, int n, Link link) {
  for (const Algorithm* b : algorithms_for(a.collective))
    if (b != &a && served_on(*b, n, link)) return b;
  return nullptr;
}

// The grid's N for an algorithm on a link: 2 and 4 where served, else the
// smallest N from 3 to 8 that is.
std::vector<int> ranks_for(const Algorithm& a, Link link) {
  std::vector<int> out;
  for (int n : kGridRanks)
    if (served(a, n, link)) out.push_back(n);
  if (out.empty())
    for (int n = 3; n <= 8; ++n)
      if (served(a, n, link)) return {n};
  return out;
}

bool applies(const Algorithm& a, Fault f, int n, Link link, Mode mode) {
  const Collective c = a.collective;
  switch (f) {
    case Fault::deterministic:
      return mode != Mode::ordinary;
    case Fault::count_large:
    case Fault::count_small:
    case Fault::dtype:
      return c != Collective::barrier;
    case Fault::op:
      return reduces(c);
    case Fault::root:
      return rooted(c);
    case Fault::algorithm:
      // The automatic choice may be any algorithm: no other is sure to differ.
      return mode != Mode::automatic && other_algorithm(a, n, link) != nullptr;
    default:
      return true;
  }
}

// Deterministic reductions: every reducing row's integer pass over threads
// at the smallest N, and the automatic choice of each reducing collective
// on inproc, shm and tcp at every N (user buffers; and windows over shm).
bool deterministic_mode(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}
std::vector<Cell> deterministic_cells() {
  std::vector<Cell> cells;
  for (const Algorithm* a : registry_rows()) {
    if (!deterministic_mode(a->collective)) continue;
    const std::vector<int> ns = ranks_for(*a, Link::inproc);
    if (ns.empty()) continue;
    for (Fault f : kFaults)
      if (applies(*a, f, ns.front(), Link::inproc, Mode::deterministic))
        cells.push_back({a, Link::inproc, false, ns.front(), f, Mode::deterministic});
  }
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce}) {
    const Algorithm* first = algorithms_for(c).front();
    for (Link link : {Link::inproc, Link::shm, Link::tcp})
      for (bool window : {false, true}) {
        if (window && link != Link::shm) continue;
        for (int n : kGridRanks)
          for (Fault f : kFaults)
            if (applies(*first, f, n, link, Mode::automatic))
              cells.push_back({first, link, window, n, f, Mode::automatic});
      }
  }
  return cells;
}

std::vector<Cell> all_cells() {
  std::vector<Cell> cells;
  for (const Algorithm* a : registry_rows())
    for (Link link : kLinks)
      for (bool window : {false, true}) {
        if (window && !shares_memory(link)) continue;
        // Window buffers change the path of the one-sided algorithms only
        // (the others read and write them as ordinary memory): those get
        // every N, the others the smallest.
        std::vector<int> ns = ranks_for(*a, link);
        if (window && served(*a, 2, Link::tcp) && ns.size() > 1) ns = {ns.front()};
        for (int n : ns)
          for (Fault f : kFaults)
            if (applies(*a, f, n, link, Mode::ordinary))
              cells.push_back({a, link, window, n, f, Mode::ordinary});
      }
  for (const Cell& d : deterministic_cells()) cells.push_back(d);
  return cells;
}

// The call every rank but the odd one makes, and the odd rank's.
CallSpec base_call(const Cell& cell) {
  CallSpec c;
  c.collective = cell.algo->collective;
  c.algorithm = cell.mode == Mode::automatic ? "" : std::string(cell.algo->name);
  c.deterministic = cell.mode != Mode::ordinary;
  if (c.collective == Collective::barrier) c.count = 0;
  return c;
}

CallSpec odd_call(const Cell& cell) {
  CallSpec c = base_call(cell);
  switch (cell.fault) {
    case Fault::count_large:
      c.count = 2 * kCount;
      break;
    case Fault::count_small:
      c.count = kCount / 2;
      break;
    case Fault::collective:
      c.collective =
          c.collective == Collective::allreduce ? Collective::allgather : Collective::allreduce;
      c.count = kCount;
      c.algorithm = "ring";
      break;
    case Fault::dtype:
      c.type = DataType::int32;
      break;
    case Fault::op:
      c.op = ReduceOp::max;
      break;
    case Fault::root:
      c.root = 1;
      break;
    case Fault::algorithm:
      c.algorithm = std::string(other_algorithm(*cell.algo, cell.n, cell.link)->name);
      break;
    case Fault::deterministic:
      c.deterministic = false;
      break;
    default:
      break;
  }
  return c;
}

// The bytes of a call's input and output on `rank`.
std::pair<size_t, size_t> call_bytes(const CallSpec& c, int n, int rank, Link link) {
  if (c.collective == Collective::barrier) return {0, 0};
  const BufferCounts counts = buffer_counts(spec_of(c, n, rank, link));
  return {counts.input * dtype_size(c.type), counts.output * dtype_size(c.type)};
}

// A rank's buffers for the cell's calls: large enough for its own call and
// for the odd rank's (windows are collective: every rank makes the same).
struct Buffers {
  std::vector<std::byte> in_mem, out_mem;
  Window in_win, out_win;
  void* in = nullptr;
  void* out = nullptr;
};

void make_buffers(Communicator& comm, const Cell& cell, Buffers& b) {
  size_t in_bytes = 64;
  size_t out_bytes = 64;
  for (const CallSpec& c : {base_call(cell), odd_call(cell)})
    for (int r = 0; r < comm.size(); ++r) {
      const auto [i, o] = call_bytes(c, comm.size(), r, cell.link);
      in_bytes = std::max(in_bytes, i);
      out_bytes = std::max(out_bytes, o);
    }
  if (cell.window) {
    b.in_win = comm.window(in_bytes);
    b.out_win = comm.window(out_bytes);
    b.in = b.in_win.data();
    b.out = b.out_win.data();
  } else {
    b.in_mem.resize(in_bytes);
    b.out_mem.resize(out_bytes);
    b.in = b.in_mem.data();
    b.out = b.out_mem.data();
  }
}

// Makes one call; "" when it returned exactly what it asked for, else what
// was wrong. Throws what the call throws.
std::string run_call(Communicator& comm, const CallSpec& c, const Buffers& b) {
  CallOptions o;
  o.algorithm = c.algorithm;
  o.timeout = c.timeout;
  o.deterministic = c.deterministic;
  if (!has_data(c.collective)) {
    test::finish(comm, comm.submit(Call::barrier(o)));
    return {};
  }
  const perf::CheckCase check{c.collective, c.type,  c.op,  comm.size(),
                              comm.rank(),  c.count, c.root};
  const BufferCounts counts = buffer_counts(spec_of(c, comm.size(), comm.rank(), Link::tcp));
  perf::fill_input(check, b.in);
  perf::poison(c.type, b.out, counts.output);
  test::finish(comm, comm.submit({Call::Kind::collective, c.collective, b.in, b.out, c.count,
                                  c.type, c.op, c.root, -1, o}));
  const size_t wrong = perf::count_wrong(check, b.out);
  if (wrong == 0) return {};
  return str_cat(wrong, " of ", counts.output, " output elements wrong");
}

// Files in the cell's directory that order the ranks across threads and
// processes alike.
struct Gates {
  fs::path dir;
  void open(const std::string& name) const { std::ofstream(dir / name) << "1"; }
  bool is_open(const std::string& name) const { return fs::exists(dir / name); }
  // Waits until `name` is open, at most `limit`; whether it opened.
  bool wait(const std::string& name, milliseconds limit) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!is_open(name)) {
      if (std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(milliseconds(2));
    }
    return true;
  }
};

constexpr milliseconds kGateLimit{8000};
constexpr milliseconds kRankZeroTimeout{100};
constexpr milliseconds kAbortAfter{20};
constexpr milliseconds kPatient{20000};
const char* const kAbortReason = "fault grid: operator abort";

std::string code_of(const Error& e) {
  return std::string(to_string(e.code()));
}

std::string mismatch_body(Communicator& comm, const Cell& cell) {
  const int odd = comm.size() - 1;
  const CallSpec mine = comm.rank() == odd ? odd_call(cell) : base_call(cell);
  Buffers b;
  std::string problems;
  const std::string odd_named = str_cat("rank ", odd, " ");
  auto expect_mismatch = [&](const Error& e, const char* call) {
    const std::string msg = e.what();
    if (e.code() != ErrorCode::mismatch)
      problems += str_cat(call, " raised ", code_of(e), " instead of mismatch: ", msg, "\n");
    else if (msg.find("mismatched calls: ") == std::string::npos ||
             msg.find(odd_named) == std::string::npos)
      problems += str_cat(call, "'s error does not name both sides: ", msg, "\n");
  };
  try {
    // The windows first: a rank still making them when a faster one has
    // found the mismatch learns of it there, as at any call before it.
    make_buffers(comm, cell, b);
    const std::string wrong = run_call(comm, mine, b);
    if (!wrong.empty()) problems += "the mismatched call returned wrong data: " + wrong + "\n";
  } catch (const Error& e) {
    expect_mismatch(e, "the mismatched call");
  }
  std::vector<int32_t> v(64, comm.rank() + 1);
  CallOptions ring;
  ring.algorithm = "ring";
  ring.timeout = milliseconds(10000);
  try {
    comm.allreduce(v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum, ring);
    problems += "the AllReduce after the mismatched call returned\n";
  } catch (const Error& e) {
    expect_mismatch(e, "the AllReduce after it");
  }
  return problems;
}

// The last rank of the timeout and abort cells: enters once rank 0's call
// has ended (or the gate's limit passed), saying so first.
std::string late_rank(Communicator& comm, const Cell& cell, const Gates& gates, Buffers& b) {
  gates.wait("rank0_done", kGateLimit);
  gates.open("late_entered");
  CallSpec c = base_call(cell);
  c.timeout = milliseconds(5000);
  try {
    const std::string wrong = run_call(comm, c, b);
    if (!wrong.empty()) return "the late rank's call returned wrong data: " + wrong + "\n";
  } catch (const Error&) {
  }
  return {};
}

// A rank that is neither rank 0 nor the last: an error, or the right data.
std::string bystander(Communicator& comm, const Cell& cell, Buffers& b) {
  CallSpec c = base_call(cell);
  c.timeout = kPatient;
  try {
    const std::string wrong = run_call(comm, c, b);
    if (!wrong.empty())
      return str_cat("rank ", comm.rank(), "'s call returned wrong data: ", wrong, "\n");
  } catch (const Error&) {
  }
  return {};
}

// Rank 0's call in the timeout and abort cells, with its buffers: its
// error is judged by `judge` ("" when right); returning is right only with
// the right data and before the last rank entered.
std::string rank_zero_call(Communicator& comm, const Cell& cell, const Gates& gates,
                           const Buffers& b, milliseconds timeout,
                           const std::function<std::string(const Error&)>& judge) {
  CallSpec c = base_call(cell);
  c.timeout = timeout;
  std::string problems;
  try {
    const std::string wrong = run_call(comm, c, b);
    if (gates.is_open("late_entered"))
      problems += "rank 0's call waited for the late rank instead of ending\n";
    else if (!wrong.empty())
      problems += "rank 0's call returned wrong data: " + wrong + "\n";
  } catch (const Error& e) {
    problems += judge(e);
    if (gates.is_open("late_entered"))
      problems += "rank 0's call ended only after the late rank entered\n";
  }
  return problems;
}

// The timeout and abort cells: the last rank enters late, the ranks between
// stand by, rank 0 runs `rank_zero` and then lets the last rank in.
std::string late_rank_cell(Communicator& comm, const Cell& cell, const Gates& gates,
                           const std::function<std::string(const Buffers&)>& rank_zero) {
  Buffers b;
  make_buffers(comm, cell, b);
  if (comm.rank() == comm.size() - 1) return late_rank(comm, cell, gates, b);
  if (comm.rank() != 0) return bystander(comm, cell, b);
  const std::string problems = rank_zero(b);
  gates.open("rank0_done");
  return problems;
}

std::string timeout_body(Communicator& comm, const Cell& cell, const Gates& gates) {
  return late_rank_cell(comm, cell, gates, [&](const Buffers& b) {
    return rank_zero_call(comm, cell, gates, b, kRankZeroTimeout, [&](const Error& e) {
      const std::string msg = e.what();
      if (e.code() != ErrorCode::timeout)
        return str_cat("rank 0 raised ", code_of(e), " instead of timeout: ", msg, "\n");
      if (msg.find("rank 0") == std::string::npos ||
          msg.find(to_string(cell.algo->collective)) == std::string::npos)
        return "rank 0's timeout does not name the rank and the collective: " + msg + "\n";
      return std::string();
    });
  });
}

std::string expect_aborted(const Error& e, const char* call) {
  const std::string msg = e.what();
  if (e.code() == ErrorCode::aborted && msg.find(kAbortReason) != std::string::npos) return {};
  return str_cat(call, " raised ", code_of(e), " instead of aborted with the reason: ", msg, "\n");
}

std::string abort_body(Communicator& comm, const Cell& cell, const Gates& gates) {
  return late_rank_cell(comm, cell, gates, [&](const Buffers& b) {
    std::thread aborter([&comm] {
      std::this_thread::sleep_for(kAbortAfter);
      comm.abort(kAbortReason);
    });
    std::string problems = rank_zero_call(comm, cell, gates, b, kPatient, [](const Error& e) {
      return expect_aborted(e, "rank 0's call");
    });
    aborter.join();
    try {
      comm.barrier();
      problems += "a barrier after the abort returned\n";
    } catch (const Error& e) {
      problems += expect_aborted(e, "the barrier after the abort");
    }
    return problems;
  });
}

// `die` ends the victim: SIGKILL over processes, a return over threads.
std::string kill_body(Communicator& comm, const Cell& cell, bool processes) {
  Buffers b;
  make_buffers(comm, cell, b);
  CallSpec c = base_call(cell);
  c.timeout = kPatient;
  const int victim = comm.size() - 1;
  if (comm.rank() == victim) {
    std::thread killer;
    for (int call = 0; call < 1000000; ++call) {
      if (call == 2) {
        if (!processes) return {};  // the thread's return is its death
        killer = std::thread([] {
          std::this_thread::sleep_for(milliseconds(1));
          ::raise(SIGKILL);
        });
      }
      try {
        run_call(comm, c, b);
      } catch (const Error&) {
      }
    }
    killer.join();
    return "the victim outlived its own SIGKILL\n";
  }
  for (int call = 0; call < 1000000; ++call) {
    try {
      const std::string wrong = run_call(comm, c, b);
      if (!wrong.empty()) return str_cat("call ", call, " returned wrong data: ", wrong, "\n");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::peer_failure)
        return str_cat("raised ", code_of(e), " instead of peer_failure: ", e.what(), "\n");
      return {};
    }
  }
  return "a million calls returned although the victim died\n";
}

std::string rank_body(Communicator& comm, const Cell& cell, const Gates& gates, bool processes) {
  // Both progress modes in every cell: its ranks alternate between them
  // (support/progress.h), and which rank starts follows the cell.
  test::use_progress(
      comm, test::alternating_progress(comm.rank(), std::hash<std::string>{}(cell.name())));
  if (is_mismatch(cell.fault)) return mismatch_body(comm, cell);
  if (cell.fault == Fault::timeout) return timeout_body(comm, cell, gates);
  if (cell.fault == Fault::abort) return abort_body(comm, cell, gates);
  return kill_body(comm, cell, processes);
}

// A model that makes no calibration run: the grid names its algorithms.
constexpr const char* kTuningFile =
    R"({"format": "chorus-tuning", "version": 1, "links": {)"
    R"("shm": {"alpha_s": 1e-6, "beta_Bps": 1e10}, "tcp": {"alpha_s": 2e-5, "beta_Bps": 1e9}}})";

// The write mode of the cell's calls (exec/executor.h): the N = 2 cells
// (the sanitizer builds' whole grid) write their output with non-temporal
// stores, as calls of 16 MiB and more do, the N = 4 cells through the
// caches, so both modes keep the contract on every row.
const char* stream_bytes(const Cell& cell) {
  return cell.n == 2 ? "4096" : "0";
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "chorus-fault-XXXXXX").string();
    CHORUS_CHECK(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Each rank's problems ("" when none), by rank; `killed` the ranks that died
// of SIGKILL.
struct Outcome {
  std::vector<std::string> problems;
  std::vector<bool> killed;
  std::string harness;  // what went wrong around the ranks
};

Outcome run_threads(const Cell& cell, const Gates& gates) {
  Outcome out;
  out.problems.assign(static_cast<size_t>(cell.n), "");
  out.killed.assign(static_cast<size_t>(cell.n), false);
  std::mutex mu;
  // Set for every cell: the threads' Config reads it at run_ranks.
  ::setenv("CHORUS_STREAM_BYTES", stream_bytes(cell), 1);
  try {
    testing::run_ranks(hosts_of(cell.link, cell.n), [&](Communicator& comm) {
      const std::string p = rank_body(comm, cell, gates, false);
      std::lock_guard lock(mu);
      out.problems[static_cast<size_t>(comm.rank())] = p;
    });
  } catch (const std::exception& e) {
    out.harness = str_cat("run_ranks rethrew: ", e.what());
  }
  return out;
}

Outcome run_processes(const Cell& cell, const Gates& gates, const fs::path& dir) {
  Outcome out;
  const auto n = static_cast<size_t>(cell.n);
  out.problems.assign(n, "");
  out.killed.assign(n, false);
  const fs::path tuning = dir / "tuning.json";
  std::ofstream(tuning) << kTuningFile;
  const std::string store = "file://" + (dir / "store").string();
  std::vector<pid_t> pids(n, -1);
  std::vector<int> reads(n, -1);
  for (size_t r = 0; r < n; ++r) {
    int fds[2];
    CHORUS_CHECK(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    CHORUS_CHECK(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      ::setenv("CHORUS_TUNING_FILE", tuning.c_str(), 1);
      ::setenv("CHORUS_STREAM_BYTES", stream_bytes(cell), 1);
      if (cell.link == Link::hosts)
        ::setenv("CHORUS_HOST_ID",
                 str_cat("fault-grid-host-", hosts_of(cell.link, cell.n)[r]).c_str(), 1);
      std::string result;
      try {
        InitOptions o;
        o.rank = static_cast<int>(r);
        o.world_size = cell.n;
        o.store = store;
        // The hosts link: whatever the bootstrap joins (shm+tcp).
        if (cell.link != Link::hosts) o.transport = std::string(to_string(cell.link));
        o.timeout = milliseconds(20000);
        Communicator comm = init(o);
        result = rank_body(comm, cell, gates, true);
      } catch (const std::exception& e) {
        result = str_cat("rank ", r, " threw outside its calls: ", e.what(), "\n");
      }
      size_t at = 0;
      while (at < result.size()) {
        const ssize_t w = ::write(fds[1], result.data() + at, result.size() - at);
        if (w <= 0) break;
        at += static_cast<size_t>(w);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    pids[r] = pid;
    reads[r] = fds[0];
  }
  // Read every rank's report while they run, then reap them; a cell that
  // has not ended within a minute is killed and reported.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  size_t open = n;
  while (open > 0) {
    std::vector<pollfd> p;
    std::vector<size_t> who;
    for (size_t r = 0; r < n; ++r)
      if (reads[r] >= 0) {
        p.push_back({reads[r], POLLIN, 0});
        who.push_back(r);
      }
    const auto left =
        std::chrono::duration_cast<milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out.harness = "the cell did not end within 60 s; its ranks were killed";
      break;
    }
    ::poll(p.data(), p.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    for (size_t k = 0; k < p.size(); ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t got = ::read(p[k].fd, buf, sizeof buf);
      if (got > 0) {
        out.problems[who[k]].append(buf, static_cast<size_t>(got));
      } else {
        ::close(p[k].fd);
        reads[who[k]] = -1;
        --open;
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (reads[r] >= 0) {
      ::kill(pids[r], SIGKILL);
      ::close(reads[r]);
    }
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    out.killed[r] = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
      out.problems[r] += str_cat("died of signal ", WTERMSIG(status), "\n");
  }
  return out;
}

class FaultGrid : public ::testing::TestWithParam<Cell> {};

TEST_P(FaultGrid, KeepsTheContract) {
  const Cell& cell = GetParam();
  TempDir dir;
  const Gates gates{dir.path};
  const bool processes = cell.link != Link::inproc;
  const Outcome out = processes ? run_processes(cell, gates, dir.path) : run_threads(cell, gates);
  EXPECT_EQ(out.harness, "");
  for (int r = 0; r < cell.n; ++r) {
    const auto i = static_cast<size_t>(r);
    const bool victim = cell.fault == Fault::kill && r == cell.n - 1;
    EXPECT_EQ(out.problems[i], "") << "rank " << r;
    if (processes) {
      EXPECT_EQ(out.killed[i], victim)
          << "rank " << r << (victim ? " should have died" : " died of SIGKILL");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, FaultGrid, ::testing::ValuesIn(all_cells()),
                         [](const auto& param_info) { return param_info.param.name(); });

// Every row of the registry is in the grid, on every transport where it
// serves some N from 2 to 8, with every fault that applies to its
// collective (the algorithm fault where the collective has another
// algorithm for the same call).
TEST(FaultGridCoverage, EveryRegistryRowIsReached) {
  const std::vector<Cell> cells = all_cells();
  std::string unreached;
  for (const Algorithm* a : registry_rows())
    for (Link link : kLinks) {
      if (link == Link::inproc && deterministic_mode(a->collective) &&
          std::none_of(cells.begin(), cells.end(),
                       [&](const Cell& x) { return x.algo == a && x.mode == Mode::deterministic; }))
        unreached += str_cat(to_string(a->collective), "/", a->name, ": no deterministic cell\n");
      bool served_somewhere = false;
      for (int n = 2; n <= 8; ++n) served_somewhere |= served(*a, n, link);
      if (!served_somewhere) continue;
      const Collective c = a->collective;
      std::vector<Fault> required{Fault::collective, Fault::timeout, Fault::abort, Fault::kill};
      if (c != Collective::barrier)
        required.insert(required.end(), {Fault::count_large, Fault::count_small, Fault::dtype});
      if (reduces(c)) required.push_back(Fault::op);
      if (rooted(c)) required.push_back(Fault::root);
      for (int n = 2; n <= 8; ++n)
        if (served(*a, n, link) && other_algorithm(*a, n, link) != nullptr) {
          required.push_back(Fault::algorithm);
          break;
        }
      for (Fault f : required)
        if (std::none_of(cells.begin(), cells.end(), [&](const Cell& x) {
              return x.algo == a && x.link == link && x.fault == f && x.mode == Mode::ordinary;
            }))
          unreached += str_cat(to_string(c), "/", a->name, " over ", to_string(link), ": ",
                               to_string(f), "\n");
    }
  EXPECT_EQ(unreached, "") << "registry rows the fault grid does not reach";
}

// Deterministic reductions are a mode of every reducing collective: their
// automatic choice meets every fault on every link that runs them, at
// every N of the grid.
TEST(FaultGridCoverage, DeterministicModeIsReachedOnEveryLink) {
  const std::vector<Cell> cells = all_cells();
  std::string unreached;
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce})
    for (Link link : {Link::inproc, Link::shm, Link::tcp})
      for (int n : kGridRanks)
        for (Fault f : kFaults) {
          if (f == Fault::algorithm || (f == Fault::root && !rooted(c))) continue;
          if (std::none_of(cells.begin(), cells.end(), [&](const Cell& x) {
                return x.mode == Mode::automatic && x.algo->collective == c && x.link == link &&
                       x.n == n && x.fault == f;
              }))
            unreached += str_cat(to_string(c), " over ", to_string(link), " N=", n, ": ",
                                 to_string(f), "\n");
        }
  EXPECT_EQ(unreached, "") << "deterministic calls the fault grid does not reach";
}

// The one-sided algorithms are in the grid with their buffers in windows.
TEST(FaultGridCoverage, OneSidedAlgorithmsRunOnWindows) {
  const std::vector<Cell> cells = all_cells();
  size_t one_sided = 0;
  for (const Algorithm* a : registry_rows()) {
    if (served(*a, 2, Link::tcp) || !served(*a, 2, Link::shm)) continue;
    ++one_sided;
    for (Link link : {Link::inproc, Link::shm})
      for (bool window : {false, true})
        EXPECT_TRUE(std::any_of(
            cells.begin(), cells.end(),
            [&](const Cell& c) { return c.algo == a && c.link == link && c.window == window; }))
            << a->name << " over " << to_string(link) << (window ? " on windows" : "");
  }
  EXPECT_GE(one_sided, 2u) << "the registry's one-sided algorithms (one_shot, two_shot)";
}

}  // namespace
}  // namespace chorus::test
