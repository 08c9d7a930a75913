#include "tune/tuning_file.h"

#include "algorithms/algorithm.h"
#include "core/check.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace chorus {
namespace {

double json_number(const nlohmann::json& j, const char* key, std::string_view where) {
  if (!j.contains(key) || !j[key].is_number())
    fail(ErrorCode::invalid_argument, where, ": \"", key, "\" must be a number");
  return j[key].get<double>();
}

// j[key] as a string, "" when absent; json::value would throw its own
// exception for another type.
std::string json_string(const nlohmann::json& j, const char* key, std::string_view where) {
  if (!j.contains(key)) return "";
  if (!j[key].is_string())
    fail(ErrorCode::invalid_argument, where, ": \"", key, "\" must be a string");
  return j[key].get<std::string>();
}

}  // namespace

TuningTable tuning_from_json(std::string_view text, std::string_view where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::invalid_argument, where, ": not valid JSON: ", e.what());
  }
  // Compared as JSON values, which any type may be.
  if (!j.is_object() || !j.contains("format") || j["format"] != "chorus-tuning")
    fail(ErrorCode::invalid_argument, where, ": not a chorus tuning file (\"format\" must be ",
         "\"chorus-tuning\")");
  const nlohmann::json version = j.contains("version") ? j["version"] : nlohmann::json(0);
  if (version != 1)
    fail(ErrorCode::invalid_argument, where, ": unsupported tuning file version ",
         version.dump(), " (this chorus reads version 1)");
  TuningTable t;
  const double ports = j.contains("ports") ? json_number(j, "ports", where) : 1;
  if (j.contains("gamma_s_per_B")) t.gamma = json_number(j, "gamma_s_per_B", where);
  if (!(t.gamma >= 0) || (ports != 1 && ports != 2))
    fail(ErrorCode::invalid_argument, where, ": gamma_s_per_B must be >= 0 and ports 1 or 2");
  t.ports = static_cast<int>(ports);
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
      const auto coll = parse_collective(json_string(v, "collective", w));
      if (!coll) fail(ErrorCode::invalid_argument, w, ": unknown collective");
      r.collective = *coll;
      r.link = json_string(v, "link", w);
      // Range checks before the conversions, which are undefined out of range.
      const double ranks = json_number(v, "ranks", w);
      if (r.link.empty() || !(ranks >= 1 && ranks <= std::numeric_limits<int>::max()))
        fail(ErrorCode::invalid_argument, w, ": needs a link class and ranks from 1 to ",
             std::numeric_limits<int>::max());
      r.nranks = static_cast<int>(ranks);
      const double min_bytes = json_number(v, "min_bytes", w);
      if (!(min_bytes >= 0 && min_bytes < 0x1p64))
        fail(ErrorCode::invalid_argument, w, ": min_bytes must be from 0 to 2^64 - 1");
      r.min_bytes = static_cast<size_t>(min_bytes);
      r.algorithm = json_string(v, "algorithm", w);
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
