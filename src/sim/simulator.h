// The discrete-event simulator: runs the Programs of all N ranks of one
// collective on a network model and reports the time it takes.
//
// Rules, the executor's and the verifier's (schedule/program.h, matching.h):
//   - an op may start once its deps are done and the previous op of its
//     channel (same peer, same direction) has started;
//   - the k-th send a -> b meets the k-th receive at b from a.
// Cost model (model/cost_model.h), per hop of the message's route
// (sim/topology.h):
//   - a hop requested at time t starts at s = max(t + alpha, the time its send
//     port, receive port and links are free) and holds all of them until
//     s + b/beta; ports and links serve hops in request order (FIFO), a rank
//     picks the earliest-free of its `ports` send (receive) ports;
//   - a multi-hop message is stored and forwarded: the next hop is requested
//     when the previous one ends;
//   - a send completes when its first hop ends (the data has left the source);
//     a message is delivered when its last hop ends; eager: it moves whether or
//     not the receive has started;
//   - recv completes at max(started, delivered); recv_reduce and reduce add
//     gamma * bytes; copy costs nothing.
// One-sided ops (schedule/program.h):
//   - a get of b bytes from peer q at rank r is a transfer q -> r along the
//     route, requested when the get starts, priced as a message (alpha +
//     b/beta per hop) but holding only the reader's side: r's receive port
//     (its engine, and a core of its host, on a class that takes turns),
//     never q's send port or core (q's CPU takes no part in a read);
//     get_reduce adds gamma * b after the data arrives, as recv_reduce does;
//   - a signal completes when it starts and holds no port; its flag reaches
//     the peer after the alphas of the route's hops (one alpha on switch);
//   - where a link class has a fitted flag_alpha (LinkParams), a signal's
//     hop and a get's hop wait that instead of alpha: flags and gets are
//     plain memory accesses, without a message's per-message work, so a get
//     of b bytes over one hop takes flag_alpha + b per_byte(b);
//   - a wait completes at max(started, its signal's arrival). Within one
//     call the signal from q to r with flag f meets r's wait on (q, f); a
//     wait without its signal, two signals or two waits of one (q, r, f), a
//     flag >= kMaxFlags or a peer out of range are invalid_argument; a
//     signal that no wait meets costs nothing;
//   - window regions are local memory: copy and reduce on them as on any.
// The fitted machine model adds, where the topology and options carry them:
//   - a link class's per-byte time by message size (LinkParams::curve);
//   - half-duplex classes: the receiving rank's engine (its send port) is
//     the receive port, so a rank's sends and receives take turns;
//   - hosts (Topology::set_hosts): a hop also books mem_traffic * b bytes
//     (times the share that streams through DRAM, streaming_fraction of the
//     copy curve, when SimOptions::copy is set) on the memory of the
//     sender's and the receiver's host (half each) and
//     ends when both its ports and its memory booking are done; a get's hop
//     books a copy's traffic instead, ComputeModel::kCopyTraffic (2) per byte
//     (it reads the peer's memory and writes the reader's); a host with
//     `cores` has that many CPUs, and every engine booking (a half-duplex hop
//     at both ends, local work) also takes the earliest-free one;
//   - local work priced by SimOptions::copy / kernel (above).
// Memory, like ports and links, serves its bookings in request order.
// Ties at equal times are served in a fixed order (event creation order), so
// results are deterministic.
#pragma once

#include "model/cost_model.h"
#include "schedule/program.h"
#include "sim/topology.h"

#include <cstddef>
#include <span>
#include <vector>

