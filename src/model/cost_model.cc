#include "model/cost_model.h"

#include "core/check.h"
#include "schedule/rank_math.h"

#include <cmath>
#include <limits>

namespace chorus {
namespace {

using C = Collective;

}  // namespace

double RateCurve::at(double bytes) const {
  if (points.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (bytes <= points.front().bytes) return points.front().s_per_byte;
  if (bytes >= points.back().bytes) return points.back().s_per_byte;
  size_t i = 1;
  while (points[i].bytes < bytes) ++i;
  const RatePoint& a = points[i - 1];
  const RatePoint& b = points[i];
  const double f = std::log2(bytes / a.bytes) / std::log2(b.bytes / a.bytes);
  return a.s_per_byte + f * (b.s_per_byte - a.s_per_byte);
}

double model_bytes(Collective c, int nranks, size_t count, size_t elem_size) {
  // The call's largest buffer (collective.h's blocks): N blocks where the
  // count is one rank's block.
  const double v = static_cast<double>(count) * static_cast<double>(elem_size);
  if (!has_data(c)) return 0;
  return per_rank_blocks(c) ? v * nranks : v;
}

LowerBound lower_bound(Collective c, int n, double m, const CostParams& p) {
  LowerBound lb;
  if (n <= 1) return lb;
  lb.latency = ceil_log2(n) * p.alpha;
  const double d = p.ports;
  switch (c) {
    case C::allreduce:
    case C::allgather:
    case C::reduce_scatter:
    case C::alltoall:
    case C::gather:   // the root receives N-1 of the N blocks
    case C::scatter:  // the root sends N-1 of the N blocks
      lb.bandwidth = (n - 1) * m / (n * d * p.beta);
      break;
    case C::broadcast:
    case C::reduce:
      lb.bandwidth = m / (d * p.beta);
      break;
    case C::barrier:
      break;
  }
  return lb;
}

Prediction seed_allreduce_time(std::string_view algorithm, int n, double m, const CostParams& p) {
  const double lg = std::log2(n);
  const double a = p.alpha;
  const double b = p.beta;
  // (N-1)/N of the vector, twice: what a rank sends and receives.
  const double twice_most = static_cast<double>(2 * (n - 1)) / n;
  if (algorithm == "ring") return Prediction::time(2 * (n - 1) * a + twice_most * m / b);
  if (algorithm == "double_binary_tree") return Prediction::time(2 * lg * a + lg * m / b);
  if (algorithm == "reduce_broadcast")
    return Prediction::time(2 * std::ceil(lg) * a + 2 * std::ceil(lg) * m / b);
  if (algorithm == "halving_doubling" || algorithm == "recursive_doubling") {
    if (!is_pow2(n))
      return Prediction::none(
          str_cat("the seed's figure for ", algorithm, " assumes a power-of-two N, not ", n));
    if (algorithm == "halving_doubling") return Prediction::time(2 * lg * a + twice_most * m / b);
    return Prediction::time(lg * a + lg * m / b);
  }
  return Prediction::none(str_cat("the seed's table has no figure for allreduce(", algorithm, ")"));
}

bool closed_form_applies(const ClosedForm& f, std::string_view topology, int nranks, int ports) {
  if (f.ports != 0 && f.ports != ports) return false;
  if (topology == "hypercube" && !is_pow2(nranks)) return false;
  for (size_t i = 0; i < f.topologies.size();) {
    size_t j = f.topologies.find(' ', i);
    if (j == std::string_view::npos) j = f.topologies.size();
    if (f.topologies.substr(i, j - i) == topology) return true;
    i = j + 1;
  }
  return false;
}

}  // namespace chorus
