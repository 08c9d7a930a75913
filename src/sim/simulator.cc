#include "sim/simulator.h"

#include "core/check.h"
#include "schedule/matching.h"
#include "sim/big_vector.h"
#include "sim/event_queue.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>

#include <sys/mman.h>

namespace chorus {
namespace {

using sim_internal::BigVector;
using sim_internal::Event;
using sim_internal::EventKind;
using sim_internal::EventQueue;

constexpr uint32_t kNone = kNoGlobalOp;
// How many events ahead the run prefetches an op's state.
constexpr size_t kLookahead = 64;

// What a hop carries: a message, or a get's data (which books a copy's memory
// traffic); a get's first hop holds nothing of the rank it reads from.
enum class HopKind : uint8_t { message, get_first, get_forward };

// A message or a get in flight over more than one hop.
struct Flight {
  uint32_t recv;      // global op id of the receive (or get) it delivers to
  uint32_t next_hop;  // index into Sim::hops_ of the hop to request next
  uint32_t end_hop;   // one past its last hop
  double bytes;
  HopKind kind;  // of the hops still to come: message or get_forward
};

// What the run needs of one op, in one place: an event touches one op's state
// in one cache line or two rather than a line in each of a dozen arrays.
// 32 bytes, two to a cache line: at a million ops and more, this array is
// most of the run's memory.
struct OpState {
  double t = 0;           // receives, waits: when they started or were delivered, whichever
                          // came first; gets: when they started
  uint32_t count = 0;     // its element count's number: Sim::bytes_[count] is its bytes
  uint32_t blockers = 0;  // deps not yet done, + 1 while the channel predecessor has not started
  uint32_t chan_next = kNone;
  // The matched op of a send or receive, a signal or wait; a get's peer rank.
  uint32_t partner = kNone;
  // Its dependents: Sim::dependents_[dep_begin, next op's dep_begin) (unless
  // Sim::shared_deps_).
  uint32_t dep_begin = 0;
  uint32_t bits = 0;  // rank << 8 | kind << 4 | flags (kStarted | kDone | kReady | kArrived)

  int rank() const { return static_cast<int>(bits >> 8); }
  OpKind kind() const { return static_cast<OpKind>((bits >> 4) & 15); }
};
static_assert(sizeof(OpState) == 32);
static_assert(kOpKindCount <= 16);
constexpr uint32_t kStarted = 1;
constexpr uint32_t kDone = 2;
constexpr uint32_t kReady = 4;    // a receive, get or wait that has started
constexpr uint32_t kArrived = 8;  // a receive or wait whose delivery time is known
// Ranks must fit OpState::bits.
constexpr size_t kMaxRanks = size_t{1} << 24;

class Sim {
 public:
  Sim(ProgramSource& programs, const Topology& topo, const SimOptions& opt)
      : source_(programs), topo_(topo), opt_(opt) {}

  SimResult run();

 private:
  void index();
  uint32_t count_id(size_t count);
  struct Side;
  void meet(const Side& send, const Side& recv);
  [[noreturn]] void fail_matching() const;
  [[noreturn]] void fail_index(const std::string& message) const;
  void check_one_sided(size_t r, size_t i, OpKind kind, int peer, uint32_t flag);
  // Rank r's op i, described as its Program has it: for errors.
  std::string describe_op(size_t r, size_t i) const {
    return describe(source_.program(static_cast<int>(r)).ops[i]);
  }
  void match_flags();
  void prefetch_ahead() const;
  void push(double t, EventKind kind, uint32_t id) { queue_.push(t, kind, id); }
  double book(const Hop& hop, double t, double bytes, HopKind kind = HopKind::message);
  void transfer(uint32_t g, int from, int to, double t, double bytes, HopKind kind);
  double work(int rank, double t, double seconds, double bytes, double traffic_per_byte);
  size_t engine(int rank) const;
  double take_cores(int a, int b, double s, size_t* got);
  double book_memory(int host, double s, double traffic);
  // The share of `bytes` that reaches DRAM (machine_model.h); 1 without
  // compute rates.
  double streaming(double bytes) const {
    return opt_.copy != nullptr ? streaming_fraction(*opt_.copy, bytes) : 1.0;
  }
  void start(uint32_t g, double t);
  void start_one(uint32_t g, double t);
  void finish(uint32_t g, double t);
  void deliver(uint32_t recv, double t);
  void receive_ready(uint32_t g, double t);
  // Op g as its rank's Program has it, asked of the source again: for errors.
  Op op(uint32_t g) const {
    const int r = ops_[g].rank();
    return source_.program(r).ops[g - base_[static_cast<size_t>(r)]];
  }
  double bytes_of(const OpState& s) const { return bytes_[s.count]; }

  ProgramSource& source_;
  const Topology& topo_;
  SimOptions opt_;