namespace chorus {

struct SimOptions {
  int ports = 1;     // send ports and receive ports per rank: 1 or 2
  double gamma = 0;  // seconds per reduced byte
  size_t elem_size = 1;
  bool record_ops = false;  // fill SimResult::op_times (chorus-sim --trace)
  // The fitted machine model's compute rates (model/machine_model.h), not
  // owned. With `copy` set, local work runs on the rank's engine (its first
  // send port) after the work before it there, and draws on its host's
  // memory: a copy costs copy(b) b, a reduce or divide kernel(b) b, and a
  // receive or get that reduces the kernel's excess over a copy, max(0,
  // kernel(b) - copy(b)) b, after its data arrives. `kernel` unset: gamma per
  // byte.
  const RateCurve* copy = nullptr;
  const RateCurve* kernel = nullptr;
};

// When an op started and completed, in simulated seconds.
struct OpTime {
  double start = 0;
  double end = 0;
};

struct SimResult {
  double time = 0;                // when the last op of any rank completes
  std::vector<double> rank_time;  // per rank
  size_t ops = 0;                 // ops executed
  size_t messages = 0;            // sends
  size_t gets = 0;                // one-sided reads (get, get_reduce)
  size_t signals = 0;             // flags raised
  size_t hops = 0;                // link traversals (messages and gets on switch)
  size_t events = 0;              // events popped from the queue
  double bytes = 0;               // bytes moved (sent or read), summed over hops
  double max_port_busy = 0;       // busiest port: seconds occupied
  double max_link_busy = 0;       // busiest shared link: seconds occupied
  // With SimOptions::record_ops: op_times[r][i] is rank r's op i.
  std::vector<std::vector<OpTime>> op_times;
};

// How a rank names the peers of a Program it shares with others
// (ProgramSource::shape): peer p of that Program is its peer rename(p).
struct PeerRename {
  enum class How : uint8_t { same, rotate, xor_bits };
  How how = How::same;
  int by = 0;      // rotate: (p + by) mod nranks; xor_bits: p ^ by
  int nranks = 1;  // rotate
  // >= 0: every rank whose shape comes with this number has this very shape
  // (kinds, counts, deps); the run then keeps one copy of their deps.
  int shape = -1;
  int operator()(int p) const {
    switch (how) {
      case How::rotate: {
        const int q = p + by;
        return q >= nranks ? q - nranks : q;
      }
      case How::xor_bits:
        return p ^ by;
      case How::same:
        break;
    }
    return p;
  }
};

// The Programs of a run, asked for one rank at a time: the simulator reads
// each rank's once, in rank order, into its own compact per-op state, so the
// N Programs need never exist together (algorithms/simulate.h builds each
// when asked, or one per class of ranks). A rank's exact Program is asked
// again only to name one of its ops in an error.
class ProgramSource {
 public:
  virtual ~ProgramSource() = default;
  virtual int nranks() const = 0;
  // Rank r's Program (0 <= r < nranks()); valid until the next call.
  virtual const Program& program(int rank) = 0;
  // What the run reads of rank r: a Program with r's op kinds, element
  // counts, deps, steps and flags, whose peer p is r's peer rename(p) (its
  // regions may be another rank's); valid until the next call. By default
  // program(r) itself.
  virtual const Program& shape(int rank, PeerRename& rename) {
    rename = PeerRename{};
    return program(rank);
  }
};

// Programs that all exist already: programs[r] is rank r's.
class ProgramSpan final : public ProgramSource {
 public:
  explicit ProgramSpan(std::span<const Program> programs) : programs_(programs) {}
  int nranks() const override { return static_cast<int>(programs_.size()); }
  const Program& program(int rank) override { return programs_[static_cast<size_t>(rank)]; }

 private:
  std::span<const Program> programs_;
};

// Simulates programs[r] as rank r's Program on `topology` (which must have
// programs.size() ranks). Throws Error(invalid_argument) on programs that do
// not match (naming the ops) and Error(internal) on a deadlock (naming a
// stuck op).
SimResult simulate(std::span<const Program> programs, const Topology& topology,
                   const SimOptions& options);
// The same with each rank's Program taken from `programs` when the run
// reaches it; the result is the same as with all of them built first.
SimResult simulate(ProgramSource& programs, const Topology& topology, const SimOptions& options);

}  // namespace chorus
