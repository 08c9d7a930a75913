// The alpha-beta-gamma cost model: link parameters, the seed's lower bounds of
// every collective, and each algorithm's closed-form time.
//
// Model (the seeds' and the simulator's, src/sim): a message of b bytes costs
// alpha + b/beta; for b/beta it occupies one send port of the sender and one
// receive port of the receiver (alpha is latency, not port time); reducing b
// bytes costs gamma * b; a rank has `ports` send ports and as many receive
// ports (1 or 2).
//
// M, "the message size" of a closed form, is per rank and follows the seeds:
//   allreduce, broadcast, reduce: count * elem_size (the vector)
//   allgather:                    N * count * elem_size (the gathered output)
//   reduce_scatter:               N * count * elem_size (the input)
//   alltoall:                     N * count * elem_size (one rank's input)
//   barrier:                      0
//
// Closed forms live with their algorithms (src/algorithms), one small function
// each beside the header comment that states it. Each is the exact time of that
// algorithm's actual Program under the model, on the topologies and port counts
// it names, when the chunking is even (N divides count, and powers of two do
// for the halving algorithms); tests hold the simulator to them at a relative
// 1e-9. A case a form does not cover gets a Prediction with ok == false and the
// reason: never a silent zero. This file holds what they share: parameters,
// the model's M, the lower bounds, and the ClosedForm record.
#pragma once

#include "schedule/collective.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus {

// A cost per byte that depends on how many bytes are moved at once: points
// (bytes, seconds per byte) sorted by bytes, interpolated linearly in
// log2(bytes) and held constant beyond the first and last point. It is how
// the fitted model (model/machine_model.h) tells a cache-resident message from
// one that streams through DRAM.
struct RatePoint {
  double bytes = 0;
  double s_per_byte = 0;
  friend bool operator==(const RatePoint&, const RatePoint&) = default;
};
struct RateCurve {
  std::vector<RatePoint> points;
  bool empty() const { return points.empty(); }
  // Seconds per byte for a transfer of `bytes` (NaN when empty).
  double at(double bytes) const;
  friend bool operator==(const RateCurve&, const RateCurve&) = default;
};

// alpha and beta of one class of links ("shm", "tcp", or a class a simulated
// topology defines, e.g. "intra" / "inter" of hier:K), and the fitted terms of
// the machine model where a calibration measured them.
struct LinkParams {
  LinkParams() = default;
  // The seeds' model: alpha and beta only.
  LinkParams(std::string name_, double alpha_, double beta_)
      : name(std::move(name_)), alpha(alpha_), beta(beta_) {}

  std::string name;
  double alpha = 0;  // seconds per message
  double beta = 1;   // bytes per second, per port and direction
  // Fitted: per-byte time by message size; when set it replaces 1/beta.
  RateCurve curve;
  // Fitted: a rank's sends and receives on this class are done by one engine
  // (its CPU copies both ways, as over shm and loopback tcp), so they do not
  // overlap; false: full duplex ports, as a NIC has.
  bool half_duplex = false;
  // Fitted: messages below this many bytes still overlap both ways (small
  // copies run while the peer's do); 0: every size takes turns.
  double half_duplex_from = 0;
  bool takes_turns(double bytes) const { return half_duplex && bytes >= half_duplex_from; }
  // Bytes of host memory traffic per byte moved (charged to the host memory
  // resource of the simulator's topology; 0: none). Two copies, each a read
  // and a write: 4 over shm and loopback tcp.
  double mem_traffic = 0;
  // Fitted: seconds every collective call costs beyond its messages and
  // local work (the executor's stamps, plan lookup and dispatch).
  double call_overhead = 0;
  // Fitted where the ranks share memory: seconds from a signal (a store into
  // a flag of the peer's control window, transport/window.h) to the peer
  // seeing it. A flag is one cache line and a get a plain memory read, with
  // none of a message's per-message work (slots, matching), so both pay this
  // rather than alpha: a signal arrives after it, a get of b bytes takes
  // flag_alpha + b x per_byte(b). Negative: not fitted, and alpha stands in.
  double flag_alpha = -1;

