// Straggler attribution (Communicator::stragglers): from every rank's
// arrival times at the same collectives and its clock offset to rank 0, each
// call's last arriver and lateness, and each rank's figures over the calls.
//
// A rank's arrival at a call is the start time its flight recorder keeps
// (engine/flight_recorder.h: read once as the call is submitted, a clock
// read every call makes anyway), so keeping arrivals costs nothing more.
// Its offset to rank 0's clock comes from kClockRounds ping-pongs with rank 0,
// the one of the shortest round trip (Cristian's algorithm): the error of
// that offset is at most half the round trip. A call's lateness (the last
// arrival minus the first, how long the first arriver waited) is attributed
// to its last arriver only beyond the error of the two offsets involved.
#pragma once

#include <chorus/communicator.h>

#include <cstdint>
#include <vector>

namespace chorus::detail {

inline constexpr int kClockRounds = 8;

// One rank's arrivals and clock.
struct RankArrivals {
  int64_t offset_ns = 0;  // rank 0's clock minus this rank's
  int64_t error_ns = 0;   // bound on the offset's error
  struct Call {
    uint32_t number = 0;     // the collective's call number (its stamp)
    int64_t arrival_ns = 0;  // on this rank's clock
  };
  std::vector<Call> calls;  // oldest first
};

// One call's verdict.
struct CallVerdict {
  uint32_t number = 0;
  int last_rank = -1;
  int64_t late_ns = 0;      // last arrival minus first
  bool attributed = false;  // late_ns beyond the error of the two offsets
};

// The figures over the last `window` calls (0: all) that every rank has;
// `verdicts` (may be null) receives each call's, oldest first.
std::vector<StragglerStats> attribute_stragglers(const std::vector<RankArrivals>& ranks,
                                                 size_t window, std::vector<CallVerdict>* verdicts);

}  // namespace chorus::detail
