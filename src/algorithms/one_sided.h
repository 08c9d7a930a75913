// What the one-sided algorithms (one_shot.cc, two_shot.cc, window_*.cc)
// share: their flag numbers, the support check, and the two halves of
// every one-sided Program, the opening handshake and the closing one.
//
// A one-sided Program of rank r runs in three parts:
//   1. Staging (user buffers only): copy what peers will read into the
//      staging window, then signal kReady to every peer. With the call's
//      buffers in windows (spec.window_buffers) nothing is copied: peers read
//      the buffers in place, and kReady says the rank has entered the call.
//   2. The algorithm's gets, each after the wait for the signal that the
//      peer raised once the data it reads was in place.
//   3. kDone to every peer once this rank has read all it reads, then a wait
//      for every peer's kDone: nothing a peer reads is changed (the call's
//      own buffers, which return to the caller, or the staging window, which
//      the next call overwrites) before the peer has read it.
#pragma once

#include "algorithms/algorithm.h"

#include <vector>

namespace chorus::one_sided {

// The flags a one-sided Program raises at each peer, once per call.
inline constexpr uint32_t kReady = 0;    // what this rank shares is in place
inline constexpr uint32_t kReduced = 1;  // this rank's reduced block is in place
inline constexpr uint32_t kDone = 2;     // this rank has read all it reads of the peer

// Part 1: where the call's buffers are not in windows, copies the `count`
// elements of Input into the staging window (and marks them as the shared
// input); then kReady to every peer, and a wait for every peer's.
struct Opening {
  std::vector<OpIndex> staged;  // the staging copy, if any
  std::vector<OpIndex> ready;   // ready[q]: the wait for peer q's kReady
  size_t at = 0;                // where Input is staged in the window
  bool staging() const { return !staged.empty(); }
};
Opening open(ProgramBuilder& b, const CollectiveSpec& spec, size_t count);

// Declines a spec whose ranks share no windows, naming why.
Support needs_windows(const CollectiveSpec& spec);

// Signals `flag` to every peer (after `deps`); returns the signals.
std::vector<OpIndex> signal_all(ProgramBuilder& b, int rank, int nranks, uint32_t flag,
                                const std::vector<OpIndex>& deps, uint32_t step);
// Waits for `flag` from every peer; waits[q] is the wait for peer q (and
// waits[rank] is unused).
std::vector<OpIndex> wait_all(ProgramBuilder& b, int rank, int nranks, uint32_t flag,
                              uint32_t step);
// Part 3: kDone to every peer after `reads`, then every peer's kDone. Returns
// the waits (the Program's last ops).
std::vector<OpIndex> close(ProgramBuilder& b, int rank, int nranks,
                           const std::vector<OpIndex>& reads, uint32_t step);

}  // namespace chorus::one_sided