  bool flag_alpha_fitted() const { return flag_alpha >= 0; }
  // The fixed time of a signal or a get.
  double one_sided_alpha() const { return flag_alpha_fitted() ? flag_alpha : alpha; }

  // Seconds per byte of a message of `bytes`.
  double per_byte(double bytes) const { return curve.empty() ? 1 / beta : curve.at(bytes); }
  // 1 / per_byte(bytes).
  double beta_at(double bytes) const { return 1 / per_byte(bytes); }
};

// Everything a closed form depends on besides N and M.
struct CostParams {
  double alpha = 0;  // s per message
  double beta = 1;   // B/s per port and direction
  double gamma = 0;  // s per reduced byte
  int ports = 1;     // send ports per rank (and receive ports): 1 or 2
  // Pipelining segment of segmented algorithms (chains, trees), in bytes;
  // 0 means their default (schedule/chunking.h: kDefaultSegmentBytes).
  size_t segment_bytes = 0;
};

// The model's M for a call (see above), in bytes.
double model_bytes(Collective collective, int nranks, size_t count, size_t elem_size);

// The seed's lower bounds. latency = ceil(log2 N) alpha (information must reach
// every rank and at most doubles per round); bandwidth, with d = ports:
//   allreduce, reduce_scatter, allgather, alltoall: (N-1) M / (N d beta)
//     (a rank must receive (N-1)/N of M from outside, and send as much)
//   broadcast, reduce: M / (d beta) (every non-root must receive all of M,
//     resp. the root must receive M worth of partial results)
//   barrier: 0
// combined = max(latency, bandwidth). N == 1 gives zero.
struct LowerBound {
  double latency = 0;
  double bandwidth = 0;
  double combined() const { return latency > bandwidth ? latency : bandwidth; }
};
LowerBound lower_bound(Collective collective, int nranks, double bytes, const CostParams& params);

// A closed-form answer: ok with the time, or not ok with the reason.
struct Prediction {
  bool ok = false;
  double seconds = 0;
  std::string reason;  // when !ok

  static Prediction time(double s) { return {true, s, {}}; }
  static Prediction none(std::string why) { return {false, 0, std::move(why)}; }
};

// One closed form of an algorithm: its time under the model, and where it is
// exact. Algorithms carry theirs (algorithms/algorithm.h).
struct ClosedForm {
  // The form itself, for N >= 2: call at(), which answers N = 1 (nothing to
  // do, whatever the algorithm) without it.
  Prediction (*time)(int nranks, double bytes, const CostParams& params);
  // Where the form is exact: port counts (0 = either) and the simulator
  // topologies (space-separated) whose routes it assumes.
  int ports = 0;
  std::string_view topologies;
  std::string_view text;  // the formula, for docs and --help

  Prediction at(int nranks, double bytes, const CostParams& params) const {
    return nranks <= 1 ? Prediction::time(0) : time(nranks, bytes, params);
  }
};

// The seed's table of AllReduce costs, which docs/PERFORMANCE.md's testbed
// tables compare measured times with (bench/testbed/analyze.py, through
// chorus-verify --closed-forms --json). alpha and beta only, L = log2 N:
//   ring                 2(N-1) alpha + 2(N-1)/N M/beta
//   halving_doubling     2L alpha + 2(N-1)/N M/beta, N = 2^k
//   double_binary_tree   2L alpha + L M/beta
//   reduce_broadcast     2 ceil(L) alpha + 2 ceil(L) M/beta (the seed's "naive")
//   recursive_doubling   L alpha + L M/beta, N = 2^k (not the seed's: the
//                        algorithm's own form at gamma = 0)
// These are the seed's estimates, not the model's exact times (the
// algorithms' closed forms are): they ignore ports, pipelining and queueing.
// Other algorithms and N: none, with the reason.
Prediction seed_allreduce_time(std::string_view algorithm, int nranks, double bytes,
                               const CostParams& params);

// Whether `form` is exact on simulator topology `topology` at N ranks with
// `ports` ports ("hypercube" routes match the halving partners only for N a
// power of two).
bool closed_form_applies(const ClosedForm& form, std::string_view topology, int nranks, int ports);

}  // namespace chorus
