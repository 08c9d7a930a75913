#include "sim/simulator.h"

#include "core/check.h"
#include "schedule/matching.h"

#include <algorithm>
#include <queue>

namespace chorus {
namespace {

constexpr uint32_t kNone = static_cast<uint32_t>(-1);

enum class EventKind : uint32_t { op_done, next_hop };

struct Event {
  double t;
  uint64_t seq;
  EventKind kind;
  uint32_t id;  // global op id (op_done) or message id (next_hop)
  // Earliest time first; equal times in creation order.
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// A message in flight over more than one hop.
struct Flight {
  uint32_t recv;      // global op id of the receive it delivers to
  uint32_t next_hop;  // index into Sim::hops_ of the hop to request next
  uint32_t end_hop;   // one past its last hop
  double bytes;
};

class Sim {
 public:
  Sim(std::span<const Program> programs, const Topology& topo, const SimOptions& opt)
      : programs_(programs), topo_(topo), opt_(opt) {}

  SimResult run();

 private:
  void index();
  void push(double t, EventKind kind, uint32_t id) { queue_.push({t, seq_++, kind, id}); }
  double book(const Hop& hop, double t, double bytes);
  double work(int rank, double t, double seconds, double traffic);
  size_t engine(int rank) const;
  double take_cores(int a, int b, double s, size_t* got);
  double book_memory(int host, double s, double traffic);
  void start(uint32_t g, double t);
  void start_one(uint32_t g, double t);
  void finish(uint32_t g, double t);
  void deliver(uint32_t recv, double t);
  void receive_ready(uint32_t g);
  double bytes_of(uint32_t g) const {
    return static_cast<double>(op_count(op(g))) * static_cast<double>(opt_.elem_size);
  }
  const Op& op(uint32_t g) const {
    return programs_[static_cast<size_t>(rank_of_[g])].ops[g - base_[rank_of_[g]]];
  }

  std::span<const Program> programs_;
  const Topology& topo_;
  SimOptions opt_;

  // Per op, by global id (rank r's op i is base_[r] + i).
  std::vector<uint32_t> base_;
  std::vector<int> rank_of_;
  std::vector<uint32_t> missing_;    // deps not yet done
  std::vector<uint32_t> dep_begin_;  // CSR of dependents
  std::vector<uint32_t> dependents_;
  std::vector<uint32_t> chan_prev_;
  std::vector<uint32_t> chan_next_;
  std::vector<uint32_t> partner_;  // matched op of a send or receive
  std::vector<uint8_t> started_;
  std::vector<uint8_t> done_;
  std::vector<double> ready_at_;    // receives: when they started (-1: not yet)
  std::vector<double> arrives_at_;  // receives: delivery time (-1: not yet known)

  std::vector<double> send_free_, recv_free_, link_free_;
  // Hosts of the machine model: memory free time per host; core free times,
  // host h's at core_base_[h] .. core_base_[h + 1].
  std::vector<double> mem_free_, core_free_;
  std::vector<size_t> core_base_;
  std::vector<double> port_busy_, link_busy_;
  std::vector<Hop> hops_;
  std::vector<Hop> route_;
  std::vector<Flight> flights_;
  std::vector<uint32_t> to_start_;

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t seq_ = 0;
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
  MatchResult m = match_programs(programs_);
  if (m.error) fail(ErrorCode::invalid_argument, "simulate: ", m.error->message);

