// Numbers equal values from 0 in order of first appearance: how a rank's
// host identity becomes its host number (bootstrap, splits, run_ranks, the
// calibration, schedule/rank_math.h's HostGroups).
//   {"b", "a", "b", "c"} -> {0, 1, 0, 2}
#pragma once

#include <algorithm>
#include <span>
#include <vector>

namespace chorus {

template <class T>
std::vector<int> number_by_first_seen(std::span<const T> values) {
  std::vector<T> seen;
  std::vector<int> out;
  out.reserve(values.size());
  for (const T& v : values) {
    const auto it = std::find(seen.begin(), seen.end(), v);
    out.push_back(static_cast<int>(it - seen.begin()));
    if (it == seen.end()) seen.push_back(v);
  }
  return out;
}

}  // namespace chorus
