#include "model/machine_model.h"

#include "core/check.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace chorus {

std::string kernel_key(DataType type, ReduceOp op) {
  return str_cat(to_string(type), ".", to_string(op));
}

const RateCurve* ComputeModel::kernel(DataType type, ReduceOp op) const {
  if (auto it = kernels.find(kernel_key(type, op)); it != kernels.end()) return &it->second;
  if (auto it = kernels.find(kernel_key(type, ReduceOp::sum)); it != kernels.end())
    return &it->second;
  return nullptr;
}

double streaming_fraction(const RateCurve& copy, double bytes) {
  if (copy.empty()) return 1;
  double lo = copy.points.front().s_per_byte, hi = lo;
  for (const RatePoint& p : copy.points) {
    lo = std::min(lo, p.s_per_byte);
    hi = std::max(hi, p.s_per_byte);
  }
  if (!(hi > lo * 1.01)) return 1;
  return std::clamp((copy.at(bytes) - lo) / (hi - lo), 0.0, 1.0);
}

namespace {

std::vector<Sample> sorted(std::span<const Sample> in) {
  std::vector<Sample> s(in.begin(), in.end());
  std::sort(s.begin(), s.end(), [](const Sample& a, const Sample& b) { return a.bytes < b.bytes; });
  for (size_t i = 0; i < s.size(); ++i) {
    if (!(s[i].bytes > 0) || !(s[i].seconds >= 0) || !std::isfinite(s[i].seconds))
      fail(ErrorCode::invalid_argument, "model fit: sample ", i, " has bytes ", s[i].bytes,
           " and seconds ", s[i].seconds, " (need bytes > 0, seconds >= 0)");
    if (i > 0 && s[i].bytes == s[i - 1].bytes)
      fail(ErrorCode::invalid_argument, "model fit: two samples of ", s[i].bytes, " bytes");
  }
  return s;
}

}  // namespace

LinkParams fit_link_model(std::string name, std::span<const Sample> half_rtts) {
  const std::vector<Sample> s = sorted(half_rtts);
  // Least squares of t = alpha + c b over the small sizes, each weighted by
  // 1/t^2 so that every size counts by its relative error.
  double sw = 0, sb = 0, st = 0, sbb = 0, sbt = 0;
  size_t small = 0;
  for (const Sample& x : s) {
    if (x.bytes > kAlphaFitMaxBytes) break;
    const double w = 1 / std::max(x.seconds * x.seconds, 1e-30);
    sw += w;
    sb += w * x.bytes;
    st += w * x.seconds;
    sbb += w * x.bytes * x.bytes;
    sbt += w * x.bytes * x.seconds;
    ++small;
  }
  if (small < 2)
    fail(ErrorCode::invalid_argument, "model fit: link ", name, " needs at least two sizes up to ",
         kAlphaFitMaxBytes, " bytes, got ", small);
  const double det = sw * sbb - sb * sb;
  double c = det > 0 ? (sw * sbt - sb * st) / det : 0;
  double alpha = (st - c * sb) / sw;
  if (c < 0 || alpha < 0) {  // noise: keep the physically meaningful one
    c = std::max(c, 0.0);
    alpha = std::max(0.0, (st - c * sb) / sw);
  }
  LinkParams p;
  p.name = std::move(name);
  p.alpha = alpha;
  const Sample& last_small = s[small - 1];
  // A link whose small sizes show no per-byte time still gets a finite one.
  p.curve.points.push_back({last_small.bytes, std::max(c, 1e-15)});
  for (size_t i = small; i < s.size(); ++i) {
    const double beyond = s[i].seconds - alpha;
    // Noise can leave nothing beyond alpha: charge a tenth of the time.
    p.curve.points.push_back({s[i].bytes, std::max(beyond, 0.1 * s[i].seconds) / s[i].bytes});
  }
  p.beta = 1 / p.curve.points.back().s_per_byte;
  return p;
}

RateCurve fit_rate_curve(std::span<const Sample> runs) {
  RateCurve c;
  for (const Sample& x : sorted(runs)) c.points.push_back({x.bytes, x.seconds / x.bytes});
  return c;
}

double fit_memory(double bytes, int ranks, int cores, double alone, double together) {
  CHORUS_CHECK(ranks >= 1 && bytes > 0 && alone > 0 && together > 0);
  const int waves = cores > 0 ? (ranks + cores - 1) / cores : 1;
  if (ranks < 2 || together <= 1.05 * waves * alone) return 0;
  return ranks * ComputeModel::kCopyTraffic * bytes / together;
}

bool fit_half_duplex(double one_way, double bidir) {
  return std::abs(bidir - 2 * one_way) < std::abs(bidir - one_way);
}

void fit_half_duplex(LinkParams& link, std::span<const Sample> bidir) {
  const std::vector<Sample> s = sorted(bidir);
  link.half_duplex = false;
  link.half_duplex_from = 0;
  for (size_t i = s.size(); i-- > 0;) {
    const double one_way = link.alpha + s[i].bytes * link.per_byte(s[i].bytes);
    if (!fit_half_duplex(one_way, s[i].seconds)) break;
    link.half_duplex = true;
    link.half_duplex_from = s[i].bytes;
  }
  // The smallest size measured stands for every size below it.
  if (link.half_duplex && !s.empty() && link.half_duplex_from == s.front().bytes)
    link.half_duplex_from = 0;
}

}  // namespace chorus
