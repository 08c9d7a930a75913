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

#include <sys/mman.h>

namespace chorus {
namespace {

using sim_internal::BigVector;
using sim_internal::Event;
using sim_internal::EventKind;
using sim_internal::EventQueue;

constexpr uint32_t kNone = kNoGlobalOp;
// How many events ahead the run prefetches an op's state.
constexpr size_t kLookahead = 16;

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
struct OpState {
  double bytes = 0;       // elements * elem_size
  double t = 0;           // receives, waits: when they started or were delivered, whichever
                          // came first; gets: when they started
  uint32_t blockers = 0;  // deps not yet done, + 1 while the channel predecessor has not started
  uint32_t chan_next = kNone;
  uint32_t partner = kNone;  // matched op of a send or receive, a signal or wait
  uint32_t dep_begin = 0;    // its dependents: Sim::dependents_[dep_begin, next op's dep_begin)
  int rank = 0;
  OpKind kind = OpKind::copy;
  uint8_t flags = 0;  // kStarted | kDone | kReady | kArrived
};
constexpr uint8_t kStarted = 1;
constexpr uint8_t kDone = 2;
constexpr uint8_t kReady = 4;    // a receive, get or wait that has started
constexpr uint8_t kArrived = 8;  // a receive or wait whose delivery time is known

class Sim {
 public:
  Sim(std::span<const Program> programs, const Topology& topo, const SimOptions& opt)
      : programs_(programs), topo_(topo), opt_(opt) {}

  SimResult run();

 private:
  void index();
  void check_one_sided(size_t r, size_t i, const Op& o);
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
  const Op& op(uint32_t g) const {
    const auto r = static_cast<size_t>(ops_[g].rank);
    return programs_[r].ops[g - base_[r]];
  }

  std::span<const Program> programs_;
  const Topology& topo_;
  SimOptions opt_;

  // Per op, by global id (rank r's op i is base_[r] + i), and one more whose
  // dep_begin ends the last op's dependents.
  std::vector<uint32_t> base_;
  BigVector<OpState> ops_;
  BigVector<uint32_t> dependents_;

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

void Sim::index() {
  const size_t n = programs_.size();
  base_.resize(n + 1);
  size_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    base_[r] = static_cast<uint32_t>(total);
    total += programs_[r].ops.size();
    if (total >= kNone)
      fail(ErrorCode::invalid_argument, "simulate: more than 2^32 - 1 ops in all");
  }
  base_[n] = static_cast<uint32_t>(total);
  FlatMatchResult m = match_programs_flat(programs_);
  if (m.error) fail(ErrorCode::invalid_argument, "simulate: ", m.error->message);

  size_t ndeps = 0;
  for (const Program& p : programs_)
    for (const Op& o : p.ops) ndeps += o.deps.size();
  dependents_.resize(ndeps);