  // Per op, by global id (rank r's op i is base_[r] + i), and one more whose
  // dep_begin ends the last op's dependents.
  std::vector<uint32_t> base_;
  BigVector<OpState> ops_;
  BigVector<uint32_t> dependents_;
  // Where every rank has one shape (ProgramSource::shape, PeerRename::shape):
  // shared_deps_, and the dependents of rank r's op i are base_[r] +
  // local_deps_[local_begin_[i] .. local_begin_[i + 1]), not dependents_.
  bool shared_deps_ = false;
  int shape_ = -1;
  std::vector<uint32_t> local_begin_, local_deps_;
  void unshare_deps(size_t ranks, uint32_t& next_dep);
  // The element counts the ops have, each once, and their bytes; count_id's
  // map from a count to its number, and a small cache of it.
  std::vector<size_t> counts_;
  std::vector<double> bytes_;
  std::unordered_map<size_t, uint32_t> count_ids_;
  struct CountSlot {
    size_t count = SIZE_MAX;
    uint32_t id = 0;
  };
  std::array<CountSlot, 64> count_cache_{};
  // One rank's side of a channel with `peer`: its sends to the peer (dir 0)
  // or its receives from it (dir 1), the first op and how many; the rest
  // follow through chan_next.
  struct Side {
    int peer;
    uint32_t dir;
    uint32_t head;
    uint32_t len;
  };
  // pending_[b]: the sides of the channels between earlier ranks and rank b,
  // by (peer, dir), waiting for b's to be read; met and freed then.
  std::vector<std::vector<Side>> pending_;
  std::vector<Side> mine_;  // the rank being read's sides with earlier ranks

  std::vector<double> send_free_, recv_free_, link_free_;
  // Per rank: when its CPU is free for local work (copies, reductions). A
  // class that takes turns at a hop's size moves the bytes with the CPUs of
  // both ends, so such a hop holds them too; on other classes local work
  // overlaps the ports' transfers.
  std::vector<double> cpu_free_;
  std::vector<double> port_busy_, link_busy_;
  // Hosts of the machine model: memory free time per host; core free times,
  // host h's at core_base_[h] .. core_base_[h + 1].
  std::vector<double> mem_free_, core_free_;
  std::vector<size_t> core_base_;
  std::vector<Hop> hops_;
  std::vector<Hop> route_;
  std::vector<Flight> flights_;
  // Signals and waits, keyed by (signalling rank, waiting rank, flag), for
  // match_flags.
  struct FlagOp {
    uint64_t key;
    uint32_t g;
    bool wait;
  };
  std::vector<FlagOp> flag_ops_;

