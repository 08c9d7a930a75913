#include "tune/tuning_file.h"

#include "algorithms/algorithm.h"
#include "core/check.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace chorus {
namespace {

double json_number(const nlohmann::json& j, const char* key, std::string_view where) {
  if (!j.contains(key) || !j[key].is_number())
    fail(ErrorCode::invalid_argument, where, ": \"", key, "\" must be a number");
  return j[key].get<double>();
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
    if (!j["rules"].is_array())
      fail(ErrorCode::invalid_argument, where, ": \"rules\" must be a list");
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
        fail(ErrorCode::invalid_argument, w, ": unknown algorithm '", r.algorithm,
             "'; known: ", algorithm_names(r.collective));
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

}  // namespace chorus
