#include "model/tuner.h"

#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/log.h"
#include "schedule/rank_math.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace chorus {
namespace {

// Waits until every request in `ids` has completed.
void wait_all(Transport& t, std::vector<RequestId> ids, Deadline deadline, int peer) {
  std::vector<RequestId> done;
  while (!ids.empty()) {
    done.clear();
    t.wait_some(done, deadline);
    for (RequestId d : done) std::erase(ids, d);
    if (!ids.empty() && done.empty() && Clock::now() >= deadline)
      fail(ErrorCode::timeout, "rank ", t.rank(), ": calibration: timeout waiting for peer ", peer);
  }
}

// Mean round-trip time of `trips` ping-pongs of `bytes` with `peer`; the
// even rank of the pair pings, the odd one answers.
double round_trip(Transport& t, int peer, size_t bytes, int trips, Deadline deadline) {
  std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
  const bool pinger = t.rank() < peer;
  const auto start = Clock::now();
  for (int i = 0; i < trips; ++i) {
    if (pinger) {
      const RequestId r = t.irecv(peer, in.data(), bytes, nullptr);
      wait_all(t, {t.isend(peer, out.data(), bytes), r}, deadline, peer);
    } else {
      wait_all(t, {t.irecv(peer, in.data(), bytes, nullptr)}, deadline, peer);
      wait_all(t, {t.isend(peer, out.data(), bytes)}, deadline, peer);
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count() / trips;
}

double json_number(const nlohmann::json& j, const char* key, std::string_view where) {
  if (!j.contains(key) || !j[key].is_number())
    fail(ErrorCode::invalid_argument, where, ": \"", key, "\" must be a number");
  return j[key].get<double>();
}

// M of a call in the tuning rules' convention (as chorus-perf sizes its rows):
// the vector, the gathered output (allgather) or the input (reduce_scatter,
// alltoall).
size_t message_bytes(const CollectiveSpec& spec) {
  const size_t block = spec.count * spec.elem_size;
  switch (spec.collective) {
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall: return block * static_cast<size_t>(spec.nranks);
    default: return block;
  }
}

// A size class: powers of two of bytes, so that the log names each range once.
int size_class(const CollectiveSpec& spec) {
  const size_t bytes = spec.count * spec.elem_size;
  return bytes == 0 ? -1 : ceil_log2(static_cast<long long>(bytes));
}

}  // namespace

TuningTable tuning_from_json(std::string_view text, std::string_view where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::invalid_argument, where, ": not valid JSON: ", e.what());
  }
  if (!j.is_object() || j.value("format", "") != "chorus-tuning")
    fail(ErrorCode::invalid_argument, where, ": not a chorus tuning file (\"format\" must be ",
         "\"chorus-tuning\")");
  if (j.value("version", 0) != 1)
    fail(ErrorCode::invalid_argument, where, ": unsupported tuning file version ",
         j.value("version", 0), " (this chorus reads version 1)");
  TuningTable t;
  if (j.contains("gamma_s_per_B")) t.gamma = json_number(j, "gamma_s_per_B", where);
  if (j.contains("ports")) t.ports = static_cast<int>(json_number(j, "ports", where));
  if (!(t.gamma >= 0) || (t.ports != 1 && t.ports != 2))
    fail(ErrorCode::invalid_argument, where, ": gamma_s_per_B must be >= 0 and ports 1 or 2");
  if (!j.contains("links") || !j["links"].is_object())
    fail(ErrorCode::invalid_argument, where, ": \"links\" must be an object of link classes");
  for (const auto& [name, v] : j["links"].items()) {
    const std::string w = str_cat(where, ": link class ", name);
    if (!v.is_object()) fail(ErrorCode::invalid_argument, w, " must be an object");
    LinkParams p{name, json_number(v, "alpha_s", w), json_number(v, "beta_Bps", w)};
    if (!(p.alpha >= 0) || !(p.beta > 0) || !std::isfinite(p.alpha) || !std::isfinite(p.beta))
      fail(ErrorCode::invalid_argument, w, ": alpha_s must be >= 0 and beta_Bps > 0");
    t.links[name] = p;
  }
  if (j.contains("rules")) {
    if (!j["rules"].is_array()) fail(ErrorCode::invalid_argument, where, ": \"rules\" must be a list");
    for (const auto& v : j["rules"]) {
      const std::string w = str_cat(where, ": rule ", v.dump());
      if (!v.is_object()) fail(ErrorCode::invalid_argument, w, " must be an object");
      TuningRule r;
      const auto coll = parse_collective(v.value("collective", ""));
      if (!coll) fail(ErrorCode::invalid_argument, w, ": unknown collective");
      r.collective = *coll;
      r.link = v.value("link", "");
      r.nranks = static_cast<int>(json_number(v, "ranks", w));
      r.min_bytes = static_cast<size_t>(json_number(v, "min_bytes", w));
      r.algorithm = v.value("algorithm", "");
      if (r.link.empty() || r.nranks < 1)
        fail(ErrorCode::invalid_argument, w, ": needs a link class and ranks >= 1");
      if (find_algorithm(r.collective, r.algorithm) == nullptr)
        fail(ErrorCode::invalid_argument, w, ": unknown algorithm '", r.algorithm, "'; known: ",
             algorithm_names(r.collective));
      t.rules.push_back(std::move(r));
    }
  }
  return t;
}

