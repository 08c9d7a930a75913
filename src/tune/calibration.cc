#include "tune/calibration.h"

#include "core/check.h"

#include <algorithm>
#include <vector>

namespace chorus {
namespace {

// Waits until every request in `ids` has completed.
void wait_all(Transport& t, std::vector<RequestId> ids, Deadline deadline, int peer) {
  std::vector<RequestId> done;
  while (!ids.empty()) {
    done.clear();
    t.wait_some(done, deadline);
    for (RequestId d : done) std::erase(ids, d);
    if (!ids.empty() && done.empty() && Clock::now() >= deadline)
      fail(ErrorCode::timeout, "rank ", t.rank(), ": calibration: timeout waiting for peer ", peer);
  }
}

// Median half round trip of `trials` ping-pongs of `bytes` with `peer` (after
// `warmup` untimed ones); the lower rank of the pair pings.
double half_round_trip(Transport& t, int peer, size_t bytes, int trials, int warmup,
                       Deadline deadline) {
  std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
  const bool pinger = t.rank() < peer;
  std::vector<double> times;
  for (int i = 0; i < warmup + trials; ++i) {
    const auto start = Clock::now();
    if (pinger) {
      const RequestId r = t.irecv(peer, in.data(), bytes, nullptr);
      wait_all(t, {t.isend(peer, out.data(), bytes), r}, deadline, peer);
    } else {
      wait_all(t, {t.irecv(peer, in.data(), bytes, nullptr)}, deadline, peer);
      wait_all(t, {t.isend(peer, out.data(), bytes)}, deadline, peer);
    }
    if (i >= warmup)
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / 2);
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  return times[times.size() / 2];
}

}  // namespace

LinkParams fit_link(std::string name, double small, double large, size_t small_bytes,
                    size_t large_bytes) {
  CHORUS_CHECK(large_bytes > small_bytes);
  const double extra = large - small;
  const double bytes = static_cast<double>(large_bytes - small_bytes);
  // Timer noise can make the large message look no slower: then the small
  // message's whole time is charged to its bytes, an upper bound on 1/beta.
  const double inv_beta = extra > 0 ? extra / bytes : small / static_cast<double>(large_bytes);
  const double alpha = std::max(0.0, small - static_cast<double>(small_bytes) * inv_beta);
  return {std::move(name), alpha, 1 / inv_beta};
}

void agree_max(Transport& t, std::span<double> values, Deadline deadline) {
  const size_t bytes = values.size_bytes();
  if (t.size() == 1 || bytes == 0) return;
  if (t.rank() == 0) {
    std::vector<double> theirs(values.size());
    for (int peer = 1; peer < t.size(); ++peer) {
      wait_all(t, {t.irecv(peer, theirs.data(), bytes, nullptr)}, deadline, peer);
      for (size_t i = 0; i < values.size(); ++i) values[i] = std::max(values[i], theirs[i]);
    }
    std::vector<RequestId> sends;
    for (int peer = 1; peer < t.size(); ++peer)
      sends.push_back(t.isend(peer, values.data(), bytes));
    wait_all(t, std::move(sends), deadline, 0);
  } else {
    wait_all(t, {t.isend(0, values.data(), bytes)}, deadline, 0);
    wait_all(t, {t.irecv(0, values.data(), bytes, nullptr)}, deadline, 0);
  }
}

LinkParams calibrate_link(Transport& t, Deadline deadline, const CalibrationOptions& o) {
  const std::string name(t.name());
  if (o.large_bytes <= o.small_bytes || o.small_trials < 1 || o.large_trials < 1 || o.warmup < 0)
    fail(ErrorCode::invalid_argument,
         "calibration: need large_bytes > small_bytes, trials >= 1 and warmup >= 0");
  if (t.size() == 1) return {name, 0, 0};
  const int peer = t.rank() ^ 1;
  // alpha and 1/beta, so that the slowest pair's are the largest.
  double measured[2] = {0, 0};
  if (peer < t.size()) {
    const double small =
        half_round_trip(t, peer, o.small_bytes, o.small_trials, o.warmup, deadline);
    const double large =
        half_round_trip(t, peer, o.large_bytes, o.large_trials, o.warmup, deadline);
    const LinkParams p = fit_link(name, small, large, o.small_bytes, o.large_bytes);
    measured[0] = p.alpha;
    measured[1] = 1 / p.beta;
  }
  agree_max(t, measured, deadline);
  return {name, measured[0], 1 / measured[1]};
}

}  // namespace chorus
