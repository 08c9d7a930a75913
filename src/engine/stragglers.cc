#include "engine/stragglers.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace chorus::detail {

std::vector<StragglerStats> attribute_stragglers(const std::vector<RankArrivals>& ranks,
                                                 size_t window,
                                                 std::vector<CallVerdict>* verdicts) {
  const size_t n = ranks.size();
  std::vector<StragglerStats> out(n);
  for (size_t r = 0; r < n; ++r) out[r].rank = static_cast<int>(r);
  if (n == 0) return out;
  // The calls every rank has, by number, on rank 0's clock.
  std::map<uint32_t, std::vector<int64_t>> at;
  for (size_t r = 0; r < n; ++r)
    for (const RankArrivals::Call& c : ranks[r].calls) {
      auto& v = at[c.number];
      if (v.empty()) v.assign(n, INT64_MIN);
      v[r] = c.arrival_ns + ranks[r].offset_ns;
    }
  std::vector<std::pair<uint32_t, std::vector<int64_t>>> calls;
  for (auto& [number, v] : at)
    if (std::none_of(v.begin(), v.end(), [](int64_t t) { return t == INT64_MIN; }))
      calls.emplace_back(number, std::move(v));
  if (window > 0 && calls.size() > window)
    calls.erase(calls.begin(), calls.end() - static_cast<ptrdiff_t>(window));

  int64_t largest_error = 0;
  for (const RankArrivals& a : ranks) largest_error = std::max(largest_error, a.error_ns);
  std::vector<std::vector<double>> late(n);
  std::vector<double> caused(n, 0.0);
  double waited = 0;
  for (const auto& [number, v] : calls) {
    const auto first = std::min_element(v.begin(), v.end());
    const auto last = std::max_element(v.begin(), v.end());
    const size_t f = static_cast<size_t>(first - v.begin());
    const size_t l = static_cast<size_t>(last - v.begin());
    CallVerdict verdict;
    verdict.number = number;
    verdict.last_rank = static_cast<int>(l);
    verdict.late_ns = *last - *first;
    verdict.attributed = verdict.late_ns > ranks[l].error_ns + ranks[f].error_ns;
    for (size_t r = 0; r < n; ++r) late[r].push_back(static_cast<double>(v[r] - *first) * 1e-9);
    const double spread = static_cast<double>(verdict.late_ns) * 1e-9;
    waited += spread;
    if (verdict.attributed) {
      ++out[l].last_count;
      caused[l] += spread;
    }
    if (verdicts != nullptr) verdicts->push_back(verdict);
  }
  for (size_t r = 0; r < n; ++r) {
    StragglerStats& s = out[r];
    s.calls = static_cast<int>(calls.size());
    s.error_s = static_cast<double>(ranks[r].error_ns + largest_error) * 1e-9;
    s.wait_share = waited > 0 ? caused[r] / waited : 0.0;
    std::vector<double>& l = late[r];
    if (l.empty()) continue;
    double sum = 0;
    for (double x : l) sum += x;
    s.mean_late_s = sum / static_cast<double>(l.size());
    // The nearest-rank 90th percentile.
    std::sort(l.begin(), l.end());
    const size_t k = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(l.size())));
    s.p90_late_s = l[std::max<size_t>(k, 1) - 1];
  }
  return out;
}

}  // namespace chorus::detail