std::string tuning_to_json(const TuningTable& t) {
  nlohmann::json links = nlohmann::json::object();
  for (const auto& [name, p] : t.links) links[name] = {{"alpha_s", p.alpha}, {"beta_Bps", p.beta}};
  nlohmann::json j = {{"format", "chorus-tuning"},
                      {"version", 1},
                      {"gamma_s_per_B", t.gamma},
                      {"ports", t.ports},
                      {"links", links}};
  if (!t.rules.empty()) {
    nlohmann::json rules = nlohmann::json::array();
    for (const TuningRule& r : t.rules)
      rules.push_back({{"collective", std::string(to_string(r.collective))},
                       {"link", r.link},
                       {"ranks", r.nranks},
                       {"min_bytes", r.min_bytes},
                       {"algorithm", r.algorithm}});
    j["rules"] = rules;
  }
  return j.dump(2) + "\n";
}

TuningTable read_tuning_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::invalid_argument, "tuning file '", path, "' cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return tuning_from_json(text.str(), str_cat("tuning file '", path, "'"));
}

void write_tuning_file(const std::string& path, const TuningTable& table) {
  TuningTable merged = table;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    const TuningTable old = read_tuning_file(path);
    for (const auto& [name, p] : old.links) merged.links.emplace(name, p);
    // Rules of another (collective, link class, N) than the new ones stay.
    for (const TuningRule& r : old.rules) {
      const bool replaced = std::any_of(table.rules.begin(), table.rules.end(), [&](const auto& n) {
        return n.collective == r.collective && n.link == r.link && n.nranks == r.nranks;
      });
      if (!replaced) merged.rules.push_back(r);
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << tuning_to_json(merged);
    if (!out) fail(ErrorCode::system, "cannot write tuning file '", tmp, "'");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(ErrorCode::system, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

std::string link_class_of(std::string_view transport) {
  // A mixed job's slowest links are its tcp ones: tune for those.
  if (transport == "shm+tcp") return "tcp";
  return std::string(transport);
}

LinkParams calibrate(detail::CommunicatorImpl& comm, const CalibrationOptions& o) {
  Transport& t = comm.transport();
  const std::string cls = link_class_of(t.name());
  if (t.size() == 1) return {cls, kInprocAlpha, kInprocBeta};
  if (o.large_bytes <= o.small_bytes || o.small_round_trips < 1 || o.large_round_trips < 1)
    fail(ErrorCode::invalid_argument, "calibrate: need large_bytes > small_bytes and round trips >= 1");
  const int peer = t.rank() ^ 1;
  // Ranks measure alpha and 1/beta; the allreduce (max) makes every rank use
  // the slowest pair's, and ranks without a partner contribute zeros.
  double measured[2] = {0, 0};
  if (peer < t.size()) {
    const Deadline deadline = Clock::now() + comm.config().timeout;
    round_trip(t, peer, o.small_bytes, 1, deadline);  // warm-up: connections, pages
    const double small = round_trip(t, peer, o.small_bytes, o.small_round_trips, deadline);
    const double large = round_trip(t, peer, o.large_bytes, o.large_round_trips, deadline);
    // One way = half a round trip = alpha + bytes/beta; two sizes give both.
    const double extra = (large - small) / 2;
    const double bytes = static_cast<double>(o.large_bytes - o.small_bytes);
    const double inv_beta = extra > 0 ? extra / bytes : 2 * small / bytes;
    measured[0] = std::max(0.0, small / 2 - static_cast<double>(o.small_bytes) * inv_beta);
    measured[1] = inv_beta;
  }
  CallOptions opts;
  opts.algorithm = "ring";
  auto work = comm.submit({Collective::allreduce, measured, measured, 2, DataType::float64,
                           ReduceOp::max, 0, &opts});
  comm.wait(*work);
  return {cls, measured[0], measured[1] > 0 ? 1 / measured[1] : kInprocBeta};
}

LinkParams calibrate(Communicator& comm, const CalibrationOptions& options) {
  return calibrate(comm.impl(), options);
}

Tuner::Tuner(int nranks, int rank, CostParams params)
    : nranks_(nranks), rank_(rank), params_(params) {}

double Tuner::predict(const Algorithm& algo, const CollectiveSpec& spec) {
  const double m = model_bytes(spec.collective, nranks_, spec.count, spec.elem_size);
  CostParams params = params_;
  params.segment_bytes = spec.segment_bytes;
  // Closed forms assume a switch, as the simulation below does.
  if (const Formula* f = find_formula_on(spec.collective, algo.name, "switch", nranks_,
                                         params.ports))
    if (Prediction p = f->time(nranks_, m, params); p.ok) return p.seconds;
  const LinkParams link{"link", params_.alpha, params_.beta};
  const auto topo = make_topology("switch", nranks_, link, link);
  const auto programs = build_all(algo, spec);
  return simulate(programs, *topo, SimOptions{params_.ports, params_.gamma, spec.elem_size}).time;
}

const Algorithm* Tuner::rule_pick(const CollectiveSpec& spec) const {
  // The rule with the largest min_bytes not above the call; a call below every
  // rule takes the smallest rule.
  const size_t bytes = message_bytes(spec);
  const TuningRule* below = nullptr;
  const TuningRule* smallest = nullptr;
  for (const TuningRule& r : rules_) {
    if (r.collective != spec.collective || r.nranks != nranks_) continue;
    if (r.min_bytes <= bytes && (below == nullptr || r.min_bytes > below->min_bytes)) below = &r;
    if (smallest == nullptr || r.min_bytes < smallest->min_bytes) smallest = &r;
  }
  const TuningRule* chosen = below ? below : smallest;
  if (chosen == nullptr) return nullptr;
  const Algorithm* a = find_algorithm(spec.collective, chosen->algorithm);
  if (a == nullptr) return nullptr;
  CollectiveSpec s = spec;
  for (int r = 0; r < nranks_; ++r) {
    s.rank = r;
    if (!a->supports(s)) return nullptr;
  }
  return a;
}

const Algorithm* Tuner::pick(const CollectiveSpec& spec) {
  const Key key{spec.collective, spec.count, spec.elem_size, spec.root, spec.segment_bytes};
  if (auto it = picks_.find(key); it != picks_.end()) return it->second;
  if (const Algorithm* measured = rule_pick(spec)) {
    if (log_ && logged_.emplace(spec.collective, size_class(spec)).second)
      log_(str_cat("tuning ", to_string(spec.collective), " N=", nranks_, " ",
                   message_bytes(spec), " B: measured rule -> ", measured->name));
    picks_.emplace(key, measured);
    return measured;
  }
  const bool log = log_ && logged_.emplace(spec.collective, size_class(spec)).second;
  std::string line;
  if (log)
    line = str_cat("tuning ", to_string(spec.collective), " N=", nranks_, " ",
                   spec.count * spec.elem_size, " B (alpha ", params_.alpha, " s, beta ",
                   params_.beta, " B/s, gamma ", params_.gamma, " s/B):");
  const Algorithm* best = nullptr;
  double best_time = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : algorithms_for(spec.collective)) {
    // Support is checked for every rank, not just this one, so that all
    // ranks see the same candidates.
    CollectiveSpec s = spec;
    bool ok = true;
    std::string why;
    for (int r = 0; r < nranks_ && ok; ++r) {
      s.rank = r;
      if (Support sup = a->supports(s); !sup) {
        ok = false;
        why = sup.reason;
      }
    }
    if (!ok) {
      if (log) line += str_cat(" ", a->name, "=unsupported");
      continue;
    }
    s.rank = spec.rank;
    const double t = predict(*a, s);
    if (log) line += str_cat(" ", a->name, "=", t * 1e6, "us");
    // Candidates come in registry order, simplest first; a later one must
    // beat the best so far by kTunerPickMargin (see tuner.h).
    if (best == nullptr || t < best_time * (1 - kTunerPickMargin)) {
      best_time = t;
      best = a;
    }
  }
  if (log) {
    line += str_cat(" -> ", best ? best->name : std::string_view("none"));
    log_(line);
  }
  picks_.emplace(key, best);
  return best;
}

void install_tuner(detail::CommunicatorImpl& comm) {
  const Config& cfg = comm.config();
  const std::string cls = link_class_of(comm.transport().name());
  CostParams params{kInprocAlpha, kInprocBeta, kDefaultGamma, 1};
  bool have = false;
  if (!cfg.tuning_file.empty()) {
    const TuningTable table = read_tuning_file(cfg.tuning_file);
    params.gamma = table.gamma;
    params.ports = table.ports;
    if (auto it = table.links.find(cls); it != table.links.end()) {
      params.alpha = it->second.alpha;
      params.beta = it->second.beta;
      have = true;
    }
  }
  // In-process ranks use the defaults: see tuner.h for why they are not
  // calibrated. Every rank takes the same branch: they share the transport
  // kind and the tuning file.
  if (!have && cls != "inproc" && comm.size() > 1) {
    const auto start = Clock::now();
    const LinkParams p = calibrate(comm);
    params.alpha = p.alpha;
    params.beta = p.beta;
    log_message(cfg.log_level, LogLevel::info, comm.rank(), "tuner: calibrated ", cls, ": alpha ",
                p.alpha, " s, beta ", p.beta, " B/s in ",
                std::chrono::duration<double, std::milli>(Clock::now() - start).count(), " ms");
  }
  auto tuner = std::make_shared<Tuner>(comm.size(), comm.rank(), params);
  if (!cfg.tuning_file.empty()) {
    std::vector<TuningRule> mine;
    for (const TuningRule& r : read_tuning_file(cfg.tuning_file).rules)
      if (r.link == cls && r.nranks == comm.size()) mine.push_back(r);
    tuner->set_rules(std::move(mine));
  }
  if (cfg.log_tuning) {
    const int rank = comm.rank();
    tuner->set_log([rank](const std::string& text) { write_log_line(LogLevel::info, rank, text); });
  }
  comm.set_selector([tuner](const CollectiveSpec& spec) { return tuner->pick(spec); });
}

}  // namespace chorus
