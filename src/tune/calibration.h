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
//
// The probes' messages between ranks, and the agreement of their figures,
// go through tune/rank_exchange.h (one implementation of those exchanges,
// with their deadline); what is measured lives here.
#pragma once

#include "core/deadline.h"
#include "model/cost_model.h"
#include "model/machine_model.h"
#include "transport/transport.h"
#include "tune/rank_exchange.h"
#include "tune/tuning_file.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

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

// The load of a host at one moment: /proc/stat's procs_running (tasks
// runnable now, the reader included) and /proc/loadavg's 1-minute figure.
struct HostLoad {
  double running = 0;
  double loadavg = 0;
};
// Where calibrations read the load; tests inject one (no real load in tests).
using LoadSampler = std::function<HostLoad()>;
// This host's load from /proc; {0, 0} where /proc cannot be read (nothing
// known counts as quiet).
HostLoad read_host_load();

// Whether a host was busy, from its samples of HostLoad::running taken while
// `local_ranks` ranks of this job ran on it: the median over the samples of
// the other runnable tasks (running - local_ranks, at least 0) exceeds the
// cores those ranks leave free (cores - local_ranks, at least 0). With no
// sample it is quiet. The same rule decides a calibration's `provisional`
// mark and whether a job finds the host quiet at its start.
double median_others_running(const std::vector<double>& running, int local_ranks);
bool host_busy(const std::vector<double>& running, int local_ranks, int cores);

// The probes of the fitted machine model (model/machine_model.h). Quick ones
// run when a communicator has no calibration cached (bounded by about a
// second on the development host); chorus-perf --calibrate runs thorough ones.
struct ModelCalibrationOptions {
  std::vector<size_t> pingpong_sizes;      // ping-pong sweep
  std::vector<size_t> kernel_sizes;        // copy and reduction kernel runs
  int small_trials = 20;                   // round trips per size up to 4 KiB
  int large_trials = 3;                    // above
  int rounds = 1;                          // sweeps of all sizes; each size's fastest counts
  size_t memory_bytes = size_t{32} << 20;  // each rank's copy in the memory probe
  bool all_ops = false;  // kernels of every op; else sum per dtype (others use it)
  // Exchanges before the first measurement, for this long: a process's
  // first few hundred milliseconds run its transport at a fraction of its
  // later speed on the development host (its first ping-pongs measured 2-4x
  // slower than the same ones two seconds later).
  std::chrono::milliseconds warmup{200};
  // The ping-pong sweep stops after the size at which the calibration has
  // run this long (0: no limit), so that slow links stay within budget.
  std::chrono::milliseconds sweep_budget{0};
  // The flag ping-pong (where the transport shares memory): round trips of
  // a signal between ranks 0 and 1 after a warm-up, cut short once the probe
  // has run for flag_budget.
  int flag_round_trips = 2000;
  std::chrono::microseconds flag_budget{5000};
  // This rank's host identity (host_layout); "" for every rank: one host.
  std::string host_identity;
  // Every rank samples its host's load (at each step of the probes) through
  // this; empty: read_host_load.
  LoadSampler load_sampler;
  static ModelCalibrationOptions quick();
  static ModelCalibrationOptions thorough();
};

// What the probes measured, and the model fitted from it. Collective: every
// rank of the transport calls it while no other traffic is in flight, and all
// get the same answer (figures are agreed with agree_max; kernels are timed on
// rank 0 alone, memory with everyone at once). The link is named
// link_class_of(transport.name()). Where the transport shares memory
// (Transport::shares_memory), the link's flag_alpha is half the median round
// trip of a flag between ranks 0 and 1 over a control window (a WindowSet
// whose records go over the transport), the other ranks waiting, at most
// alpha; elsewhere, and where a rank cannot map the window, it is left
// unfitted. One rank alone gets an empty table.
// table.calibration records the load the probes ran under: every rank's
// host judged by host_busy over its own samples, provisional when any host
// was busy (agreed, so the same on every rank), with the largest
// others_running and loadavg over the ranks.
struct ModelCalibration {
  TuningTable table;         // links[class], host, compute, calibration
  std::vector<int> host_of;  // each rank's host, numbered from 0 in rank order
  double seconds = 0;        // how long it took (rank 0's clock)
};
ModelCalibration calibrate_model(Transport& transport, Deadline deadline,
                                 const ModelCalibrationOptions& options);

// Which ranks share a host: ranks that pass equal `identity` strings
// (bootstrap's host_identity(), which the communicator puts in
// Config::host_id). host_of[r] for every rank, hosts numbered from 0 in
// order of their first rank. Collective.
std::vector<int> host_layout(Transport& transport, std::string_view identity, Deadline deadline);

}  // namespace chorus
