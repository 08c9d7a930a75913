// The tuner: for a call with no algorithm named, the algorithm a measured rule
// names, or else the one of least predicted time under the cost model.
//
// Agreement: every rank must pick the same algorithm for the same call. The
// pick depends only on the call (collective, N, count, element size, root,
// segment), on the candidates (supported on every rank: see selector.h) and
// on the parameters, which are identical on all ranks: calibration agrees on
// the slowest pair's figures (calibration.h), and a tuning file is the same
// file everywhere.
//
// The model: with a fitted machine model (tune/model_sim.h; from a version 2
// tuning file or the calibration cache), each candidate's Programs are
// simulated on it, up to kModelSimMaxRanks ranks; beyond, and without a
// fitted model, the closed forms (or a simulation on a switch) of the seeds'
// alpha-beta-gamma, with the fitted beta of the per-rank block M/N where
// there is one.
//
// One-sided algorithms (one_shot, two_shot: gets from shared windows) are
// candidates only where spec.windows says that the ranks share windows: their
// support check declines the call otherwise, and candidates_for and the
// selector keep only what every rank supports. With windows they are
// predicted like the others, their gets and signals simulated
// (sim/simulator.h) or their closed forms.
//
// Rules (tuning_file.h): for a call whose (collective, N) has rules of this
// link class, the rule with the largest min_bytes not above the call's size
// (the smallest rule below the first size) names an algorithm. With a fitted
// model, the rule wins only where the model cannot tell it from the model's
// pick (predicted within kTunerPickMargin); without one (version 1 files),
// it always wins when its algorithm is a candidate.
#pragma once

#include "algorithms/algorithm.h"
#include "model/cost_model.h"
#include "tune/learner.h"
#include "tune/model_sim.h"
#include "tune/tuning_file.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

// In-process ranks hand messages over through memory: about a microsecond of
// wake-up and a memcpy bandwidth of a few GB/s on a loaded host.
inline constexpr double kInprocAlpha = 1e-6;
inline constexpr double kInprocBeta = 4e9;

// How much faster than the best candidate so far a later one (in registry
// order) must be predicted to replace it: the model misses costs of that
// size, so a smaller predicted edge is no edge.
inline constexpr double kTunerPickMargin = 0.05;

// Up to this many ranks the tuner simulates the fitted model.
inline constexpr int kModelSimMaxRanks = 64;

// Not thread-safe (a communicator is used by one thread at a time).
class Tuner {
 public:
  // `rules` of other collectives or rank counts than this communicator's are
  // ignored; the caller passes those of its link class.
  Tuner(int nranks, CostParams params, std::vector<TuningRule> rules = {},
        std::shared_ptr<const MachineSim> model = nullptr);

  // Predicted time of `algo` for `spec`: its closed form on a switch, or,
  // where it has none, a simulation of its Programs on a switch with these
  // parameters.
  // With `corrected` false, a fitted model's time before the corrections it
  // has learned (MachineSim::raw_time).
  double predict(const Algorithm& algo, const CollectiveSpec& spec, bool corrected = true) const;

  // Among `candidates` (registry order, each supported on every rank): the
  // measured rule's algorithm, else the least predicted time, a later
  // candidate replacing an earlier one only when predicted kTunerPickMargin
  // faster. A candidate that this rank's spec does not support is skipped.
  // nullptr when there are no candidates.
  const Algorithm* pick(const CollectiveSpec& spec, std::span<const Algorithm* const> candidates);
  // The same among every algorithm supported on every rank (candidates_for).
  const Algorithm* pick(const CollectiveSpec& spec) { return pick(spec, candidates_for(spec)); }

  // The candidates the learner explores for `spec` (tune/learner.h): pick()'s
  // first, then the seeds' pick (least time by the closed forms on a switch
  // at the seeds' alpha, beta and gamma) where it differs, then the others
  // predicted within `within` of the least predicted time (the fastest `min`
  // in all whatever their time), fastest first, `max` in all; one predicted
  // within 0.5% of a listed one (the model cannot tell them apart) only to
  // reach `min`. Their `predicted` is the uncorrected
  // prediction (predict(..., false)), which the learner compares observed
  // times with. Where a measured rule of a file without a fitted model
  // decides the call, its pick alone (nothing to explore).
  std::vector<LearnCandidate> learn_candidates(const CollectiveSpec& spec,
                                               std::span<const Algorithm* const> candidates,
                                               double within, int min, int max);

  // Replaces the measured rules.
  void set_rules(std::vector<TuningRule> rules) { rules_ = std::move(rules); }
  const CostParams& params() const { return params_; }
  // The fitted model, or nullptr.
  const MachineSim* model() const { return model_.get(); }
  // Receives one line per (collective, size class) the first time it is
  // picked: every candidate's predicted time and the pick.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }

 private:
  const Algorithm* rule_pick(const CollectiveSpec& spec,
                             std::span<const Algorithm* const> candidates) const;

  // The fitted model's raw predictions by algorithm and call shape.
  struct RawKey {
    const Algorithm* algo;
    Collective collective;
    size_t count, elem_size;
    int root;
    bool average, windows, window_buffers;
    size_t segment_bytes;
    auto operator<=>(const RawKey&) const = default;
  };
  static constexpr size_t kRawEntries = 4096;
  mutable std::map<RawKey, double> raw_;

  int nranks_;
  CostParams params_;
  std::vector<TuningRule> rules_;
  std::shared_ptr<const MachineSim> model_;
  std::function<void(const std::string&)> log_;
  std::set<std::pair<Collective, int>> logged_;
};

}  // namespace chorus
