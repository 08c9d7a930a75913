// The clock every wait in chorus measures against, and the point in time a
// wait gives up at. Transports, stores and the executor all take a Deadline
// rather than a duration, so that one budget spans several waits:
//
//   const Deadline deadline = Clock::now() + config.timeout;
//   store.get("addr", deadline);                   // whatever this takes ...
//   connect_with_retry(ep, deadline, "peer 3");    // ... is not left for this
#pragma once

#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

}  // namespace chorus
