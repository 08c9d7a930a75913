#include "tune/tuner.h"

#include "core/check.h"
#include "schedule/rank_math.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace chorus {
namespace {

// A size class: powers of two of bytes, so that the log names each range once.
int size_class(const CollectiveSpec& spec) {
  const size_t bytes = spec.count * spec.elem_size;
  return bytes == 0 ? -1 : ceil_log2(static_cast<long long>(bytes));
}

size_t rule_bytes(const CollectiveSpec& spec) {
  return static_cast<size_t>(model_bytes(spec.collective, spec.nranks, spec.count, spec.elem_size));
}

}  // namespace

Tuner::Tuner(int nranks, CostParams params, std::vector<TuningRule> rules,
             std::shared_ptr<const MachineSim> model)
    : nranks_(nranks), params_(params), rules_(std::move(rules)), model_(std::move(model)) {}

double Tuner::predict(const Algorithm& algo, const CollectiveSpec& spec, bool corrected) const {
  const double m = model_bytes(spec.collective, nranks_, spec.count, spec.elem_size);
  CostParams params = params_;
  params.segment_bytes = spec.segment_bytes;
  if (nranks_ == 1) return 0;
  const bool fitted = model_ && model_->fitted();
  if (fitted && nranks_ <= kModelSimMaxRanks) {
    CollectiveSpec s = spec;
    s.nranks = nranks_;
    const DataType type = representative_type(spec.elem_size);
    // The simulation, once per algorithm and call shape: a pick and the
    // learner's candidates ask for the same ones.
    const RawKey key{&algo,          spec.collective,     spec.count,
                     spec.elem_size, spec.root,           spec.average,
                     spec.windows,   spec.window_buffers, spec.segment_bytes};
    auto it = raw_.find(key);
    if (it == raw_.end()) {
      if (raw_.size() >= kRawEntries) raw_.clear();
      it = raw_.emplace(key, model_->raw_time(algo, s, type, ReduceOp::sum)).first;
    }
    return corrected ? it->second * model_->correction(algo, s, type) : it->second;
  }
  if (fitted) params.beta = model_->link().beta_at(m / nranks_);
  // Closed forms assume a switch, as the simulation below does.
  if (const ClosedForm* f = closed_form_on(algo, "switch", nranks_, params.ports))
    if (Prediction p = f->at(nranks_, m, params); p.ok) return p.seconds;
  const LinkParams link{"link", params.alpha, params.beta};
  const auto topo = make_topology("switch", nranks_, link, link);
  CollectiveSpec s = spec;
  s.nranks = nranks_;
  const auto programs = build_all(algo, s);
  SimOptions o;
  o.ports = params.ports;
  o.gamma = params.gamma;
  o.elem_size = spec.elem_size;
  return simulate(programs, *topo, o).time;
}

const Algorithm* Tuner::rule_pick(const CollectiveSpec& spec,
                                  std::span<const Algorithm* const> candidates) const {
  // The rule with the largest min_bytes not above the call; a call below every
  // rule takes the smallest rule.
  const size_t bytes = rule_bytes(spec);
  const TuningRule* below = nullptr;
  const TuningRule* smallest = nullptr;
  for (const TuningRule& r : rules_) {
    if (r.collective != spec.collective || r.nranks != nranks_) continue;
    if (r.min_bytes <= bytes && (below == nullptr || r.min_bytes > below->min_bytes)) below = &r;
    if (smallest == nullptr || r.min_bytes < smallest->min_bytes) smallest = &r;
  }
  const TuningRule* chosen = below ? below : smallest;
  if (chosen == nullptr) return nullptr;
  for (const Algorithm* a : candidates)
    if (a->name == chosen->algorithm) return supports(*a, spec) ? a : nullptr;
  return nullptr;
}

