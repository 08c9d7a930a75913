#include "tune/selector.h"

#include "core/check.h"
#include "core/log.h"
#include "core/transport_kind.h"
#include "tune/calibration.h"
#include "tune/calibration_cache.h"

#include <vector>

namespace chorus {

Selector::Selector(Config config, std::unique_ptr<Tuner> tuner)
    : config_(std::move(config)), tuner_(std::move(tuner)) {
  for (int c = 0; c < kCollectiveCount; ++c) {
    const auto coll = static_cast<Collective>(c);
    const std::string name = config_.algorithm_for(coll);
    named_by_config_[static_cast<size_t>(c)] =
        !name.empty() && name != "auto" && find_algorithm(coll, name) != nullptr;
  }
  // CHORUS_ALGO names must name something: a name for every collective must
  // be an algorithm of at least one, a per-collective name one of that
  // collective ("auto" leaves the choice to the tuner).
  if (!config_.algorithm_all.empty() && config_.algorithm_all != "auto") {
    bool known = false;
    std::string all;
    for (const Algorithm& a : all_algorithms()) {
      known |= a.name == config_.algorithm_all;
      if (all.find(str_cat(" ", a.name, ",")) == std::string::npos)
        all += str_cat(" ", a.name, ",");
    }
    if (!known)
      fail(ErrorCode::invalid_argument, "CHORUS_ALGO: '", config_.algorithm_all,
           "' is no algorithm of any collective; known:", all.substr(0, all.size() - 1));
  }
  for (const auto& [collective, name] : config_.algorithm)
    if (name != "auto" && find_algorithm(collective, name) == nullptr)
      fail(ErrorCode::invalid_argument, "CHORUS_ALGO: '", name, "' is no ", to_string(collective),
           " algorithm; known: ", algorithm_names(collective));
}

std::vector<const Algorithm*> Selector::served(const CollectiveSpec& spec, const Algorithm* named,
                                               Support* named_support) {
  // Each algorithm's support, asked once for this pick.
  std::vector<const Algorithm*> candidates;
  for (const Algorithm* a : algorithms_for(spec.collective)) {
    const Support ok = supported_everywhere(*a, spec);
    if (a == named && named_support != nullptr) *named_support = ok;
    if (ok) candidates.push_back(a);
  }
  return candidates;
}

const Algorithm& Selector::choose(const CollectiveSpec& spec, std::string_view requested) {
  const auto where = [&] {
    return str_cat("rank ", spec.rank, ": ", to_string(spec.collective), ": ");
  };
  std::string name(requested);
  if (name.empty()) name = config_.algorithm_for(spec.collective);
  const Algorithm* named = nullptr;
  if (!name.empty() && name != "auto") {
    named = find_algorithm(spec.collective, name);
    // A CHORUS_ALGO name meant for other collectives is no error here (the
    // constructor checked that it names an algorithm of some collective).
    if (named == nullptr && !requested.empty())
      fail(ErrorCode::invalid_argument, where(), "unknown algorithm '", name,
           "'; known: ", algorithm_names(spec.collective));
  }
  Support named_ok = Support::no("");
  const std::vector<const Algorithm*> candidates = served(spec, named, &named_ok);
  if (named != nullptr) {
    if (named_ok) return *named;
    if (!requested.empty())  // named for this call and unable to serve it: say so
      fail(ErrorCode::invalid_argument, where(), "algorithm '", name,
           "' does not support this call: ", named_ok.reason);
  }
  if (candidates.empty()) fail(ErrorCode::internal, where(), "no algorithm supports this call");
  if (tuner_)
    if (const Algorithm* a = tuner_->pick(spec, candidates)) return *a;
  return *candidates.front();
}

bool Selector::learns(const CollectiveSpec& spec, std::string_view requested) const {
  if (!learner_ || !tuner_ || !requested.empty() || spec.nranks < 2) return false;
  return !named_by_config_[static_cast<size_t>(spec.collective)];
}

std::vector<LearnCandidate> Selector::learn_candidates(const CollectiveSpec& spec) {
  const std::vector<const Algorithm*> candidates = served(spec, nullptr, nullptr);
  if (!tuner_ || !learner_) return {};
  const LearnSettings& s = learner_->settings();
  return tuner_->learn_candidates(spec, candidates, s.within, s.min_candidates, s.max_candidates);
}

std::string Selector::note_learned() {
  learned_dirty_ = true;
  if (std::chrono::steady_clock::now() - last_store_ < kLearnedWriteGap) return "";
  return store_learned();
}

std::string Selector::flush_learned() {
  return learned_dirty_ ? store_learned() : "";
}

std::string Selector::store_learned() {
  learned_dirty_ = false;
  last_store_ = std::chrono::steady_clock::now();
  if (cache_path_.empty() || !learner_) return "";
  TuningTable table = cache_table_;
  table.learned = learner_->learned();
  table.corrections = learner_->corrections();
  return write_cache_text(cache_path_, tuning_to_json(table));
}

std::unique_ptr<Selector> make_selector(Transport& transport, const Config& config) {
  if (config.tuner == TunerMode::off) return std::make_unique<Selector>(config, nullptr);
  const std::string cls(link_class(transport.kind()));
  // Ranks that are threads of this process have no hosts to lay out and no
  // link to calibrate: they keep the defaults unless a tuning file has their
  // link class.
  const bool processes = transport.kind() != TransportKind::inproc && transport.size() > 1;
  CostParams params{kInprocAlpha, kInprocBeta, kDefaultGamma, 1};
  std::vector<TuningRule> rules;
  std::shared_ptr<const MachineSim> model;
  std::vector<LearnedPick> learned;
  std::vector<ModelCorrection> corrections;
  auto take = [&](const TuningTable& table, std::vector<int> host_of) {
    params.gamma = table.gamma;
    params.ports = table.ports;
    auto it = table.links.find(cls);
    if (it == table.links.end()) return false;
    params.alpha = it->second.alpha;
    params.beta = it->second.beta;
    learned = table.learned;
    corrections = table.corrections;
    if (!it->second.curve.empty()) {
      if (host_of.size() != static_cast<size_t>(transport.size())) host_of.clear();
      model = std::make_shared<MachineSim>(table, cls, std::move(host_of));
    }
    return true;
  };
  bool have = false;
  std::string cache_path;
  TuningTable cache_table;
  if (!config.tuning_file.empty()) {
    // Config::tuning_file comes from CHORUS_TUNING_FILE alone: its errors name it.
    TuningTable table;
    try {
      table = read_tuning_file(config.tuning_file);
    } catch (const Error& e) {
      fail(e.code(), "CHORUS_TUNING_FILE: ", e.what());
    }
    std::vector<int> host_of;
    // A fitted file's hosts: which ranks share one (collective, as below).
    if (table.fitted() && processes)
      host_of = host_layout(transport, config.host_id, deadline_after(config.timeout));
    have = take(table, std::move(host_of));
    for (const TuningRule& r : table.rules)
      if (r.link == cls && r.nranks == transport.size()) rules.push_back(r);
  }
  // Every rank takes the same branch: they share the transport kind and the
  // tuning file.
  if (!have && processes) {
    const auto start = Clock::now();
    CachedModel cached = cached_model(transport, config, deadline_after(config.timeout, start));
    take(cached.table, std::move(cached.host_of));
    log_message(config.log_level, LogLevel::info, transport.rank(),
                "tuner: ", cached.from_cache ? "cached model " : "calibrated model ",
                cached.path.empty() ? std::string("(cache off)") : cached.path, " for ", cls,
                " in ", std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
                " ms");
    // Rank 0 keeps the cache entry; the learned picks go there.
    if (transport.rank() == 0 && !cached.path.empty()) {
      cache_path = cached.path;
      cache_table = std::move(cached.table);
    }
  }
  auto tuner =
      std::make_unique<Tuner>(transport.size(), params, std::move(rules), std::move(model));
  std::function<void(const std::string&)> log;
  if (config.log_tuning) {
    const int rank = transport.rank();
    log = [rank](const std::string& text) { write_log_line(LogLevel::info, rank, text); };
    tuner->set_log(log);
  }
  auto selector = std::make_unique<Selector>(config, std::move(tuner));
  const bool learns = config.tuner == TunerMode::learn && (processes || config.tuner_set);
  if (learns) {
    selector->set_learner(
        std::make_unique<Learner>(LearnSettings{}, std::move(learned), std::move(corrections)));
    selector->set_cache_entry(std::move(cache_path), std::move(cache_table));
  }
  selector->set_log(std::move(log));
  return selector;
}

}  // namespace chorus
