// The fitted machine model: the alpha-beta-gamma model of the seeds with the
// terms this machine shows, and the fits that recover them from measurements.
//
// Terms (docs/ALGORITHMS.md, "The machine model"):
//   per link class (LinkParams, cost_model.h):
//     alpha         per-message overhead
//     curve         per-byte time as a function of message size: a cache-
//                   resident message moves several times faster than one that
//                   streams through DRAM
//     half_duplex   whether a rank's sends and receives share one engine (the
//                   CPU copies both ways over shm and loopback tcp)
//     mem_traffic   host memory bytes per byte moved
//     flag_alpha    where ranks share memory: a signal's latency, and the
//                   fixed time of a get (a memory read with no message
//                   overhead), in place of alpha
//   per host (HostParams):
//     memory        bandwidth shared by every copy, reduction and transfer of
//                   the ranks of a host
//     cores         CPUs shared by the ranks' engines (4 ranks on 2 cores run
//                   two at a time)
//   compute (ComputeModel):
//     copy          per-byte time of a local copy, by size
//     kernels       per-byte time of dst = dst (op) src, by dtype, op, size;
//                   a receive that reduces pays the kernel's excess over a copy
//
// The fits take what the calibration probes measure (tune/calibration.h):
//   fit_link_model     ping-pong half round trips at many sizes: alpha by
//                      least squares over the small sizes (t = alpha + c b),
//                      the curve from each larger size's time beyond alpha
//   fit_rate_curve     timed kernel or copy runs: seconds / bytes per size
//   fit_memory         one copy alone against K at once on K ranks
//   fit_half_duplex    a bidirectional exchange against the ping-pong's time
// flag_alpha needs no fit: it is half the median round trip of a flag
// ping-pong (tune/calibration.cc).
// Each fit is exact on data the model itself generates (tests/model).
#pragma once

#include "model/cost_model.h"

#include <chorus/types.h>

#include <map>
#include <span>
#include <string>

namespace chorus {

// The shared resources of one host. 0 means unlimited.
struct HostParams {
  double memory = 0;  // bytes per second of memory traffic, all ranks together
  int cores = 0;      // CPUs the ranks' engines share
  friend bool operator==(const HostParams&, const HostParams&) = default;
};

struct ComputeModel {
  RateCurve copy;                            // local memcpy
  std::map<std::string, RateCurve> kernels;  // by kernel_key
  // Memory traffic per byte: a copy reads and writes, a reduction reads two
  // inputs and writes one.
  static constexpr double kCopyTraffic = 2;
  static constexpr double kReduceTraffic = 3;

  bool empty() const { return copy.empty() && kernels.empty(); }
  // The curve of (type, op): its own, else the type's sum, else nullptr.
  const RateCurve* kernel(DataType type, ReduceOp op) const;
  friend bool operator==(const ComputeModel&, const ComputeModel&) = default;
};

// "float32.sum".
std::string kernel_key(DataType type, ReduceOp op);

// How much of a transfer or copy of `bytes` streams through DRAM, from 0 (it
// stays in cache) to 1: where the copy curve at `bytes` lies between its
// fastest (cache) and slowest (DRAM) per-byte time. 1 when the curve has no
// spread (one point, or flat): then every byte counts.
double streaming_fraction(const RateCurve& copy, double bytes);

// One measurement: `seconds` for `bytes`.
struct Sample {
  double bytes = 0;
  double seconds = 0;
};

// Sizes up to this many bytes fit alpha (and a constant per-byte time).
inline constexpr double kAlphaFitMaxBytes = 4096;

// alpha and the per-byte curve of a link from ping-pong half round trips
// (at least two sizes up to kAlphaFitMaxBytes; sizes distinct). The curve has
// a point at every size above kAlphaFitMaxBytes, and one at the largest of
// the small sizes carrying the least-squares slope; beta is the curve's value
// at the largest size (the streaming rate). Throws Error(invalid_argument) on
// too few samples.
LinkParams fit_link_model(std::string name, std::span<const Sample> half_rtts);

// seconds / bytes at each size (sorted; distinct sizes).
RateCurve fit_rate_curve(std::span<const Sample> runs);

// Host memory bandwidth from a probe in which each of `ranks` ranks copies
// `bytes` (2 bytes of traffic per byte): `alone` is one copy's time with the
// others idle, `together` the slowest one's time when all copy at once. With
// `cores` CPUs, ceil(ranks / cores) * alone is what the CPUs alone explain;
// only the time beyond that (by more than 5%) is the memory's. 0 (unlimited)
// when the memory never limited.
double fit_memory(double bytes, int ranks, int cores, double alone, double together);

// Whether a link is half duplex: `bidir` is the time of both ends of a pair
// sending `bytes` to each other at once, and the link's ping-pong model
// predicts `one_way` for one such message; half duplex when bidir is closer
// to 2 * one_way than to one_way.
bool fit_half_duplex(double one_way, double bidir);

// The same at every size of an exchange sweep: sets link.half_duplex and
// link.half_duplex_from to the smallest size from which every exchange
// (`bidir`: both ends of a pair sending at once) is half duplex against the
// link's own ping-pong model; not half duplex when the largest is not.
void fit_half_duplex(LinkParams& link, std::span<const Sample> bidir);

}  // namespace chorus
