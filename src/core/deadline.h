// The clock every wait in chorus measures against, and the point in time a
// wait gives up at. Transports, stores and the executor all take a Deadline
// rather than a duration, so that one budget spans several waits:
//
//   const Deadline deadline = deadline_after(config.timeout);
//   store.get("addr", deadline);                   // whatever this takes ...
//   connect_with_retry(ep, deadline, "peer 3");    // ... is not left for this
#pragma once

#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// `timeout` from `now`, saturating: a timeout too long to represent (years,
// or milliseconds::max(), which CHORUS_TIMEOUT=inf gives) is no deadline at
// all, Deadline::max(), never an overflow into the past.
inline Deadline deadline_after(std::chrono::milliseconds timeout, Deadline now = Clock::now()) {
  if (timeout.count() <= 0) return now;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now);
  return timeout >= room ? Deadline::max() : now + timeout;
}

}  // namespace chorus