const Algorithm* Tuner::pick(const CollectiveSpec& spec,
                             std::span<const Algorithm* const> candidates) {
  const bool log = log_ && logged_.emplace(spec.collective, size_class(spec)).second;
  const Algorithm* measured = rule_pick(spec, candidates);
  const bool fitted = model_ && model_->fitted();
  if (measured && !fitted) {
    if (log)
      log_(str_cat("tuning ", to_string(spec.collective), " N=", nranks_, " ", rule_bytes(spec),
                   " B: measured rule -> ", measured->name));
    return measured;
  }
  std::string line;
  if (log)
    line = str_cat("tuning ", to_string(spec.collective), " N=", nranks_, " ",
                   spec.count * spec.elem_size, " B (",
                   fitted ? "fitted model"
                          : str_cat("alpha ", params_.alpha, " s, beta ", params_.beta,
                                    " B/s, gamma ", params_.gamma, " s/B"),
                   "):");
  const Algorithm* best = nullptr;
  double best_time = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : candidates) {
    // Candidates come supported on every rank; one that declines the call
    // even here (a one-sided algorithm without spec.windows) is no candidate.
    if (!supports(*a, spec)) continue;
    const double t = predict(*a, spec);
    if (log) line += str_cat(" ", a->name, "=", t * 1e6, "us");
    // Candidates come in registry order, simplest first; a later one must
    // beat the best so far by kTunerPickMargin.
    if (best == nullptr || t < best_time * (1 - kTunerPickMargin)) {
      best_time = t;
      best = a;
    }
  }
  // A measured rule wins where the fitted model cannot tell its pick from
  // the model's own.
  if (measured && measured != best &&
      predict(*measured, spec) <= best_time * (1 + kTunerPickMargin)) {
    if (log) log_(str_cat(line, " -> measured rule ", measured->name));
    return measured;
  }
  if (log) log_(str_cat(line, " -> ", best ? best->name : std::string_view("none")));
  return best;
}

std::vector<LearnCandidate> Tuner::learn_candidates(const CollectiveSpec& spec,
                                                    std::span<const Algorithm* const> candidates,
                                                    double within, int min, int max) {
  std::vector<LearnCandidate> out;
  const Algorithm* first = pick(spec, candidates);
  if (first == nullptr) return out;
  out.push_back({first, predict(*first, spec, false)});
  // A measured rule of a file without a fitted model (a chorus-perf sweep)
  // is a measurement already: the class keeps it.
  if (!(model_ && model_->fitted()) && rule_pick(spec, candidates) == first) return out;
  // The seeds' pick: least time by the closed forms on a switch at the
  // seeds' alpha, beta and gamma. Where the fitted model is wrong (it is, by
  // tens of percent, and its ranking with it) the seeds' cost table is a
  // second opinion of another kind, so it is always tried.
  const Algorithm* seeds = nullptr;
  double seeds_time = 0;
  const double m = model_bytes(spec.collective, nranks_, spec.count, spec.elem_size);
  for (const Algorithm* a : candidates) {
    if (!supports(*a, spec)) continue;
    const ClosedForm* f = closed_form_on(*a, "switch", nranks_, params_.ports);
    if (f == nullptr) continue;
    const Prediction p = f->at(nranks_, m, params_);
    if (p.ok && (seeds == nullptr || p.seconds < seeds_time * (1 - kTunerPickMargin))) {
      seeds = a;
      seeds_time = p.seconds;
    }
  }
  if (seeds != nullptr && seeds != first && max >= 2)
    out.push_back({seeds, predict(*seeds, spec, false)});
  std::vector<std::pair<double, const Algorithm*>> others;
  double best = predict(*first, spec);
  for (const Algorithm* a : candidates) {
    if (a == first || a == seeds || !supports(*a, spec)) continue;
    const double t = predict(*a, spec);
    best = std::min(best, t);
    others.emplace_back(t, a);
  }
  // Stable: equal predictions keep registry order.
  std::stable_sort(others.begin(), others.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  // One the model cannot tell from a candidate already listed (its time
  // within 0.5%: ring, bidir_ring and halving_doubling at N = 2) teaches
  // little about the model's errors; such come only where nothing else is
  // within reach.
  auto twin = [&](double t) {
    for (const LearnCandidate& c : out)
      if (std::abs(predict(*c.algorithm, spec) - t) <= 0.005 * t) return true;
    return false;
  };
  std::vector<const Algorithm*> twins;
  for (const auto& [t, a] : others) {
    const int have = static_cast<int>(out.size());
    if (have >= max || (have >= min && !(t <= within * best))) break;
    if (twin(t)) {
      twins.push_back(a);
      continue;
    }
    out.push_back({a, predict(*a, spec, false)});
  }
  for (const Algorithm* a : twins)
    if (static_cast<int>(out.size()) < min) out.push_back({a, predict(*a, spec, false)});
  return out;
}

}  // namespace chorus
