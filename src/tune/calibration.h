// Calibration: alpha and beta of a communicator's links, measured by
// ping-pong over its transport, the same on every rank.
//
// Ranks pair up (2i, 2i+1); in each pair the even rank pings and the odd one
// answers, a small and a large message, `trials` times each after a warm-up.
// The median half round trip of each size gives
//   alpha = t_small - small_bytes / beta,   1/beta = (t_large - t_small) / (large - small)
// (fit_link). Every rank then takes the slowest pair's figures (the largest
// alpha and 1/beta, agreed by agree_max), so that all ranks feed the tuner the
// same parameters and pick alike. A rank without a partner (the last of an
// odd N) contributes nothing.
//
// The communicator calibrates at creation with the quick options (a few
// milliseconds); chorus-perf uses the thorough ones for its %bound column and
// its tuning files.
#pragma once

#include "core/deadline.h"
#include "model/cost_model.h"
#include "transport/transport.h"

#include <cstddef>
#include <span>
#include <string>

namespace chorus {

struct CalibrationOptions {
  size_t small_bytes = 8;
  size_t large_bytes = 256 << 10;
  int small_trials = 8;
  int large_trials = 3;
  int warmup = 1;  // round trips of each size before timing
  // chorus-perf's: 200 small and 10 large round trips of 4 MiB.
  static CalibrationOptions thorough() { return {8, size_t{4} << 20, 200, 10, 3}; }
};

// alpha and beta from the median half round trips of the two sizes. When timer
// noise makes the large message look no slower than the small one, the small
// message's whole time is charged to bytes (an upper bound on 1/beta).
LinkParams fit_link(std::string name, double small_half_rtt, double large_half_rtt,
                    size_t small_bytes, size_t large_bytes);

// Measures the transport's links as described above. Collective: every rank
// of the transport calls it while no other traffic is in flight, and all get
// the same answer. One rank alone gets {name, 0, 0}.
LinkParams calibrate_link(Transport& transport, Deadline deadline,
                          const CalibrationOptions& options = {});

// Every rank's `values` (the same length on all) become their elementwise
// maximum over the ranks: gathered at rank 0, sent back.
void agree_max(Transport& transport, std::span<double> values, Deadline deadline);

}  // namespace chorus
