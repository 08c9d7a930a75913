#include "tune/tuning_file.h"

#include "algorithms/algorithm.h"
#include "core/check.h"
#include "core/transport_kind.h"

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

// A size class: ceil(log2(bytes)), 0 to 63.
int json_size_class(const nlohmann::json& j, std::string_view where) {
  const double c = json_number(j, "size_class", where);
  if (!(c >= 0 && c <= 63) || c != std::floor(c))
    fail(ErrorCode::invalid_argument, where, ": size_class must be a whole number from 0 to 63");
  return static_cast<int>(c);
}

// Each object of the list j[key], where there is one, with its place for
// errors ("<where>: <what> {...}").
template <typename Each>
void for_each_entry(const nlohmann::json& j, const char* key, std::string_view where,
                    std::string_view what, Each each) {
  if (!j.contains(key)) return;
  if (!j[key].is_array())
    fail(ErrorCode::invalid_argument, where, ": \"", key, "\" must be a list");
  for (const auto& v : j[key]) {
    const std::string w = str_cat(where, ": ", what, " ", v.dump());
    if (!v.is_object()) fail(ErrorCode::invalid_argument, w, " must be an object");
    each(v, w);
  }
}

// The call class of a learned entry: its collective, type and size class.
void json_class(const nlohmann::json& v, const std::string& w, Collective& collective,
                DataType& type, int& size_class) {
  const auto c = parse_collective(json_string(v, "collective", w));
  const auto t = parse_data_type(json_string(v, "type", w));
  if (!c || !t) fail(ErrorCode::invalid_argument, w, ": needs a known collective and type");
  collective = *c;
  type = *t;
  size_class = json_size_class(v, w);
}

// [[bytes, seconds per byte], ...], sizes increasing, values >= 0.
RateCurve json_curve(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array())
    fail(ErrorCode::invalid_argument, where, " must be a list of [bytes, s_per_B] pairs");
  RateCurve c;
  for (const auto& pt : j) {
    if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number() || !pt[1].is_number())
      fail(ErrorCode::invalid_argument, where, ": point ", pt.dump(),
           " is not a [bytes, s_per_B] pair");
    const RatePoint p{pt[0].get<double>(), pt[1].get<double>()};
    if (!(p.bytes > 0) || !(p.s_per_byte >= 0) || !std::isfinite(p.bytes) ||
        !std::isfinite(p.s_per_byte) || (!c.empty() && !(p.bytes > c.points.back().bytes)))
      fail(ErrorCode::invalid_argument, where, ": point ", pt.dump(),
           " needs bytes > 0, increasing, and s_per_B >= 0");
    c.points.push_back(p);
  }
  return c;
}

