// chorus-verify: proves algorithms with the symbolic verifier and prints the
// per-rank message, byte and step counts it measured.
//
//   chorus-verify allreduce --ranks 8,13 --count 1031 [--algo ring,bruck|all]
//   chorus-verify all --ranks 16 --count 4096 --elem-size 4
//   chorus-verify allreduce --algo one_shot,two_shot --windows [--window-buffers]
//   chorus-verify --markdown    docs/ALGORITHMS.md's table, from the registry
//
// Exit status: 0 when every case is proved, 1 when one fails (the error names
// the algorithm, N, count, rank and op), 2 on bad arguments.
#include "algorithms/algorithm.h"
#include "core/check.h"
#include "analysis/verify_algorithm.h"
#include "verify/verifier.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Steps and messages per rank, proved by the verifier: "14 / 24". The largest
// over ranks, as in the plain table. The ranks share windows (one host), so
// that the one-sided algorithms are proved too.
std::string measured(const chorus::Algorithm& a, const std::vector<int>& ranks, size_t count,
                     bool steps) {
  using namespace chorus;
  std::string out;
  for (int n : ranks) {
    CollectiveSpec spec{a.collective, n, 0, a.collective == Collective::barrier ? 0 : count, 4, 0};
    spec.windows = true;
    const VerifyResult r = verify(a, spec);
    std::string cell = "-";
    if (r.ok()) {
      size_t v = 0;
      for (const RankStats& st : r.ranks) v = std::max(v, steps ? st.distinct_steps : st.messages_sent);
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

// The registry as a Markdown table, by collective: every algorithm's row, its closed forms
// (where each is exact) and the verifier's counts at N = 8 and 13.
void print_markdown() {
  using namespace chorus;
  const std::vector<int> ranks = {8, 13};
  const size_t count = 8192;
  std::printf("| collective | name | what it does | cost (closed form) | exact on | steps, N = 8 / 13 "
              "| messages sent per rank, N = 8 / 13 | constraints |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int ci = 0; ci < kCollectiveCount; ++ci)
  for (const Algorithm* ap : algorithms_for(static_cast<Collective>(ci))) {
    const Algorithm& a = *ap;
    std::string cost, exact;
    for (const ClosedForm& f : a.costs) {
      cost += str_cat(cost.empty() ? "" : "; ", f.text);
      exact += str_cat(exact.empty() ? "" : "; ", f.topologies,
                       f.ports == 0 ? ", 1 or 2 ports" : f.ports == 1 ? ", 1 port" : ", 2 ports");
    }
    if (cost.empty()) {
      cost = "none: the simulator gives its time";
      exact = "-";
    }
    std::printf("| %s | `%s` | %s | %s | %s | %s | %s | %s |\n",
                std::string(to_string(a.collective)).c_str(), std::string(a.name).c_str(),
                std::string(a.description).c_str(), cost.c_str(), exact.c_str(),
                measured(a, ranks, count, true).c_str(), measured(a, ranks, count, false).c_str(),
                std::string(a.constraints).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chorus;
  CLI::App app{"chorus-verify: prove algorithms symbolically and print their message counts"};
  app.set_version_flag("--version", "chorus-verify " CHORUS_VERSION);
  std::string collective_arg;
  std::string ranks_arg = "8";
  std::string algo_arg = "all";
  size_t count = 1024;
  size_t elem_size = 4;
  int root = 0;
  bool markdown = false;
  bool windows = false;
  bool window_buffers = false;
  auto* collective_opt =
      app.add_option("collective", collective_arg,
                     "allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, barrier or all");
  app.add_flag("--markdown", markdown,
               "print the registry as docs/ALGORITHMS.md's table (closed forms, constraints, "
               "steps and messages proved at N = 8 and 13)")
      ->excludes(collective_opt);
  app.add_option("--ranks,-n", ranks_arg, "rank counts, comma separated");
  app.add_option("--count,-c", count, "count as the API takes it (elements)");
  app.add_option("--elem-size", elem_size, "bytes per element")->check(CLI::PositiveNumber);
  app.add_option("--root,-r", root, "root of broadcast and reduce");
  app.add_option("--algo,-a", algo_arg, "algorithm names, comma separated, or all");
  app.add_flag("--windows", windows,
               "the ranks share memory windows (one host), as the one-sided algorithms need");
  app.add_flag("--window-buffers", window_buffers,
               "Input and Output lie in shared windows (implies --windows)");
  CLI11_PARSE(app, argc, argv);
  if (markdown) {
    print_markdown();
    return 0;
  }
  if (collective_arg.empty()) {
    std::fprintf(stderr, "chorus-verify: a collective (or all) is required\n%s",
                 app.help().c_str());
    return 2;
  }

  std::vector<Collective> collectives;
  if (collective_arg == "all") {
    for (int c = 0; c < kCollectiveCount; ++c) collectives.push_back(static_cast<Collective>(c));
  } else if (auto c = parse_collective(collective_arg)) {
    collectives.push_back(*c);
  } else {
    std::fprintf(stderr, "chorus-verify: unknown collective '%s'\n", collective_arg.c_str());
    return 2;
  }
  std::vector<int> ranks;
  for (const std::string& r : split(ranks_arg)) {
    char* end = nullptr;
    const long v = std::strtol(r.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 1 << 20) {
      std::fprintf(stderr, "chorus-verify: --ranks: '%s' is not a rank count >= 1\n", r.c_str());
      return 2;
    }
    ranks.push_back(static_cast<int>(v));
  }
  const std::vector<std::string> names = split(algo_arg);
  for (const std::string& name : names) {
    if (name == "all") continue;
    const bool known = std::any_of(collectives.begin(), collectives.end(), [&](Collective c) {
      return find_algorithm(c, name) != nullptr;
    });
    if (!known) {
      std::fprintf(stderr, "chorus-verify: unknown algorithm '%s'\n", name.c_str());
      return 2;
    }
  }

  std::printf("%-15s %-20s %6s %10s %8s %10s %14s %10s %10s %6s\n", "collective", "algorithm",
              "N", "count", "result", "msgs/rank", "bytes/rank", "steps", "depth", "inplace");
  int failures = 0;
  for (Collective c : collectives)
    for (const Algorithm* a : algorithms_for(c)) {
      if (algo_arg != "all" && std::find(names.begin(), names.end(), a->name) == names.end())
        continue;
      for (int n : ranks) {
        CollectiveSpec spec{c, n, 0, c == Collective::barrier ? 0 : count, elem_size, root};
        spec.windows = windows || window_buffers;
        spec.window_buffers = window_buffers;
        const VerifyResult r = verify(*a, spec);
        if (!r.supported) {
          std::printf("%-15s %-20.*s %6d %10zu %8s  (%s)\n", std::string(to_string(c)).c_str(),
                      static_cast<int>(a->name.size()), a->name.data(), n, spec.count,
                      "declined", r.reason.c_str());
          continue;
        }
        size_t msgs = 0, bytes = 0, steps = 0;
        for (const RankStats& s : r.ranks) {
          msgs = std::max(msgs, s.messages_sent);
          bytes = std::max(bytes, s.bytes_sent);
          steps = std::max(steps, s.distinct_steps);
        }
        std::printf("%-15s %-20.*s %6d %10zu %8s %10zu %14zu %10zu %10zu %6s\n",
                    std::string(to_string(c)).c_str(), static_cast<int>(a->name.size()),
                    a->name.data(), n, spec.count, r.ok() ? "proved" : "FAILED", msgs, bytes,
                    steps, r.critical_path, r.in_place_checked ? "yes" : "-");
        if (!r.ok()) {
          ++failures;
          std::printf("    %s\n", r.error->message.c_str());
        }
      }
    }
  if (failures > 0) std::printf("# %d case(s) failed\n", failures);
  return failures > 0 ? 1 : 0;
}