  // Each op's state is written once, in order; its deps and channel
  // predecessor are earlier ops of its rank, already there. Deps name ops of
  // the same rank, so each rank's dependents are laid out while its ops are
  // still in cache.
  ops_.reserve(total + 1);
  const auto elem = static_cast<double>(opt_.elem_size);
  uint32_t next_dep = 0;  // where the next rank's dependents start
  for (size_t r = 0; r < n; ++r) {
    const auto& ops = programs_[r].ops;
    const uint32_t b = base_[r];
    for (size_t i = 0; i < ops.size(); ++i) {
      OpState& s = ops_.emplace_back();
      s.rank = static_cast<int>(r);
      s.kind = ops[i].kind;
      s.bytes = static_cast<double>(op_count(ops[i])) * elem;
      s.blockers += static_cast<uint32_t>(ops[i].deps.size());
      for (OpIndex d : ops[i].deps) {
        if (d >= i)
          fail(ErrorCode::invalid_argument, "simulate: rank ", r, " op ", i, " (", describe(ops[i]),
               ") depends on op ", d, ", which is not an earlier op");
        ++ops_[b + d].dep_begin;  // for now, the number of its dependents
      }
      const uint32_t cp = m.matching.channel_prev[b + i];
      if (cp != kNoGlobalOp) {
        ++s.blockers;
        ops_[cp].chan_next = b + static_cast<uint32_t>(i);
      }
      s.partner = m.matching.partner[b + i];  // kNoGlobalOp is kNone
      if (is_one_sided(s.kind)) check_one_sided(r, i, ops[i]);
    }
    // The rank's dependents in CSR form, each op's in ascending order:
    // dep_begin becomes the end of the op's range, then is counted back down
    // to its start while the ops are visited last to first.
    for (size_t i = 0; i < ops.size(); ++i) {
      next_dep += ops_[b + i].dep_begin;
      ops_[b + i].dep_begin = next_dep;
    }
    for (size_t i = ops.size(); i-- > 0;)
      for (auto d = ops[i].deps.rbegin(); d != ops[i].deps.rend(); ++d)
        dependents_[--ops_[b + *d].dep_begin] = b + static_cast<uint32_t>(i);
  }
  ops_.emplace_back().dep_begin = next_dep;
  if (!flag_ops_.empty()) match_flags();
}

// A one-sided op names a peer other than its rank, and a signal or wait a
// flag below kMaxFlags; signals and waits are noted for match_flags.
void Sim::check_one_sided(size_t r, size_t i, const Op& o) {
  const auto n = programs_.size();
  if (o.peer < 0 || static_cast<size_t>(o.peer) >= n || static_cast<size_t>(o.peer) == r)
    fail(ErrorCode::invalid_argument, "simulate: rank ", r, " op ", i, " (", describe(o),
         ") names peer ", o.peer, " outside [0, ", n, ") or itself");
  if (o.kind != OpKind::signal && o.kind != OpKind::wait) return;
  if (o.flag >= kMaxFlags)
    fail(ErrorCode::invalid_argument, "simulate: rank ", r, " op ", i, " (", describe(o),
         ") names flag ", o.flag, ", not one of 0 .. ", kMaxFlags - 1);
  const bool wait = o.kind == OpKind::wait;
  const uint64_t from = wait ? static_cast<uint64_t>(o.peer) : r;
  const uint64_t to = wait ? r : static_cast<uint64_t>(o.peer);
  flag_ops_.push_back(
      {(from * n + to) * kMaxFlags + o.flag, base_[r] + static_cast<uint32_t>(i), wait});
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
    const int r = ops_[g].rank;
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
             op(wg).peer, " raises no flag ", op(wg).flag, " at rank ", ops_[wg].rank);
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
  if (s.flags & kReady) {
    receive_ready(recv, std::max(s.t, t));
  } else {
    s.t = t;
    s.flags |= kArrived;
  }
}

// Both the receive (get, wait) has started and its message's (data's,
// signal's) delivery time is known; t is the later of the two.
void Sim::receive_ready(uint32_t g, double t) {
  const OpState& s = ops_[g];
  if (s.kind == OpKind::recv_reduce || s.kind == OpKind::get_reduce) {
    const double b = s.bytes;
    if (opt_.copy != nullptr) {
      // The reduction replaces the receive's copy: it costs the kernel's
      // excess over a copy, and one more read (of dst) per byte.
      const double extra = opt_.kernel != nullptr
                               ? std::max(0.0, opt_.kernel->at(b) - opt_.copy->at(b)) * b
                               : opt_.gamma * b;
      t = work(s.rank, t, extra, b, 1);
    } else {
      t += opt_.gamma * b;
    }
  }
  push(t, EventKind::op_done, g);
}

void Sim::start_one(uint32_t g, double t) {
  OpState& s = ops_[g];
  s.flags |= kStarted;
  if (opt_.record_ops) times_[g].start = t;
  switch (s.kind) {
    case OpKind::copy:
      if (opt_.copy != nullptr)
        t = work(s.rank, t, opt_.copy->at(s.bytes) * s.bytes, s.bytes, ComputeModel::kCopyTraffic);
      push(t, EventKind::op_done, g);
      break;
    case OpKind::reduce:
    case OpKind::divide:  // one pass of arithmetic over dst, as a reduce
      if (opt_.copy != nullptr) {
        const double rate = opt_.kernel != nullptr ? opt_.kernel->at(s.bytes) : opt_.gamma;
        push(work(s.rank, t, rate * s.bytes, s.bytes, ComputeModel::kReduceTraffic),
             EventKind::op_done, g);
      } else {
        push(t + opt_.gamma * s.bytes, EventKind::op_done, g);
      }
      break;
    case OpKind::send:
      ++result_.messages;
      transfer(g, s.rank, ops_[s.partner].rank, t, s.bytes, HopKind::message);
      break;
    case OpKind::recv:
    case OpKind::recv_reduce:
    case OpKind::wait:
      if (s.flags & kArrived) {
        receive_ready(g, std::max(t, s.t));
      } else {
        s.t = t;
        s.flags |= kReady;
      }
      break;
    case OpKind::get:
    case OpKind::get_reduce:
      // The peer's data moves to this rank, on this rank's side only; its
      // arrival completes the get (after the reduction, for get_reduce).
      ++result_.gets;
      s.t = t;
      s.flags |= kReady;
      transfer(g, op(g).peer, s.rank, t, s.bytes, HopKind::get_first);
      break;
    case OpKind::signal: {
      // Done at once; the flag reaches the waiting rank after the route's
      // hops' flag_alpha each (alpha where not fitted).
      ++result_.signals;
      push(t, EventKind::op_done, g);
      const uint32_t w = s.partner;
      if (w == kNone) break;
      route_.clear();
      topo_.route(s.rank, ops_[w].rank, route_);
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
  s.flags |= kDone;
  if (opt_.record_ops) times_[g].end = t;
  ++result_.ops;
  double& rt = result_.rank_time[static_cast<size_t>(s.rank)];
  rt = std::max(rt, t);
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
    return s[0].dep_begin != s[1].dep_begin ? &ops_[dependents_[s->dep_begin]] : nullptr;
  };
  if (const OpState* s = op_done(kLookahead)) {
    __builtin_prefetch(s);
    __builtin_prefetch(s + 1);
  }
  // A pointer, not a reference: an op without dependents may start at the end.
  if (const OpState* s = op_done(kLookahead / 2))
    __builtin_prefetch(dependents_.data() + s->dep_begin);
  if (const OpState* s = op_done(kLookahead / 4)) {
    if (const OpState* d = first_dependent(s)) __builtin_prefetch(d);
  }
  if (const OpState* s = op_done(kLookahead / 8)) {
    if (const OpState* d = first_dependent(s)) {
      if (d->partner != kNone) __builtin_prefetch(&ops_[d->partner]);
      if (d->chan_next != kNone) __builtin_prefetch(&ops_[d->chan_next]);
    }
  }
}

SimResult Sim::run() {
  const int n = topo_.nranks();
  if (static_cast<size_t>(n) != programs_.size())
    fail(ErrorCode::invalid_argument, "simulate: topology ", topo_.name(), " has ", n,
         " ranks but ", programs_.size(), " programs were given");
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
    if (ops_[g].blockers == 0 && !(ops_[g].flags & kStarted)) start(g, 0.0);
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
      if (!(ops_[g].flags & kDone)) {
        const int r = ops_[g].rank;
        const char* what = ops_[g].kind == OpKind::wait ? "signal" : "message";
        fail(ErrorCode::internal, "simulate: deadlock: ", total - result_.ops,
             " ops never completed, first rank ", r, " op ", g - base_[static_cast<size_t>(r)],
             " (", describe(op(g)), ")",
             (ops_[g].flags & kStarted) ? str_cat(" started but its ", what, " never arrived")
                                        : std::string(" never started"));
      }
  }
  if (opt_.record_ops) {
    result_.op_times.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const auto from = times_.begin() + base_[static_cast<size_t>(r)];
      result_.op_times[static_cast<size_t>(r)].assign(
          from, from + static_cast<std::ptrdiff_t>(programs_[static_cast<size_t>(r)].ops.size()));
    }
  }
  for (double t : result_.rank_time) result_.time = std::max(result_.time, t);
  for (double b : port_busy_) result_.max_port_busy = std::max(result_.max_port_busy, b);
  for (double b : link_busy_) result_.max_link_busy = std::max(result_.max_link_busy, b);
  return std::move(result_);
}

}  // namespace

SimResult simulate(std::span<const Program> programs, const Topology& topology,
                   const SimOptions& options) {
  Sim sim(programs, topology, options);
  return sim.run();
}

}  // namespace chorus
