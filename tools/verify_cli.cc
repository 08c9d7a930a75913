#include "verify_cli.h"

#include "algorithms/algorithm.h"
#include "analysis/verify_algorithm.h"
#include "core/check.h"
#include "model/cost_model.h"
#include "model/units.h"
#include "schedule/rank_math.h"
#include "verify/verifier.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace chorus {
namespace {

struct Args {
  std::string collective;
  std::string ranks = "8";
  std::string algos = "all";
  size_t count = 1024;
  size_t elem_size = 4;
  int root = 0;
  std::string hosts;  // --hosts: "K" or "K1,K2,..."
  bool markdown = false;
  bool windows = false;
  bool window_buffers = false;
  // --closed-forms and its JSON's parameters.
  bool closed_forms = false;
  bool json = false;
  std::string bytes, alpha, beta, gamma = "0";
  int ports = 1;
};

// printf into a string: the proof table keeps its printf columns.
__attribute__((format(printf, 1, 2))) std::string formatted(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string s(static_cast<size_t>(n > 0 ? n : 0), '\0');
  std::vsnprintf(s.data(), s.size() + 1, format, again);
  va_end(again);
  return s;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// "switch ring, 1 or 2 ports": where a form is exact.
std::string exact_on(const ClosedForm& f) {
  return str_cat(f.topologies, f.ports == 0   ? ", 1 or 2 ports"
                               : f.ports == 1 ? ", 1 port"
                                              : ", 2 ports");
}

// Hosts of kTableRanksPerHost consecutive ranks, in the tables: what the
// hierarchical algorithms need (the others ignore hosts).
constexpr int kTableRanksPerHost = 4;

// Steps and messages per rank, proved by the verifier: "14 / 24". The largest
// over ranks, as in the plain table. The ranks share windows (one host), so
// that the one-sided algorithms are proved too; the hierarchical ones see
// hosts of kTableRanksPerHost ranks.
std::string measured(const Algorithm& a, const std::vector<int>& ranks, size_t count, bool steps) {
  std::string out;
  for (int n : ranks) {
    CollectiveSpec spec{a.collective, n, 0, a.collective == Collective::barrier ? 0 : count, 4, 0};
    spec.windows = true;
    spec.host_of =
        std::make_shared<const std::vector<int>>(consecutive_hosts(n, kTableRanksPerHost));
    const VerifyResult r = verify(a, spec);
    std::string cell = "-";
    if (r.ok()) {
      size_t v = 0;
      for (const RankStats& st : r.ranks)
        v = std::max(v, steps ? st.distinct_steps : st.messages_sent);
      cell = std::to_string(v);
    } else if (!r.supported) {
      cell = "declined";
    } else {
      cell = "FAILED";
    }
    out += (out.empty() ? "" : " / ") + cell;
  }
  return out;
}

// The collectives a command line names: one, or every one for "all" (and for
// no name where that is allowed).
std::vector<Collective> collectives_of(const std::string& name) {
  std::vector<Collective> out;
  if (name.empty() || name == "all") {
    for (int c = 0; c < kCollectiveCount; ++c) out.push_back(static_cast<Collective>(c));
  } else if (auto c = parse_collective(name)) {
    out.push_back(*c);
  }
  return out;
}

// The algorithms of `collectives` that --algo names ("all": every one).
// Throws Error(invalid_argument) for a name no chosen collective has.
std::vector<const Algorithm*> chosen_algorithms(const std::vector<Collective>& collectives,
                                                const std::string& algos) {
  const std::vector<std::string> names = split(algos);
  for (const std::string& name : names) {
    if (name == "all") continue;
    const bool known = std::any_of(collectives.begin(), collectives.end(), [&](Collective c) {
      return find_algorithm(c, name) != nullptr;
    });
    if (!known) fail(ErrorCode::invalid_argument, "unknown algorithm '", name, "'");
  }
  std::vector<const Algorithm*> out;
  for (Collective c : collectives)
    for (const Algorithm* a : algorithms_for(c))
      if (algos == "all" || std::find(names.begin(), names.end(), a->name) != names.end())
        out.push_back(a);
  return out;
}

// A comma list of rank counts >= 1 given to `flag`.
std::vector<int> counts_of(const std::string& text, std::string_view flag) {
  std::vector<int> out;
  for (const std::string& r : split(text)) {
    char* end = nullptr;
    const long v = std::strtol(r.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 1 << 20)
      fail(ErrorCode::invalid_argument, flag, ": '", r, "' is not a rank count >= 1");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// --ranks: rank counts >= 1.
std::vector<int> rank_counts(const std::string& text) {
  return counts_of(text, "--ranks");
}

// --hosts at N ranks: null without it; "K": hosts of K consecutive ranks;
// "K1,K2,...": hosts of those sizes, which must add up to N.
std::shared_ptr<const std::vector<int>> hosts_at(const std::string& text, int n) {
  if (text.empty()) return nullptr;
  const std::vector<int> sizes = counts_of(text, "--hosts");
  if (sizes.empty()) fail(ErrorCode::invalid_argument, "--hosts: no host sizes in '", text, "'");
  if (sizes.size() == 1)
    return std::make_shared<const std::vector<int>>(consecutive_hosts(n, sizes[0]));
  int total = 0;
  for (int k : sizes) total += k;
  if (total != n)
    fail(ErrorCode::invalid_argument, "--hosts ", text, " holds ", total, " ranks, not N = ", n);
  return std::make_shared<const std::vector<int>>(hosts_of_sizes(sizes));
}

// --closed-forms --json: every form's time at every N and M, with the seed's
// AllReduce figure beside it.
std::string closed_forms_json(const Args& a, const std::vector<const Algorithm*>& algos) {
  if (a.alpha.empty() || a.beta.empty())
    fail(ErrorCode::invalid_argument, "--closed-forms --json needs --alpha and --beta");
  if (a.bytes.empty())
    fail(ErrorCode::invalid_argument, "--closed-forms --json needs --bytes (sizes M)");
  if (a.ports != 1 && a.ports != 2)
    fail(ErrorCode::invalid_argument, "--ports must be 1 or 2, got ", a.ports);
  CostParams params;
  params.alpha = parse_time(a.alpha, "--alpha");
  params.beta = parse_bandwidth(a.beta, "--beta");
  params.gamma = parse_time(a.gamma, "--gamma");
  params.ports = a.ports;
  std::vector<size_t> sizes;
  for (const std::string& b : split(a.bytes)) sizes.push_back(parse_size(b, "--bytes"));
  const std::vector<int> ranks = rank_counts(a.ranks);
  auto seconds = [](const Prediction& p) {
    return p.ok ? nlohmann::json(p.seconds) : nlohmann::json();
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const Algorithm* al : algos)
    for (int n : ranks)
      for (size_t m : sizes) {
        const auto bytes = static_cast<double>(m);
        const Prediction form = closed_form(*al, n, bytes, params);
        const Prediction seed = al->collective == Collective::allreduce
                                    ? seed_allreduce_time(al->name, n, bytes, params)
                                    : Prediction::none("");
        rows.push_back(
            {{"collective", std::string(to_string(al->collective))},
             {"algo", std::string(al->name)},
             {"ranks", n},
             {"bytes", static_cast<uint64_t>(m)},
             {"ports", params.ports},
             {"alpha_s", params.alpha},
             {"beta_Bps", params.beta},
             {"gamma_s_per_B", params.gamma},
             {"formula", al->costs.empty() ? nlohmann::json()
                                           : nlohmann::json(std::string(al->costs.front().text))},
             {"formula_s", seconds(form)},
             {"why_none", form.ok ? nlohmann::json() : nlohmann::json(form.reason)},
             {"seed_s", seconds(seed)}});
      }
  return rows.dump(2) + "\n";
}

// The proof table of the plain command line; the number of failed cases.
int prove(const Args& a, const std::vector<Collective>& collectives,
          const std::vector<const Algorithm*>& algos, const std::vector<int>& ranks,
          std::ostream& out) {
  out << formatted("%-15s %-20s %6s %10s %8s %10s %14s %10s %10s %6s\n", "collective", "algorithm",
                   "N", "count", "result", "msgs/rank", "bytes/rank", "steps", "depth", "inplace");
  int failures = 0;
  for (Collective c : collectives)
    for (const Algorithm* al : algos) {
      if (al->collective != c) continue;
      for (int n : ranks) {
        CollectiveSpec spec{c, n, 0, c == Collective::barrier ? 0 : a.count, a.elem_size, a.root};
        spec.windows = a.windows || a.window_buffers;
        spec.window_buffers = a.window_buffers;
        spec.host_of = hosts_at(a.hosts, n);
        const VerifyResult r = verify(*al, spec);
        const std::string coll(to_string(c));
        if (!r.supported) {
          out << formatted("%-15s %-20.*s %6d %10zu %8s  (%s)\n", coll.c_str(),
                           static_cast<int>(al->name.size()), al->name.data(), n, spec.count,
                           "declined", r.reason.c_str());
          continue;
        }
        size_t msgs = 0, bytes = 0, steps = 0;
        for (const RankStats& s : r.ranks) {
          msgs = std::max(msgs, s.messages_sent);
          bytes = std::max(bytes, s.bytes_sent);
          steps = std::max(steps, s.distinct_steps);
        }
        out << formatted("%-15s %-20.*s %6d %10zu %8s %10zu %14zu %10zu %10zu %6s\n", coll.c_str(),
                         static_cast<int>(al->name.size()), al->name.data(), n, spec.count,
                         r.ok() ? "proved" : "FAILED", msgs, bytes, steps, r.critical_path,
                         r.in_place_checked ? "yes" : "-");
        if (!r.ok()) {
          ++failures;
          out << formatted("    %s\n", r.error->message.c_str());
        }
      }
    }
  if (failures > 0) out << formatted("# %d case(s) failed\n", failures);
  return failures;
}

int run(const Args& a, const CLI::App& app, std::ostream& out, std::ostream& err) {
  const bool json_flags = app.count("--bytes") || app.count("--alpha") || app.count("--beta") ||
                          app.count("--gamma") || app.count("--ports");
  if ((a.json || json_flags) && !a.closed_forms)
    fail(ErrorCode::invalid_argument,
         "--json, --bytes, --alpha, --beta, --gamma and --ports go with --closed-forms");
  if (a.closed_forms && !a.json && json_flags)
    fail(ErrorCode::invalid_argument,
         "--bytes, --alpha, --beta, --gamma and --ports go with --closed-forms --json");
  if (a.markdown) {
    out << algorithms_markdown();
    return 0;
  }
  if (a.closed_forms && !a.json) {
    if (!a.collective.empty())
      fail(ErrorCode::invalid_argument,
           "--closed-forms prints the table of every collective; name one with --json");
    out << closed_forms_markdown();
    return 0;
  }
  if (a.collective.empty() && !a.closed_forms) {
    err << "chorus-verify: a collective (or all) is required\n" << app.help();
    return 2;
  }
  const std::vector<Collective> collectives = collectives_of(a.collective);
  if (collectives.empty())
    fail(ErrorCode::invalid_argument, "unknown collective '", a.collective, "'");
  if (a.closed_forms) {
    const std::vector<const Algorithm*> algos = chosen_algorithms(collectives, a.algos);
    out << closed_forms_json(a, algos);
    return 0;
  }
  const std::vector<int> ranks = rank_counts(a.ranks);
  const std::vector<const Algorithm*> algos = chosen_algorithms(collectives, a.algos);
  return prove(a, collectives, algos, ranks, out) > 0 ? 1 : 0;
}

}  // namespace

std::string algorithms_markdown() {
  const std::vector<int> ranks = {8, 13};
  const size_t count = 8192;
  std::string out =
      "| collective | name | what it does | cost (closed form) | exact on | steps, N = 8 / 13 "
      "| messages sent per rank, N = 8 / 13 | constraints |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (int ci = 0; ci < kCollectiveCount; ++ci)
    for (const Algorithm* ap : algorithms_for(static_cast<Collective>(ci))) {
      const Algorithm& a = *ap;
      std::string cost, exact;
      for (const ClosedForm& f : a.costs) {
        cost += str_cat(cost.empty() ? "" : "; ", f.text);
        exact += str_cat(exact.empty() ? "" : "; ", exact_on(f));
      }
      if (cost.empty()) {
        cost = "none: the simulator gives its time";
        exact = "-";
      }
      out += str_cat("| ", to_string(a.collective), " | `", a.name, "` | ", a.description, " | ",
                     cost, " | ", exact, " | ", measured(a, ranks, count, true), " | ",
                     measured(a, ranks, count, false), " | ", a.constraints, " |\n");
    }
  return out;
}

std::string closed_forms_markdown() {
  const std::vector<int> ranks = {8, 13};
  const double bytes = 64 << 10;
  std::string out =
      "| collective(algorithm) | closed form | exact on | N = 8 / 13, M = 64 KiB |\n"
      "|---|---|---|---|\n";
  for (int ci = 0; ci < kCollectiveCount; ++ci)
    for (const Algorithm* ap : algorithms_for(static_cast<Collective>(ci))) {
      const Algorithm& a = *ap;
      const std::string name = str_cat(to_string(a.collective), "(", a.name, ")");
      if (a.costs.empty())
        out += str_cat("| ", name, " | none: the simulator gives its time | - | - |\n");
      for (const ClosedForm& f : a.costs) {
        CostParams params;
        params.alpha = 2e-6;
        params.beta = 25e9;
        params.gamma = 1e-10;
        params.ports = f.ports == 0 ? 1 : f.ports;
        std::string times;
        for (int n : ranks) {
          const Prediction p = f.at(n, bytes, params);
          times += str_cat(times.empty() ? "" : " / ",
                           p.ok ? formatted("%.1f us", p.seconds * 1e6) : std::string("-"));
        }
        out += str_cat("| ", name, " | ", f.text, " | ", exact_on(f), " | ", times, " |\n");
      }
    }
  return out;
}

int verify_cli_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"chorus-verify: prove algorithms symbolically and print their message counts"};
  app.set_version_flag("--version", "chorus-verify " CHORUS_VERSION);
  Args a;
  std::string collectives;
  for (int c = 0; c < kCollectiveCount; ++c)
    collectives += str_cat(to_string(static_cast<Collective>(c)), ", ");
  auto* collective_opt = app.add_option("collective", a.collective, collectives + "or all");
  auto* markdown_opt =
      app.add_flag("--markdown", a.markdown,
                   "print the registry as docs/ALGORITHMS.md's table (closed forms, constraints, "
                   "steps and messages proved at N = 8 and 13)")
          ->excludes(collective_opt);
  app.add_option("--ranks,-n", a.ranks, "rank counts, comma separated");
  app.add_option("--count,-c", a.count, "count as the API takes it (elements)");
  app.add_option("--elem-size", a.elem_size, "bytes per element")->check(CLI::PositiveNumber);
  app.add_option("--root,-r", a.root, "root of broadcast, reduce, gather and scatter");
  app.add_option("--algo,-a", a.algos, "algorithm names, comma separated, or all");
  app.add_option("--hosts", a.hosts,
                 "the ranks' hosts, as the hierarchical algorithms need: K (hosts of K "
                 "consecutive ranks) or K1,K2,... (hosts of those sizes, adding up to N)");
  app.add_flag("--windows", a.windows,
               "the ranks share memory windows (one host), as the one-sided algorithms need");
  app.add_flag("--window-buffers", a.window_buffers,
               "Input and Output lie in shared windows (implies --windows)");
  app.add_flag("--closed-forms", a.closed_forms,
               "print docs/ALGORITHMS.md's table of closed forms (each with where it is exact "
               "and its time at N = 8 and 13, M = 64 KiB, alpha 2us, beta 25GB/s, gamma 0.1ns)")
      ->excludes(markdown_opt);
  app.add_flag("--json", a.json,
               "with --closed-forms: every algorithm's closed-form time (on a switch) and the "
               "seed's AllReduce figure at each --ranks and --bytes, as JSON");
  app.add_option("--bytes", a.bytes, "with --json: sizes M, comma separated (8, 4K, 64M)");
  app.add_option("--alpha", a.alpha, "with --json: latency per message (2us, 300ns, ...)");
  app.add_option("--beta", a.beta, "with --json: bandwidth per port and direction (25GB/s)");
  app.add_option("--gamma", a.gamma, "with --json: reduction time per byte (default 0)");
  app.add_option("--ports", a.ports, "with --json: send and receive ports per rank, 1 or 2");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }
  try {
    return run(a, app, out, err);
  } catch (const Error& e) {
    err << "chorus-verify: " << e.what() << "\n";
    return e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
}

}  // namespace chorus