  rank_of_.resize(total);
  missing_.resize(total);
  chan_prev_.resize(total);
  chan_next_.assign(total, kNone);
  partner_.assign(total, kNone);
  dep_begin_.assign(total + 1, 0);
  for (size_t r = 0; r < n; ++r) {
    const auto& ops = programs_[r].ops;
    const uint32_t b = base_[r];
    for (size_t i = 0; i < ops.size(); ++i) {
      const uint32_t g = b + static_cast<uint32_t>(i);
      rank_of_[g] = static_cast<int>(r);
      missing_[g] = static_cast<uint32_t>(ops[i].deps.size());
      for (OpIndex d : ops[i].deps) {
        if (d >= i)
          fail(ErrorCode::invalid_argument, "simulate: rank ", r, " op ", i, " (", describe(ops[i]),
               ") depends on op ", d, ", which is not an earlier op");
        ++dep_begin_[b + d + 1];
      }
      const OpIndex cp = m.matching.channel_prev[r][i];
      chan_prev_[g] = cp == kNoOp ? kNone : b + cp;
      if (cp != kNoOp) chan_next_[b + cp] = g;
      const OpRef p = m.matching.partner[r][i];
      if (p.rank >= 0) partner_[g] = base_[static_cast<size_t>(p.rank)] + p.op;
    }
  }
  for (size_t g = 0; g < total; ++g) dep_begin_[g + 1] += dep_begin_[g];
  dependents_.resize(dep_begin_[total]);
  std::vector<uint32_t> fill(dep_begin_.begin(), dep_begin_.end() - 1);
  for (size_t r = 0; r < n; ++r) {
    const auto& ops = programs_[r].ops;
    const uint32_t b = base_[r];
    for (size_t i = 0; i < ops.size(); ++i)
      for (OpIndex d : ops[i].deps) dependents_[fill[b + d]++] = b + static_cast<uint32_t>(i);
  }
  started_.assign(total, 0);
  done_.assign(total, 0);
  ready_at_.assign(total, -1.0);
  arrives_at_.assign(total, -1.0);
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

// Local work of `seconds` on rank's engine from t on, moving `traffic` bytes
// through its host's memory; returns when it is done.
double Sim::work(int rank, double t, double seconds, double traffic) {
  const size_t e = engine(rank);
  size_t cores[2];
  const double s = take_cores(rank, -1, std::max(t, send_free_[e]), cores);
  double end = s + seconds;
  if (topo_.has_hosts()) end = std::max(end, book_memory(topo_.host_of(rank), s, traffic));
  send_free_[e] = end;
  port_busy_[e] += seconds;
  if (cores[0] != kNone) core_free_[cores[0]] = end;
  return end;
}

double Sim::book(const Hop& hop, double t, double bytes) {
  const LinkParams& lc = topo_.classes()[hop.link_class];
  const double busy = bytes * lc.per_byte(bytes);
  const auto ports = static_cast<size_t>(opt_.ports);
  // The earliest-free port of each end (lowest index on ties); a half-duplex
  // class receives on the receiver's engine, its earliest-free send port.
  const size_t sp = engine(hop.from);
  const bool turns = lc.takes_turns(bytes);
  std::vector<double>& recv_side = turns ? send_free_ : recv_free_;
  const size_t r0 = static_cast<size_t>(hop.to) * ports;
  size_t rp = r0;
  for (size_t k = 1; k < ports; ++k)
    if (recv_side[r0 + k] < recv_side[rp]) rp = r0 + k;
  double s = std::max({t + lc.alpha, send_free_[sp], recv_side[rp]});
  for (uint32_t l : hop.links)
    if (l != kNoLink) s = std::max(s, link_free_[l]);
  size_t cores[2] = {kNone, kNone};
  if (turns) s = take_cores(hop.from, hop.to, s, cores);
  double end = s + busy;
  if (topo_.has_hosts() && lc.mem_traffic > 0) {
    const double traffic = bytes * lc.mem_traffic;
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
  send_free_[sp] = end;
  recv_side[rp] = end;
  port_busy_[sp] += busy;
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

void Sim::deliver(uint32_t recv, double t) {
  arrives_at_[recv] = t;
  if (ready_at_[recv] >= 0) receive_ready(recv);
}

// Both the receive has started and its message's delivery time is known.
void Sim::receive_ready(uint32_t g) {
  double t = std::max(ready_at_[g], arrives_at_[g]);
  if (op(g).kind == OpKind::recv_reduce) {
    const double b = bytes_of(g);
    if (opt_.copy != nullptr) {
      // The reduction replaces the receive's copy: it costs the kernel's
      // excess over a copy, and one more read (of dst) per byte.
      const double extra =
          opt_.kernel != nullptr ? std::max(0.0, opt_.kernel->at(b) - opt_.copy->at(b)) * b
                                 : opt_.gamma * b;
      t = work(rank_of_[g], t, extra, b);
    } else {
      t += opt_.gamma * b;
    }
  }
  push(t, EventKind::op_done, g);
}

void Sim::start_one(uint32_t g, double t) {
  started_[g] = 1;
  if (opt_.record_ops) times_[g].start = t;
  const Op& o = op(g);
  switch (o.kind) {
    case OpKind::copy:
      if (opt_.copy != nullptr) {
        const double b = bytes_of(g);
        push(work(rank_of_[g], t, opt_.copy->at(b) * b, ComputeModel::kCopyTraffic * b),
             EventKind::op_done, g);
      } else {
        push(t, EventKind::op_done, g);
      }
      break;
    case OpKind::reduce:
    case OpKind::divide:  // one pass of arithmetic over dst, as a reduce
      if (opt_.copy != nullptr) {
        const double b = bytes_of(g);
        const double rate = opt_.kernel != nullptr ? opt_.kernel->at(b) : opt_.gamma;
        push(work(rank_of_[g], t, rate * b, ComputeModel::kReduceTraffic * b), EventKind::op_done,
             g);
      } else {
        push(t + opt_.gamma * bytes_of(g), EventKind::op_done, g);
      }
      break;
    case OpKind::send: {
      ++result_.messages;
      const double bytes = bytes_of(g);
      route_.clear();
      topo_.route(rank_of_[g], o.peer, route_);
      const double first = book(route_[0], t, bytes);
      push(first, EventKind::op_done, g);
      if (route_.size() == 1) {
        deliver(partner_[g], first);
      } else {
        const auto begin = static_cast<uint32_t>(hops_.size());
        hops_.insert(hops_.end(), route_.begin() + 1, route_.end());
        flights_.push_back({partner_[g], begin, static_cast<uint32_t>(hops_.size()), bytes});
        push(first, EventKind::next_hop, static_cast<uint32_t>(flights_.size() - 1));
      }
      break;
    }
    case OpKind::recv:
    case OpKind::recv_reduce:
      ready_at_[g] = t;
      if (arrives_at_[g] >= 0) receive_ready(g);
      break;
  }
}

// Starts g and then every op it unblocks at the same instant: its channel
// successor, when that one's deps are already done.
void Sim::start(uint32_t g, double t) {
  to_start_.push_back(g);
  while (!to_start_.empty()) {
    const uint32_t x = to_start_.back();
    to_start_.pop_back();
    start_one(x, t);
    const uint32_t nx = chan_next_[x];
    if (nx != kNone && missing_[nx] == 0 && !started_[nx]) to_start_.push_back(nx);
  }
}

void Sim::finish(uint32_t g, double t) {
  done_[g] = 1;
  if (opt_.record_ops) times_[g].end = t;
  ++result_.ops;
  double& rt = result_.rank_time[static_cast<size_t>(rank_of_[g])];
  rt = std::max(rt, t);
  for (uint32_t k = dep_begin_[g]; k < dep_begin_[g + 1]; ++k) {
    const uint32_t d = dependents_[k];
    if (--missing_[d] == 0 && !started_[d] && (chan_prev_[d] == kNone || started_[chan_prev_[d]]))
      start(d, t);
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
  if (opt_.record_ops) times_.assign(started_.size(), OpTime{});

  const auto total = static_cast<uint32_t>(started_.size());
  for (uint32_t g = 0; g < total; ++g)
    if (missing_[g] == 0 && chan_prev_[g] == kNone && !started_[g]) start(g, 0.0);
  while (!queue_.empty()) {
    const Event e = queue_.top();
    queue_.pop();
    ++result_.events;
    if (e.kind == EventKind::op_done) {
      finish(e.id, e.t);
      continue;
    }
    Flight& f = flights_[e.id];
    const double end = book(hops_[f.next_hop], e.t, f.bytes);
    if (++f.next_hop == f.end_hop)
      deliver(f.recv, end);
    else
      push(end, EventKind::next_hop, e.id);
  }
  if (result_.ops != total) {
    for (uint32_t g = 0; g < total; ++g)
      if (!done_[g]) {
        const int r = rank_of_[g];
        fail(ErrorCode::internal, "simulate: deadlock: ", total - result_.ops,
             " ops never completed, first rank ", r, " op ", g - base_[static_cast<size_t>(r)],
             " (", describe(op(g)), ")",
             started_[g] ? " started but its message never arrived" : " never started");
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