  EventQueue queue_;
  SimResult result_;
  std::vector<OpTime> times_;  // by global op id, with record_ops
};

// Reads the Programs one rank at a time, in rank order, into the per-op
// state, and links each channel's ops through chan_next on the way; the
// sends and receives of each channel are met once all ranks are read
// (meet_channels). Each op's state is written once, in order; its deps and
// channel predecessor are earlier ops of its rank, already there. Deps name
// ops of the same rank, so each rank's dependents are laid out while its ops
// are still in cache. Only the rank being read need exist as a Program.
void Sim::index() {
  const int n = source_.nranks();
  const auto un = static_cast<size_t>(n);
  if (un >= kMaxRanks)
    fail(ErrorCode::invalid_argument, "simulate: ", n, " ranks, more than ", kMaxRanks - 1);
  base_.resize(un + 1);
  // A channel's first and last ops and length wait in first/last/len, by
  // direction (0 send, 1 receive) and peer, until its rank's ops are read.
  std::vector<uint32_t> last[2] = {std::vector<uint32_t>(un, kNone),
                                   std::vector<uint32_t>(un, kNone)};
  std::vector<uint32_t> first[2] = {std::vector<uint32_t>(un), std::vector<uint32_t>(un)};
  std::vector<uint32_t> len[2] = {std::vector<uint32_t>(un, 0), std::vector<uint32_t>(un, 0)};
  std::vector<int> peers[2];
  pending_.assign(un, {});
  const auto elem = static_cast<double>(opt_.elem_size);
  size_t total = 0;
  uint32_t next_dep = 0;  // where the next rank's dependents start
  for (size_t r = 0; r < un; ++r) {
    PeerRename rename;
    const auto& ops = source_.shape(static_cast<int>(r), rename).ops;
    const auto b = static_cast<uint32_t>(total);
    base_[r] = b;
    total += ops.size();
    if (total >= kNone)
      fail(ErrorCode::invalid_argument, "simulate: more than 2^32 - 1 ops in all");
    size_t ndeps = 0;
    for (const Op& o : ops) ndeps += o.deps.size();
    if (r == 0) {
      // Room for N ranks like rank 0, twice over: reserved, not touched, so
      // that ranks with more ops than it seldom move the arrays.
      const size_t want = ops.size() * un;
      ops_.reserve(std::min<size_t>(kNone, std::min(2 * want, want + (size_t{1} << 24)) + 1));
      shape_ = rename.shape;
      shared_deps_ = shape_ >= 0;
    } else if (shared_deps_ && (rename.shape != shape_ || ops.size() != base_[1])) {
      unshare_deps(r, next_dep);
    }
    if (!shared_deps_) {
      if (next_dep + ndeps >= kNone)
        fail(ErrorCode::invalid_argument, "simulate: more than 2^32 - 1 deps in all");
      if (dependents_.capacity() == 0) {
        const size_t deps = ndeps * un;
        dependents_.reserve(std::min<size_t>(kNone, std::min(2 * deps, deps + (size_t{1} << 24))));
      }
      dependents_.resize(next_dep + ndeps);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      const auto g = b + static_cast<uint32_t>(i);
      OpState& s = ops_.emplace_back();
      s.bits = static_cast<uint32_t>(r) << 8 | static_cast<uint32_t>(o.kind) << 4;
      s.count = count_id(op_count(o));
      s.blockers = static_cast<uint32_t>(o.deps.size());
      for (OpIndex d : o.deps) {
        if (d >= i) {
          const OpIndex bad = d;
          fail_index(str_cat("simulate: rank ", r, " op ", i, " (", describe_op(r, i),
                             ") depends on op ", bad, ", which is not an earlier op"));
        }
        ++ops_[b + d].dep_begin;  // for now, the number of its dependents
      }
      const int peer = o.peer >= 0 && o.peer < n ? rename(o.peer) : o.peer;
      if (has_peer(o.kind)) {
        if (peer < 0 || peer >= n || static_cast<size_t>(peer) == r) fail_matching();
        const int dir = o.kind == OpKind::send ? 0 : 1;
        const auto up = static_cast<size_t>(peer);
        const uint32_t prev = last[dir][up];
        if (prev != kNone) {
          ++s.blockers;
          ops_[prev].chan_next = g;
        } else {
          peers[dir].push_back(peer);
          first[dir][up] = g;
        }
        last[dir][up] = g;
        ++len[dir][up];
      }
      if (is_one_sided(o.kind)) {
        check_one_sided(r, i, o.kind, peer, o.flag);
        if (reads_remote(o.kind)) s.partner = static_cast<uint32_t>(peer);
      }
    }
    // The rank's channels: a side with a later rank waits for that rank; a
    // side with an earlier rank meets the side that rank left, by (peer,
    // dir) with dirs crossed: this rank's sends meet the peer's receives.
    const auto ir = static_cast<int>(r);
    for (uint32_t dir = 0; dir < 2; ++dir) {
      for (int p : peers[dir]) {
        const auto up = static_cast<size_t>(p);
        const Side side{p, dir, first[dir][up], len[dir][up]};
        if (p > ir)
          pending_[up].push_back({ir, dir, side.head, side.len});
        else
          mine_.push_back(side);
        last[dir][up] = kNone;
        len[dir][up] = 0;
      }
      peers[dir].clear();
    }
    std::sort(mine_.begin(), mine_.end(), [](const Side& x, const Side& y) {
      return x.peer != y.peer ? x.peer < y.peer : x.dir > y.dir;
    });
    std::vector<Side>& theirs = pending_[r];
    if (theirs.size() != mine_.size()) fail_matching();
    for (size_t j = 0; j < mine_.size(); ++j) {
      const Side& m = mine_[j];
      const Side& t = theirs[j];
      if (m.peer != t.peer || m.dir == t.dir || m.len != t.len) fail_matching();
      if (m.dir == 0)
        meet(m, t);
      else
        meet(t, m);
    }
    mine_.clear();
    std::vector<Side>().swap(theirs);
    // The rank's dependents in CSR form, each op's in ascending order:
    // dep_begin becomes the end of the op's range, then is counted back down
    // to its start while the ops are visited last to first. With one shape
    // for all, rank 0's are the only ones kept, by op index.
    if (shared_deps_) {
      if (r == 0) {
        local_begin_.assign(ops.size() + 1, 0);
        for (size_t i = 0; i < ops.size(); ++i)
          local_begin_[i + 1] = local_begin_[i] + ops_[i].dep_begin;
        local_deps_.resize(local_begin_.back());
        for (size_t i = ops.size(); i-- > 0;)
          for (auto d = ops[i].deps.rbegin(); d != ops[i].deps.rend(); ++d)
            local_deps_[--ops_[*d].dep_begin + local_begin_[*d]] = static_cast<uint32_t>(i);
      }
      continue;
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      next_dep += ops_[b + i].dep_begin;
      ops_[b + i].dep_begin = next_dep;
    }
    for (size_t i = ops.size(); i-- > 0;)
      for (auto d = ops[i].deps.rbegin(); d != ops[i].deps.rend(); ++d)
        dependents_[--ops_[b + *d].dep_begin] = b + static_cast<uint32_t>(i);
  }
  base_[un] = static_cast<uint32_t>(total);
  ops_.emplace_back().dep_begin = next_dep;
  bytes_.resize(counts_.size());
  for (size_t c = 0; c < counts_.size(); ++c) bytes_[c] = static_cast<double>(counts_[c]) * elem;
  if (!flag_ops_.empty()) match_flags();
}

// Rank `ranks` has a shape of its own: the dependents of ranks 0 ..
// ranks - 1, which shared rank 0's, are laid out in dependents_ as if read
// without sharing.
void Sim::unshare_deps(size_t ranks, uint32_t& next_dep) {
  shared_deps_ = false;
  const size_t per_rank = local_deps_.size();
  if (ranks * per_rank >= kNone)
    fail(ErrorCode::invalid_argument, "simulate: more than 2^32 - 1 deps in all");
  const size_t deps = per_rank * (base_.size() - 1);
  dependents_.reserve(std::min<size_t>(kNone, std::min(2 * deps, deps + (size_t{1} << 24))));
  dependents_.resize(ranks * per_rank);
  for (size_t r = 0; r < ranks; ++r) {
    const uint32_t b = base_[r];
    for (size_t i = 0; i + 1 < local_begin_.size(); ++i)
      ops_[b + i].dep_begin = next_dep + local_begin_[i];
    for (size_t k = 0; k < per_rank; ++k) dependents_[next_dep + k] = b + local_deps_[k];
    next_dep += static_cast<uint32_t>(per_rank);
  }
}

// The number of an element count in counts_, a new one the first time.
uint32_t Sim::count_id(size_t count) {
  CountSlot& slot = count_cache_[(count * 0x9E3779B97F4A7C15ull) >> 58];
  if (slot.count == count) return slot.id;
  auto [it, added] = count_ids_.try_emplace(count, static_cast<uint32_t>(counts_.size()));
  if (added) counts_.push_back(count);
  slot = {count, it->second};
  return it->second;
}

// Meets the k-th send of a channel with its k-th receive (matching.h's
// rule, as match_programs_flat meets them), sides of equal length. Any
// problem, a receive without a send, a send without a receive or unequal
// counts, is named by match_programs_flat (fail_matching), so that the
// simulator reports the same first problem as the matching module.
void Sim::meet(const Side& send, const Side& recv) {
  uint32_t x = send.head, y = recv.head;
  for (uint32_t k = 0; k < send.len; ++k) {
    OpState& snd = ops_[x];
    OpState& rcv = ops_[y];
    if (snd.count != rcv.count) fail_matching();
    snd.partner = y;
    rcv.partner = x;
    x = snd.chan_next;
    y = rcv.chan_next;
  }
}

// A problem with the matching of sends and receives: all Programs are asked
// for again, and match_programs_flat names the first one.
void Sim::fail_matching() const {
  std::vector<Program> programs;
  programs.reserve(base_.size() - 1);
  for (int r = 0; r < source_.nranks(); ++r) programs.push_back(source_.program(r));
  FlatMatchResult m = match_programs_flat(programs);
  if (m.error) fail(ErrorCode::invalid_argument, "simulate: ", m.error->message);
  fail(ErrorCode::internal,
       "simulate: the Programs' sends and receives do not match, but "
       "match_programs_flat finds no problem");
}

// A problem of one op: matching problems come first, as when all ranks were
// matched before any op was read.
void Sim::fail_index(const std::string& message) const {
  {
    std::vector<Program> programs;
    for (int r = 0; r < source_.nranks(); ++r) programs.push_back(source_.program(r));
    FlatMatchResult m = match_programs_flat(programs);
    if (m.error) fail(ErrorCode::invalid_argument, "simulate: ", m.error->message);
  }
  fail(ErrorCode::invalid_argument, message);
}

// A one-sided op names a peer other than its rank, and a signal or wait a
// flag below kMaxFlags; signals and waits are noted for match_flags.
void Sim::check_one_sided(size_t r, size_t i, OpKind kind, int peer, uint32_t flag) {
  const auto n = static_cast<size_t>(source_.nranks());
  if (peer < 0 || static_cast<size_t>(peer) >= n || static_cast<size_t>(peer) == r)
    fail_index(str_cat("simulate: rank ", r, " op ", i, " (", describe_op(r, i), ") names peer ",
                       peer, " outside [0, ", n, ") or itself"));
  if (kind != OpKind::signal && kind != OpKind::wait) return;
  if (flag >= kMaxFlags)
    fail_index(str_cat("simulate: rank ", r, " op ", i, " (", describe_op(r, i), ") names flag ",
                       flag, ", not one of 0 .. ", kMaxFlags - 1));
  const bool wait = kind == OpKind::wait;
  const uint64_t from = wait ? static_cast<uint64_t>(peer) : r;
  const uint64_t to = wait ? r : static_cast<uint64_t>(peer);
  flag_ops_.push_back(
      {(from * n + to) * kMaxFlags + flag, base_[r] + static_cast<uint32_t>(i), wait});
}

// Meets every wait with the signal of its (signalling rank, waiting rank,
// flag): one of each per call. A signal no wait meets raises a flag nobody
// reads; a wait without its signal, or a second signal or wait of the same
// flag, is an error.
void Sim::match_flags() {
  std::sort(flag_ops_.begin(), flag_ops_.end(), [](const FlagOp& a, const FlagOp& b) {
    return a.key != b.key ? a.key < b.key : a.wait != b.wait ? b.wait : a.g < b.g;
  });
  auto where = [&](uint32_t g) {
    const int r = ops_[g].rank();
    const OpIndex i = g - base_[static_cast<size_t>(r)];
    return str_cat("rank ", r, " op ", i, " (", describe(op(g)), ")");
  };
  for (size_t j = 0; j < flag_ops_.size();) {
    size_t k = j;
    while (k < flag_ops_.size() && flag_ops_[k].key == flag_ops_[j].key) ++k;
    // [j, k): the signals of one key, then its waits.
    size_t w = j;
    while (w < k && !flag_ops_[w].wait) ++w;
    if (w - j > 1)
      fail(ErrorCode::invalid_argument, "simulate: ", where(flag_ops_[j + 1].g),
           " raises a flag that ", where(flag_ops_[j].g), " already raised in this call");
    if (k - w > 1)
      fail(ErrorCode::invalid_argument, "simulate: ", where(flag_ops_[w + 1].g),
           " waits for a flag that ", where(flag_ops_[w].g), " already waits for");
    if (w < k) {
      const uint32_t wg = flag_ops_[w].g;
      if (w == j)
        fail(ErrorCode::invalid_argument, "simulate: ", where(wg), " has no matching signal: rank ",
             op(wg).peer, " raises no flag ", op(wg).flag, " at rank ", ops_[wg].rank());
      const uint32_t sg = flag_ops_[j].g;
      ops_[sg].partner = wg;
      ops_[wg].partner = sg;
    }
    j = k;
  }
}

// A rank's engine: its earliest-free send port (lowest index on ties).
size_t Sim::engine(int rank) const {
  const auto ports = static_cast<size_t>(opt_.ports);
  const size_t s0 = static_cast<size_t>(rank) * ports;
  size_t sp = s0;
  for (size_t k = 1; k < ports; ++k)
    if (send_free_[s0 + k] < send_free_[sp]) sp = s0 + k;
  return sp;
}

// A core of rank a's host, and one of b's (b < 0: none), two distinct ones
// when they share a host; got[] receives their indices (kNone where the host
// has unlimited cores). Each is the core free latest but by s (best fit, so
// that cores idle before s stay free for earlier work), else the earliest-
// free one. Returns when the work can start.
double Sim::take_cores(int a, int b, double s, size_t* got) {
  got[0] = got[1] = kNone;
  if (core_free_.empty()) return s;
  const double want = s;
  for (int i = 0; i < 2; ++i) {
    const int r = i == 0 ? a : b;
    if (r < 0) break;
    const auto h = static_cast<size_t>(topo_.host_of(r));
    size_t fit = kNone, earliest = kNone;
    for (size_t c = core_base_[h]; c < core_base_[h + 1]; ++c) {
      if (c == got[0]) continue;
      if (core_free_[c] <= want && (fit == kNone || core_free_[c] > core_free_[fit])) fit = c;
      if (earliest == kNone || core_free_[c] < core_free_[earliest]) earliest = c;
    }
    got[i] = fit != kNone ? fit : earliest;
    if (got[i] != kNone) s = std::max(s, core_free_[got[i]]);
  }
  return s;
}

// Books `traffic` bytes on host h's memory from s on; returns when done.
double Sim::book_memory(int host, double s, double traffic) {
  const double bw = topo_.host(host).memory;
  if (!(bw > 0) || !(traffic > 0)) return s;
  double& free = mem_free_[static_cast<size_t>(host)];
  free = std::max(s, free) + traffic / bw;
  return free;
}

// Local work of `seconds` over `bytes` on rank's CPU from t on (after the
// hops of a class that takes turns which hold it), moving traffic_per_byte
// times their streaming share through its host's memory; returns when it is
// done.
double Sim::work(int rank, double t, double seconds, double bytes, double traffic_per_byte) {
  double& cpu = cpu_free_[static_cast<size_t>(rank)];
  size_t cores[2];
  const double s = take_cores(rank, -1, std::max(t, cpu), cores);
  double end = s + seconds;
  if (topo_.has_hosts())
    end = std::max(
        end, book_memory(topo_.host_of(rank), s, bytes * traffic_per_byte * streaming(bytes)));
  cpu = end;
  if (cores[0] != kNone) core_free_[cores[0]] = end;
  return end;
}

// Books one hop of `bytes` requested at t; returns when it ends. A message's
// hop holds a send port of hop.from and a receive port of hop.to (the
// receiver's engine, and a core at each end, on a class that takes turns at
// this size); a get's first hop holds only the reader's side, and a get's hops
// book a copy's memory traffic rather than the class's and wait the class's
// flag_alpha, where fitted, rather than its alpha (a read has no message
// overhead).
double Sim::book(const Hop& hop, double t, double bytes, HopKind kind) {
  const LinkParams& lc = topo_.classes()[hop.link_class];
  const double latency = kind == HopKind::message ? lc.alpha : lc.one_sided_alpha();
  const double busy = lc.curve.empty() ? bytes / lc.beta : bytes * lc.curve.at(bytes);
  const auto ports = static_cast<size_t>(opt_.ports);
  // The earliest-free port of each end (lowest index on ties); a class that
  // takes turns at this size receives on the receiver's engine, its
  // earliest-free send port.
  const bool holds_sender = kind != HopKind::get_first;
  const size_t sp = holds_sender ? engine(hop.from) : kNone;
  const bool turns = lc.takes_turns(bytes);
  std::vector<double>& recv_side = turns ? send_free_ : recv_free_;
  const size_t r0 = static_cast<size_t>(hop.to) * ports;
  size_t rp = r0;
  for (size_t k = 1; k < ports; ++k)
    if (recv_side[r0 + k] < recv_side[rp]) rp = r0 + k;
  double s = std::max(t + latency, recv_side[rp]);
  if (holds_sender) s = std::max(s, send_free_[sp]);
  for (uint32_t l : hop.links)
    if (l != kNoLink) s = std::max(s, link_free_[l]);
  size_t cores[2] = {kNone, kNone};
  if (turns) {
    // The CPUs of both ends move the bytes (of the reader alone for a get).
    if (holds_sender) s = std::max(s, cpu_free_[static_cast<size_t>(hop.from)]);
    s = std::max(s, cpu_free_[static_cast<size_t>(hop.to)]);
    s = holds_sender ? take_cores(hop.from, hop.to, s, cores) : take_cores(hop.to, -1, s, cores);
  }
  double end = s + busy;
  const double traffic_per_byte =
      kind == HopKind::message ? lc.mem_traffic : ComputeModel::kCopyTraffic;
  if (traffic_per_byte > 0 && topo_.has_hosts()) {
    const double traffic = bytes * traffic_per_byte * streaming(bytes);
    const int ha = topo_.host_of(hop.from);
    const int hb = topo_.host_of(hop.to);
    if (ha == hb) {
      end = std::max(end, book_memory(ha, s, traffic));
    } else {
      end = std::max(end, book_memory(ha, s, traffic / 2));
      end = std::max(end, book_memory(hb, s, traffic / 2));
    }
  }
  for (size_t c : cores)
    if (c != kNone) core_free_[c] = end;
  if (turns) {
    if (holds_sender) cpu_free_[static_cast<size_t>(hop.from)] = end;
    cpu_free_[static_cast<size_t>(hop.to)] = end;
  }
  if (holds_sender) {
    send_free_[sp] = end;
    port_busy_[sp] += busy;
  }
  recv_side[rp] = end;
  port_busy_[(turns ? 0 : recv_free_.size()) + rp] += busy;
  for (uint32_t l : hop.links)
    if (l != kNoLink) {
      link_free_[l] = end;
      link_busy_[l] += busy;
    }
  ++result_.hops;
  result_.bytes += bytes;
  return end;
}

// Moves `bytes` from `from` to `to` along the route, requested at t, for op g:
// a send (whose first hop ends it, and whose last delivers to its receive) or
// a get (`kind` get_first, which the last hop delivers to).
void Sim::transfer(uint32_t g, int from, int to, double t, double bytes, HopKind kind) {
  route_.clear();
  topo_.route(from, to, route_);
  const double first = book(route_[0], t, bytes, kind);
  const bool get = kind == HopKind::get_first;
  const uint32_t target = get ? g : ops_[g].partner;
  if (!get) push(first, EventKind::op_done, g);
  if (route_.size() == 1) {
    deliver(target, first);
  } else {
    const auto begin = static_cast<uint32_t>(hops_.size());
    hops_.insert(hops_.end(), route_.begin() + 1, route_.end());
    flights_.push_back({target, begin, static_cast<uint32_t>(hops_.size()), bytes,
                        get ? HopKind::get_forward : HopKind::message});
    push(first, EventKind::next_hop, static_cast<uint32_t>(flights_.size() - 1));
  }
}

void Sim::deliver(uint32_t recv, double t) {
  OpState& s = ops_[recv];
  if (s.bits & kReady) {
    receive_ready(recv, std::max(s.t, t));
  } else {
    s.t = t;
    s.bits |= kArrived;
  }
}

// Both the receive (get, wait) has started and its message's (data's,
// signal's) delivery time is known; t is the later of the two.
void Sim::receive_ready(uint32_t g, double t) {
  const OpState& s = ops_[g];
  if (s.kind() == OpKind::recv_reduce || s.kind() == OpKind::get_reduce) {
    const double b = bytes_of(s);
    if (opt_.copy != nullptr) {
      // The reduction replaces the receive's copy: it costs the kernel's
      // excess over a copy, and one more read (of dst) per byte.
      const double extra = opt_.kernel != nullptr
                               ? std::max(0.0, opt_.kernel->at(b) - opt_.copy->at(b)) * b
                               : opt_.gamma * b;
      t = work(s.rank(), t, extra, b, 1);
    } else {
      t += opt_.gamma * b;
    }
  }
  push(t, EventKind::op_done, g);
}

void Sim::start_one(uint32_t g, double t) {
  OpState& s = ops_[g];
  s.bits |= kStarted;
  if (opt_.record_ops) times_[g].start = t;
  const double b = bytes_of(s);
  const int rank = s.rank();
  switch (s.kind()) {
    case OpKind::copy:
      if (opt_.copy != nullptr)
        t = work(rank, t, opt_.copy->at(b) * b, b, ComputeModel::kCopyTraffic);
      push(t, EventKind::op_done, g);
      break;
    case OpKind::reduce:
    case OpKind::divide:  // one pass of arithmetic over dst, as a reduce
      if (opt_.copy != nullptr) {
        const double rate = opt_.kernel != nullptr ? opt_.kernel->at(b) : opt_.gamma;
        push(work(rank, t, rate * b, b, ComputeModel::kReduceTraffic), EventKind::op_done, g);
      } else {
        push(t + opt_.gamma * b, EventKind::op_done, g);
      }
      break;
    case OpKind::send:
      ++result_.messages;
      transfer(g, rank, ops_[s.partner].rank(), t, b, HopKind::message);
      break;
    case OpKind::recv:
    case OpKind::recv_reduce:
    case OpKind::wait:
      if (s.bits & kArrived) {
        receive_ready(g, std::max(t, s.t));
      } else {
        s.t = t;
        s.bits |= kReady;
      }
      break;
    case OpKind::get:
    case OpKind::get_reduce:
      // The peer's data moves to this rank, on this rank's side only; its
      // arrival completes the get (after the reduction, for get_reduce).
      ++result_.gets;
      s.t = t;
      s.bits |= kReady;
      transfer(g, static_cast<int>(s.partner), rank, t, b, HopKind::get_first);
      break;
    case OpKind::signal: {
      // Done at once; the flag reaches the waiting rank after the route's
      // hops' flag_alpha each (alpha where not fitted).
      ++result_.signals;
      push(t, EventKind::op_done, g);
      const uint32_t w = s.partner;
      if (w == kNone) break;
      route_.clear();
      topo_.route(rank, ops_[w].rank(), route_);
      double arrives = t;
      for (const Hop& h : route_) arrives += topo_.classes()[h.link_class].one_sided_alpha();
      deliver(w, arrives);
      break;
    }
  }
}

// Starts g and then every op it unblocks at the same instant: its channel
// successor, when that one's deps are already done.
void Sim::start(uint32_t g, double t) {
  for (;;) {
    start_one(g, t);
    const uint32_t nx = ops_[g].chan_next;
    if (nx == kNone || --ops_[nx].blockers != 0) return;
    g = nx;
  }
}

void Sim::finish(uint32_t g, double t) {
  OpState& s = ops_[g];
  s.bits |= kDone;
  if (opt_.record_ops) times_[g].end = t;
  ++result_.ops;
  double& rt = result_.rank_time[static_cast<size_t>(s.rank())];
  rt = std::max(rt, t);
  if (shared_deps_) {
    const uint32_t b = base_[static_cast<size_t>(s.rank())];
    const uint32_t i = g - b;
    for (uint32_t k = local_begin_[i]; k < local_begin_[i + 1]; ++k) {
      const uint32_t d = b + local_deps_[k];
      if (--ops_[d].blockers == 0) start(d, t);
    }
    return;
  }
  const uint32_t end = ops_[g + 1].dep_begin;
  for (uint32_t k = s.dep_begin; k < end; ++k) {
    const uint32_t d = dependents_[k];
    if (--ops_[d].blockers == 0) start(d, t);
  }
}

// At many ranks the ops of consecutive events lie far apart, and every step
// from an event to the state it touches is a cache miss: the op, its
// dependents, the first dependent's state, and that one's partner (a send
// delivers to it) and channel successor (started with it). Each is loaded a
// few events ahead, from the one before it, loaded a few events earlier.
void Sim::prefetch_ahead() const {
  auto op_done = [&](size_t k) -> const OpState* {
    const auto* a = queue_.ahead(k);
    return a != nullptr && a->kind == EventKind::op_done ? &ops_[a->id] : nullptr;
  };
  auto first_dependent = [&](const OpState* s) -> const OpState* {
    if (shared_deps_) {
      const uint32_t b = base_[static_cast<size_t>(s->rank())];
      const auto i = static_cast<uint32_t>(s - ops_.data()) - b;
      return local_begin_[i] != local_begin_[i + 1] ? &ops_[b + local_deps_[local_begin_[i]]]
                                                    : nullptr;
    }
    return s[0].dep_begin != s[1].dep_begin ? &ops_[dependents_[s->dep_begin]] : nullptr;
  };
  if (const OpState* s = op_done(kLookahead)) {
    __builtin_prefetch(s);
    __builtin_prefetch(s + 1);
  }
  // A pointer, not a reference: an op without dependents may start at the end.
  if (const OpState* s = op_done(kLookahead / 2); s != nullptr && !shared_deps_)
    __builtin_prefetch(dependents_.data() + s->dep_begin);
  if (const OpState* s = op_done(kLookahead / 4)) {
    if (const OpState* d = first_dependent(s)) __builtin_prefetch(d);
  }
  if (const OpState* s = op_done(kLookahead / 8)) {
    if (const OpState* d = first_dependent(s)) {
      // (A get's partner is a rank, not an op: prefetched all the same, a
      // harmless load.)
      if (d->partner != kNone) __builtin_prefetch(ops_.data() + d->partner);
      if (d->chan_next != kNone) __builtin_prefetch(&ops_[d->chan_next]);
    }
  }
}

SimResult Sim::run() {
  const int n = topo_.nranks();
  if (n != source_.nranks())
    fail(ErrorCode::invalid_argument, "simulate: topology ", topo_.name(), " has ", n,
         " ranks but ", source_.nranks(), " programs were given");
  if (opt_.ports != 1 && opt_.ports != 2)
    fail(ErrorCode::invalid_argument, "simulate: ports must be 1 or 2, got ", opt_.ports);
  if (!(opt_.gamma >= 0))
    fail(ErrorCode::invalid_argument, "simulate: gamma must be >= 0, got ", opt_.gamma);
  index();
  const size_t nports = static_cast<size_t>(n) * static_cast<size_t>(opt_.ports);
  send_free_.assign(nports, 0.0);
  recv_free_.assign(nports, 0.0);
  port_busy_.assign(2 * nports, 0.0);
  link_free_.assign(topo_.link_count(), 0.0);
  cpu_free_.assign(static_cast<size_t>(n), 0.0);
  if (topo_.has_hosts()) {
    mem_free_.assign(topo_.host_count(), 0.0);
    core_base_.assign(topo_.host_count() + 1, 0);
    for (size_t h = 0; h < topo_.host_count(); ++h)
      core_base_[h + 1] =
          core_base_[h] + static_cast<size_t>(topo_.host(static_cast<int>(h)).cores);
    if (core_base_.back() > 0) core_free_.assign(core_base_.back(), 0.0);
  }
  link_busy_.assign(topo_.link_count(), 0.0);
  result_.rank_time.assign(static_cast<size_t>(n), 0.0);
  const auto total = static_cast<uint32_t>(ops_.size() - 1);
  if (opt_.record_ops) times_.assign(total, OpTime{});

  // Ops a channel successor of an earlier one started are skipped.
  for (uint32_t g = 0; g < total; ++g)
    if (ops_[g].blockers == 0 && !(ops_[g].bits & kStarted)) start(g, 0.0);
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    prefetch_ahead();
    ++result_.events;
    if (e.kind == EventKind::op_done) {
      finish(e.id, e.t);
      continue;
    }
    Flight& f = flights_[e.id];
    const double end = book(hops_[f.next_hop], e.t, f.bytes, f.kind);
    if (++f.next_hop == f.end_hop)
      deliver(f.recv, end);
    else
      push(end, EventKind::next_hop, e.id);
  }
  if (result_.ops != total) {
    for (uint32_t g = 0; g < total; ++g)
      if (!(ops_[g].bits & kDone)) {
        const int r = ops_[g].rank();
        const char* what = ops_[g].kind() == OpKind::wait ? "signal" : "message";
        fail(ErrorCode::internal, "simulate: deadlock: ", total - result_.ops,
             " ops never completed, first rank ", r, " op ", g - base_[static_cast<size_t>(r)],
             " (", describe(op(g)), ")",
             (ops_[g].bits & kStarted) ? str_cat(" started but its ", what, " never arrived")
                                       : std::string(" never started"));
      }
  }
  if (opt_.record_ops) {
    result_.op_times.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<size_t>(r);
      result_.op_times[ur].assign(times_.begin() + base_[ur], times_.begin() + base_[ur + 1]);
    }
  }
  for (double t : result_.rank_time) result_.time = std::max(result_.time, t);
  for (double b : port_busy_) result_.max_port_busy = std::max(result_.max_port_busy, b);
  for (double b : link_busy_) result_.max_link_busy = std::max(result_.max_link_busy, b);
  return std::move(result_);
}

}  // namespace

SimResult simulate(ProgramSource& programs, const Topology& topology, const SimOptions& options) {
  Sim sim(programs, topology, options);
  return sim.run();
}

SimResult simulate(std::span<const Program> programs, const Topology& topology,
                   const SimOptions& options) {
  ProgramSpan source(programs);
  return simulate(source, topology, options);
}

}  // namespace chorus
