// The tuner: picks, for each collective call with no algorithm named, the
// algorithm of least predicted time, from link parameters that are either
// calibrated at communicator creation or read from a tuning file.
//
// Agreement: every rank must pick the same algorithm for the same call. The
// pick depends only on (collective, N, count, element size, root, segment)
// and on the link parameters, and the parameters are made identical on all
// ranks: calibration ends with an allreduce (max) of what the rank pairs
// measured, and a tuning file is the same file everywhere.
//
// Where parameters come from, in this order (install_tuner):
//   1. CHORUS_TUNING_FILE (Config::tuning_file), the entry of the transport's
//      link class ("inproc", "shm", "tcp"; "shm+tcp" uses "tcp");
//   2. for shm and tcp, a calibration at creation: ping-pong of a small and a
//      large message between ranks 2i and 2i+1 (a bounded, fixed number of
//      round trips: milliseconds);
//   3. for inproc (ranks as threads, the test harness) the built-in defaults
//      below: no calibration, so run_ranks-based tests stay fast and their
//      algorithm choices do not depend on the load of the machine.
//
// Tuning file (JSON), written by write_tuning_file (chorus-perf --calibrate):
//   {"format": "chorus-tuning", "version": 1,
//    "gamma_s_per_B": 1e-10, "ports": 1,
//    "links": {"shm": {"alpha_s": 1.2e-6, "beta_Bps": 8.5e9},
//              "tcp": {"alpha_s": 2.5e-5, "beta_Bps": 1.1e9}},
//    "rules": [{"collective": "allreduce", "link": "shm", "ranks": 2,
//               "min_bytes": 8, "algorithm": "recursive_doubling"}, ...]}
//
// Rules are measured decisions: chorus-perf --calibrate times every algorithm
// at each size of a sweep and records the fastest. For a call whose
// (collective, link class, N) has rules, the tuner takes the algorithm of the
// rule with the largest min_bytes not above the call's size (the smallest rule
// below the first size), when that algorithm supports the call on every rank;
// otherwise, and for every call without rules, the model decides. A model is
// a model: the rules correct it where an implementation's real costs (copies,
// wake-ups, segment overheads) differ from alpha-beta-gamma.
#pragma once

#include "algorithms/algorithm.h"
#include "model/cost_model.h"

#include <chorus/communicator.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace chorus {

namespace detail {
class CommunicatorImpl;
}

// In-process ranks hand messages over through memory: about a microsecond of
// wake-up and a memcpy bandwidth of a few GB/s on a loaded host.
inline constexpr double kInprocAlpha = 1e-6;
inline constexpr double kInprocBeta = 4e9;
// A float sum streams two inputs and one output through the cache at roughly
// 10 GB/s: 0.1 ns per reduced byte.
inline constexpr double kDefaultGamma = 1e-10;

// One measured decision (see the tuning file above). Sizes are the
// collective's M: the vector for allreduce, broadcast, reduce; the gathered
// output for allgather; the input for reduce_scatter and alltoall.
struct TuningRule {
  Collective collective = Collective::allreduce;
  std::string link;
  int nranks = 0;
  size_t min_bytes = 0;
  std::string algorithm;
  friend bool operator==(const TuningRule&, const TuningRule&) = default;
};

struct TuningTable {
  std::map<std::string, LinkParams> links;  // by link class
  std::vector<TuningRule> rules;
  double gamma = kDefaultGamma;
  int ports = 1;
};

// JSON text <-> table; bad text throws Error(invalid_argument) naming `where`.
TuningTable tuning_from_json(std::string_view text, std::string_view where);
std::string tuning_to_json(const TuningTable& table);
TuningTable read_tuning_file(const std::string& path);
// Writes `table`, keeping the link classes of an existing file at `path` that
// `table` does not mention (so shm and tcp can be calibrated separately).
void write_tuning_file(const std::string& path, const TuningTable& table);

// The link class the tuner uses for a transport name.
std::string link_class_of(std::string_view transport_name);

struct CalibrationOptions {
  size_t small_bytes = 8;
  size_t large_bytes = 256 << 10;
  int small_round_trips = 8;
  int large_round_trips = 3;
};

// Measures alpha and beta of the communicator's link class. Collective: every
// rank calls it and all get the same answer (the slowest pair's alpha and
// beta, agreed by an allreduce). One rank alone gets the inproc defaults.
LinkParams calibrate(detail::CommunicatorImpl& comm, const CalibrationOptions& options = {});
LinkParams calibrate(Communicator& comm, const CalibrationOptions& options = {});

// How much faster than the best candidate so far a later one (in registry
// order) must be predicted to replace it: the model misses costs of that
// size, so a smaller predicted edge is no edge.
inline constexpr double kTunerPickMargin = 0.05;

// Picks algorithms for one communicator. Not thread-safe (a communicator is
// used by one thread at a time).
class Tuner {
 public:
  Tuner(int nranks, int rank, CostParams params);
  // Measured decisions for this communicator (rules of other collectives,
  // link classes or N are ignored by pick()).
  void set_rules(std::vector<TuningRule> rules) { rules_ = std::move(rules); }

  // Predicted time of `algo` for `spec`: its closed form, or, where it has
  // none, a simulation of its Programs on a switch with these parameters.
  double predict(const Algorithm& algo, const CollectiveSpec& spec);
  // The supported algorithm of least predicted time (ties: registry order),
  // or nullptr when none supports the call.
  const Algorithm* pick(const CollectiveSpec& spec);

  const CostParams& params() const { return params_; }
  // Receives one line per (collective, size class) the first time it is
  // picked: every candidate's predicted time and the pick.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }

 private:
  int nranks_;
  int rank_;
  CostParams params_;
  std::function<void(const std::string&)> log_;
  std::vector<TuningRule> rules_;
  // The rule's algorithm for spec, when rules cover it and it serves the call.
  const Algorithm* rule_pick(const CollectiveSpec& spec) const;
  using Key = std::tuple<Collective, size_t, size_t, int, size_t>;
  std::map<Key, const Algorithm*> picks_;
  std::set<std::pair<Collective, int>> logged_;
};

// Builds the tuner for `comm` (parameters as described above) and installs it
// as its selector. Collective when it calibrates: every rank calls it at
// creation.
void install_tuner(detail::CommunicatorImpl& comm);

}  // namespace chorus
