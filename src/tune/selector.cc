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
  // Each algorithm's support, asked once for this pick.
  std::vector<const Algorithm*> candidates;
  for (const Algorithm* a : algorithms_for(spec.collective)) {
    const Support ok = supported_everywhere(*a, spec);
    if (a == named) {
      if (ok) return *a;
      if (!requested.empty())  // named for this call and unable to serve it: say so
        fail(ErrorCode::invalid_argument, where(), "algorithm '", name,
             "' does not support this call: ", ok.reason);
    }
    if (ok) candidates.push_back(a);
  }
  if (candidates.empty()) fail(ErrorCode::internal, where(), "no algorithm supports this call");
  if (tuner_)
    if (const Algorithm* a = tuner_->pick(spec, candidates)) return *a;
  return *candidates.front();
}

std::unique_ptr<Selector> make_selector(Transport& transport, const Config& config) {
  const std::string cls(link_class(transport.kind()));
  // Ranks that are threads of this process have no hosts to lay out and no
  // link to calibrate: they keep the defaults unless a tuning file has their
  // link class.
  const bool processes = transport.kind() != TransportKind::inproc && transport.size() > 1;
  CostParams params{kInprocAlpha, kInprocBeta, kDefaultGamma, 1};
  std::vector<TuningRule> rules;
  std::shared_ptr<const MachineSim> model;
  auto take = [&](const TuningTable& table, std::vector<int> host_of) {
    params.gamma = table.gamma;
    params.ports = table.ports;
    auto it = table.links.find(cls);
    if (it == table.links.end()) return false;
    params.alpha = it->second.alpha;
    params.beta = it->second.beta;
    if (!it->second.curve.empty()) {
      if (host_of.size() != static_cast<size_t>(transport.size())) host_of.clear();
      model = std::make_shared<MachineSim>(table, cls, std::move(host_of));
    }
    return true;
  };
  bool have = false;
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
  }
  auto tuner =
      std::make_unique<Tuner>(transport.size(), params, std::move(rules), std::move(model));
  if (config.log_tuning) {
    const int rank = transport.rank();
    tuner->set_log([rank](const std::string& text) { write_log_line(LogLevel::info, rank, text); });
  }
  return std::make_unique<Selector>(config, std::move(tuner));
}

}  // namespace chorus