nlohmann::json curve_json(const RateCurve& c) {
  nlohmann::json a = nlohmann::json::array();
  for (const RatePoint& p : c.points) a.push_back({p.bytes, p.s_per_byte});
  return a;
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
  if (version != 1 && version != 2)
    fail(ErrorCode::invalid_argument, where, ": unsupported tuning file version ", version.dump(),
         " (this chorus reads versions 1 and 2)");
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
    if (v.contains("curve")) p.curve = json_curve(v["curve"], str_cat(w, ": curve"));
    if (v.contains("half_duplex")) {
      if (!v["half_duplex"].is_boolean())
        fail(ErrorCode::invalid_argument, w, ": half_duplex must be true or false");
      p.half_duplex = v["half_duplex"].get<bool>();
    }
    if (v.contains("call_overhead_s")) p.call_overhead = json_number(v, "call_overhead_s", w);
    if (!(p.call_overhead >= 0) || !std::isfinite(p.call_overhead))
      fail(ErrorCode::invalid_argument, w, ": call_overhead_s must be >= 0");
    if (v.contains("half_duplex_from_B"))
      p.half_duplex_from = json_number(v, "half_duplex_from_B", w);
    if (!(p.half_duplex_from >= 0))
      fail(ErrorCode::invalid_argument, w, ": half_duplex_from_B must be >= 0");
    if (v.contains("mem_traffic")) p.mem_traffic = json_number(v, "mem_traffic", w);
    if (!(p.mem_traffic >= 0) || !std::isfinite(p.mem_traffic))
      fail(ErrorCode::invalid_argument, w, ": mem_traffic must be >= 0");
    if (v.contains("flag_alpha_s")) {
      p.flag_alpha = json_number(v, "flag_alpha_s", w);
      if (!(p.flag_alpha >= 0) || !std::isfinite(p.flag_alpha))
        fail(ErrorCode::invalid_argument, w, ": flag_alpha_s must be >= 0");
    }
    t.links[name] = p;
  }
  if (j.contains("host")) {
    const auto& h = j["host"];
    const std::string w = str_cat(where, ": host");
    if (!h.is_object()) fail(ErrorCode::invalid_argument, w, " must be an object");
    if (h.contains("memory_Bps")) t.host.memory = json_number(h, "memory_Bps", w);
    const double cores = h.contains("cores") ? json_number(h, "cores", w) : 0;
    if (!(t.host.memory >= 0) || !std::isfinite(t.host.memory) || !(cores >= 0 && cores <= 1e6))
      fail(ErrorCode::invalid_argument, w, ": memory_Bps must be >= 0 and cores from 0 to 1e6");
    t.host.cores = static_cast<int>(cores);
  }
  if (j.contains("compute")) {
    const auto& c = j["compute"];
    const std::string w = str_cat(where, ": compute");
    if (!c.is_object()) fail(ErrorCode::invalid_argument, w, " must be an object");
    if (c.contains("copy")) t.compute.copy = json_curve(c["copy"], str_cat(w, ": copy"));
    if (c.contains("kernels")) {
      if (!c["kernels"].is_object())
        fail(ErrorCode::invalid_argument, w, ": kernels must be an object");
      for (const auto& [key, curve] : c["kernels"].items())
        t.compute.kernels[key] = json_curve(curve, str_cat(w, ": kernel ", key));
    }
  }
  if (j.contains("calibration")) {
    const auto& c = j["calibration"];
    const std::string w = str_cat(where, ": calibration");
    if (!c.is_object()) fail(ErrorCode::invalid_argument, w, " must be an object");
    CalibrationLoad load;
    if (!c.contains("provisional") || !c["provisional"].is_boolean())
      fail(ErrorCode::invalid_argument, w, ": provisional must be true or false");
    load.provisional = c["provisional"].get<bool>();
    load.others_running = json_number(c, "others_running", w);
    load.loadavg = json_number(c, "loadavg_1m", w);
    const double cores = json_number(c, "cores", w);
    const double samples = json_number(c, "samples", w);
    if (!(load.others_running >= 0) || !std::isfinite(load.others_running) ||
        !(load.loadavg >= 0) || !std::isfinite(load.loadavg) || !(cores >= 0 && cores <= 1e6) ||
        !(samples >= 0 && samples <= 1e6))
      fail(ErrorCode::invalid_argument, w,
           ": others_running and loadavg_1m must be >= 0, cores and samples from 0 to 1e6");
    load.cores = static_cast<int>(cores);
    load.samples = static_cast<int>(samples);
    t.calibration = load;
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
  for_each_entry(
      j, "learned", where, "learned pick", [&](const nlohmann::json& v, const std::string& w) {
        LearnedPick l;
        json_class(v, w, l.collective, l.type, l.size_class);
        const auto op = parse_reduce_op(json_string(v, "op", w));
        if (!op) fail(ErrorCode::invalid_argument, w, ": needs a known op");
        l.op = *op;
        const std::string buffers = json_string(v, "buffers", w);
        if (buffers != "user" && buffers != "window")
          fail(ErrorCode::invalid_argument, w, ": buffers must be \"user\" or \"window\"");
        l.window_buffers = buffers == "window";
        l.algorithm = json_string(v, "algorithm", w);
        if (find_algorithm(l.collective, l.algorithm) == nullptr)
          fail(ErrorCode::invalid_argument, w, ": unknown algorithm '", l.algorithm,
               "'; known: ", algorithm_names(l.collective));
        l.seconds = json_number(v, "time_s", w);
        if (!(l.seconds > 0) || !std::isfinite(l.seconds))
          fail(ErrorCode::invalid_argument, w, ": time_s must be > 0");
        t.learned.push_back(std::move(l));
      });
  for_each_entry(
      j, "corrections", where, "correction", [&](const nlohmann::json& v, const std::string& w) {
        ModelCorrection c;
        json_class(v, w, c.collective, c.type, c.size_class);
        c.algorithm = json_string(v, "algorithm", w);
        if (!c.algorithm.empty() && find_algorithm(c.collective, c.algorithm) == nullptr)
          fail(ErrorCode::invalid_argument, w, ": unknown algorithm '", c.algorithm,
               "' (\"\" for the size class's correction); known: ", algorithm_names(c.collective));
        c.factor = json_number(v, "factor", w);
        const double samples = json_number(v, "samples", w);
        if (!(c.factor > 0) || !std::isfinite(c.factor) || !(samples >= 1 && samples <= 1e9))
          fail(ErrorCode::invalid_argument, w, ": factor must be > 0 and samples from 1 to 1e9");
        c.samples = static_cast<int>(samples);
        t.corrections.push_back(std::move(c));
      });
  return t;
}

