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
// Rules (tuning_file.h): for a call whose (collective, N) has rules of this
// link class, the tuner takes the algorithm of the rule with the largest
// min_bytes not above the call's size (the smallest rule below the first
// size), when that algorithm is a candidate; otherwise, and for every call
// without rules, the model decides. A model is a model: the rules correct it
// where an implementation's real costs (copies, wake-ups, segment overheads)
// differ from alpha-beta-gamma.
#pragma once

#include "algorithms/algorithm.h"
#include "model/cost_model.h"
#include "tune/tuning_file.h"

#include <functional>
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

// Not thread-safe (a communicator is used by one thread at a time).
class Tuner {
 public:
  // `rules` of other collectives or rank counts than this communicator's are
  // ignored; the caller passes those of its link class.
  Tuner(int nranks, CostParams params, std::vector<TuningRule> rules = {});

  // Predicted time of `algo` for `spec`: its closed form on a switch, or,
  // where it has none, a simulation of its Programs on a switch with these
  // parameters.
  double predict(const Algorithm& algo, const CollectiveSpec& spec) const;

  // Among `candidates` (registry order, each supported on every rank): the
  // measured rule's algorithm, else the least predicted time, a later
  // candidate replacing an earlier one only when predicted kTunerPickMargin
  // faster. nullptr when there are no candidates.
  const Algorithm* pick(const CollectiveSpec& spec, std::span<const Algorithm* const> candidates);
  // The same among every algorithm supported on every rank (candidates_for).
  const Algorithm* pick(const CollectiveSpec& spec) { return pick(spec, candidates_for(spec)); }

  // Replaces the measured rules.
  void set_rules(std::vector<TuningRule> rules) { rules_ = std::move(rules); }
  const CostParams& params() const { return params_; }
  // Receives one line per (collective, size class) the first time it is
  // picked: every candidate's predicted time and the pick.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }

 private:
  const Algorithm* rule_pick(const CollectiveSpec& spec,
                             std::span<const Algorithm* const> candidates) const;

  int nranks_;
  CostParams params_;
  std::vector<TuningRule> rules_;
  std::function<void(const std::string&)> log_;
  std::set<std::pair<Collective, int>> logged_;
};

}  // namespace chorus