std::string tuning_to_json(const TuningTable& t) {
  nlohmann::json links = nlohmann::json::object();
  for (const auto& [name, p] : t.links) {
    nlohmann::json l = {{"alpha_s", p.alpha}, {"beta_Bps", p.beta}};
    if (!p.curve.empty()) l["curve"] = curve_json(p.curve);
    if (p.half_duplex) l["half_duplex"] = true;
    if (p.call_overhead > 0) l["call_overhead_s"] = p.call_overhead;
    if (p.half_duplex && p.half_duplex_from > 0) l["half_duplex_from_B"] = p.half_duplex_from;
    if (p.mem_traffic > 0) l["mem_traffic"] = p.mem_traffic;
    if (p.flag_alpha_fitted()) l["flag_alpha_s"] = p.flag_alpha;
    links[name] = l;
  }
  nlohmann::json j = {{"format", "chorus-tuning"},
                      {"version", 2},
                      {"gamma_s_per_B", t.gamma},
                      {"ports", t.ports},
                      {"links", links}};
  if (t.host != HostParams{}) j["host"] = {{"memory_Bps", t.host.memory}, {"cores", t.host.cores}};
  if (!t.compute.empty()) {
    nlohmann::json kernels = nlohmann::json::object();
    for (const auto& [key, c] : t.compute.kernels) kernels[key] = curve_json(c);
    j["compute"] = {{"copy", curve_json(t.compute.copy)}, {"kernels", kernels}};
  }
  if (t.calibration)
    j["calibration"] = {{"provisional", t.calibration->provisional},
                        {"others_running", t.calibration->others_running},
                        {"loadavg_1m", t.calibration->loadavg},
                        {"cores", t.calibration->cores},
                        {"samples", t.calibration->samples}};
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
  if (!t.learned.empty()) {
    nlohmann::json learned = nlohmann::json::array();
    for (const LearnedPick& l : t.learned)
      learned.push_back({{"collective", std::string(to_string(l.collective))},
                         {"type", std::string(to_string(l.type))},
                         {"op", std::string(to_string(l.op))},
                         {"size_class", l.size_class},
                         {"buffers", l.window_buffers ? "window" : "user"},
                         {"algorithm", l.algorithm},
                         {"time_s", l.seconds}});
    j["learned"] = learned;
  }
  if (!t.corrections.empty()) {
    nlohmann::json corrections = nlohmann::json::array();
    for (const ModelCorrection& c : t.corrections)
      corrections.push_back({{"collective", std::string(to_string(c.collective))},
                             {"type", std::string(to_string(c.type))},
                             {"size_class", c.size_class},
                             {"algorithm", c.algorithm},
                             {"factor", c.factor},
                             {"samples", c.samples}});
    j["corrections"] = corrections;
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
    if (merged.host == HostParams{}) merged.host = old.host;
    if (merged.compute.empty()) merged.compute = old.compute;
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
  if (const std::optional<TransportKind> kind = parse_transport_kind(transport))
    return std::string(link_class(*kind));
  return std::string(transport);
}

}  // namespace chorus
