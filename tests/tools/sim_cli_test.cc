// chorus-sim command line: the table, crossovers, JSON rows, and clear errors
// with a non-zero exit status on bad input.
#include "sim_cli.h"
#include "support/cli_run.h"

#include "algorithms/algorithm.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace chorus {
namespace {

using test::CliRun;

CliRun cli(std::vector<std::string> args) {
  return test::run_cli(sim_cli_main, "chorus-sim", std::move(args));
}

// The simulated time (us) of the first row of `ring` in a printed table.
double ring_us(const std::string& table) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.find(" ring ") != std::string::npos) {
      std::istringstream f(line);
      std::string size, algo;
      double us = 0;
      f >> size >> algo >> us;
      return us;
    }
  return 0.0;
}

TEST(SimCli, TableMarksTheFastestAndListsCrossovers) {
  const CliRun r = cli({"alltoall", "--ranks", "16", "-b", "64", "-e", "16M", "-f", "16", "--alpha",
                        "2us", "--beta", "25GB/s"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("pairwise"), std::string::npos);
  EXPECT_NE(r.out.find("bruck"), std::string::npos);
  // Bruck wins small blocks (log steps), pairwise large ones (bytes once).
  EXPECT_NE(r.out.find("crossovers: bruck -> pairwise at"), std::string::npos) << r.out;
  size_t marks = 0;
  for (size_t p = r.out.find("  *"); p != std::string::npos; p = r.out.find("  *", p + 1)) ++marks;
  EXPECT_EQ(marks, 5u) << r.out;  // one per size: 64, 1K, 16K, 256K, 4M
}

TEST(SimCli, DeterministicRowsAddTheIntegerBytesAndTheScalePass) {
  auto time_of = [](const std::string& out) { return ring_us(out); };
  const std::vector<std::string> base{"allreduce", "--ranks", "8",      "--bytes", "4M",  "--alpha",
                                      "1us",       "--beta",  "10GB/s", "--algo",  "ring"};
  const CliRun plain = cli(base);
  std::vector<std::string> det = base;
  det.push_back("--deterministic");
  const CliRun d = cli(det);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_NE(d.out.find("deterministic"), std::string::npos) << d.out;
  // Twice the bytes on the wire (int64 lanes for float32), and more.
  EXPECT_GT(time_of(d.out), 1.9 * time_of(plain.out)) << plain.out << d.out;
  std::vector<std::string> bad = base;
  bad[0] = "allgather";
  bad.push_back("--deterministic");
  const CliRun b = cli(bad);
  EXPECT_NE(b.rc, 0);
  EXPECT_NE(b.err.find("does not reduce"), std::string::npos) << b.err;
}

TEST(SimCli, VersionNeedsNoOtherArgument) {
  const CliRun r = cli({"--version"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("chorus-sim ", 0), 0u) << r.out;  // chorus-sim <project version>
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(SimCli, JsonRowsHaveEveryKey) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("chorus_sim_cli_" + std::to_string(::getpid()) + ".json");
  const CliRun r = cli({"allreduce", "--ranks", "8", "--bytes", "1M", "--alpha", "2us", "--beta",
                        "25GB/s", "--gamma", "0.1ns", "--algo", "ring", "--json", path.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 1u);
  for (const char* k : {"collective", "ranks", "bytes", "algo", "topology", "ports", "alpha_s",
                        "beta_Bps", "gamma_s_per_B", "time_s", "formula_s", "bound_s"})
    EXPECT_TRUE(j[0].contains(k)) << k;
  EXPECT_EQ(j[0]["bytes"], 1 << 20);
  EXPECT_EQ(j[0]["algo"], "ring");
  EXPECT_DOUBLE_EQ(j[0]["alpha_s"].get<double>(), 2e-6);
  EXPECT_DOUBLE_EQ(j[0]["beta_Bps"].get<double>(), 25e9);
  EXPECT_NEAR(j[0]["time_s"].get<double>(), j[0]["formula_s"].get<double>(),
              1e-9 * j[0]["time_s"].get<double>());
  std::filesystem::remove(path);
}

TEST(SimCli, BadInputIsAClearErrorAndNonZeroExit) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"allreduce", "--ranks", "8", "--alpha", "2xs", "--beta", "1GB/s"}, "unknown time unit"},
      {{"allreduce", "--ranks", "8", "--alpha", "2us", "--beta", "1GiB/s"}, "bandwidth unit"},
      {{"allreduce", "--ranks", "8", "--alpha", "2us", "--beta", "1GB/s", "--bytes", "4Q"},
       "size suffix"},
      {{"allreduce", "--ranks", "8", "--alpha", "2us", "--beta", "1GB/s", "--algo", "nope"},
       "known: ring"},
      {{"allscatter", "--ranks", "8", "--alpha", "2us", "--beta", "1GB/s"}, "unknown collective"},
      {{"allreduce", "--alpha", "2us", "--beta", "1GB/s"}, "--ranks"},
      {{"allreduce", "--ranks", "0", "--alpha", "2us", "--beta", "1GB/s"}, "--ranks must be"},
      {{"allreduce", "--ranks", "4", "--alpha", "2us", "--beta", "1GB/s", "--ports", "3"},
       "--ports"},
      {{"allreduce", "--ranks", "4", "--alpha", "2us", "--beta", "1GB/s", "--topology", "mesh"},
       "unknown topology"},
      {{"allreduce", "--ranks", "4", "--alpha", "2us", "--beta", "1GB/s", "-b", "1M", "-e", "4K"},
       "larger than"},
      {{"allreduce", "--ranks", "4", "--alpha", "2us", "--beta", "1GB/s", "--bytes", "4K", "-b",
        "8"},
       "exclude"},
  };
  for (const Case& c : cases) {
    const CliRun r = cli(c.args);
    EXPECT_NE(r.rc, 0) << c.says;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << "stderr: " << r.err;
  }
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

TEST(SimCli, PlotDrawsAnSvgWithGnuplot) {
  // gnuplot is a test dependency (scripts/install-deps.sh): its absence is a failure.
  ASSERT_EQ(std::system("command -v gnuplot > /dev/null 2>&1"), 0) << "gnuplot is not installed";
  const auto svg = std::filesystem::temp_directory_path() /
                   ("chorus_sim_plot_" + std::to_string(::getpid()) + ".svg");
  const CliRun r = cli({"allgather", "--ranks", "8", "-b", "1K", "-e", "1M", "-f", "32", "--alpha",
                        "2us", "--beta", "25GB/s", "--plot", svg.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  EXPECT_NE(text.str().find("lower_bound"), std::string::npos);  // the bound's key entry
  EXPECT_NE(text.str().find("bruck"), std::string::npos);
  std::filesystem::remove(svg);
  std::filesystem::remove(svg.string() + ".dat");
}

// --trace: one event per op of every rank's Program, with the fields of a
// measured trace (exec/trace.h), and ops that respect their dependencies.
TEST(SimCli, TraceHasOneEventPerOpOfEveryRank) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("chorus_sim_trace_" + std::to_string(::getpid()) + ".json");
  const CliRun r = cli({"allreduce", "--ranks", "4", "--bytes", "64K", "--alpha", "2us", "--beta",
                        "10GB/s", "--gamma", "0.1ns", "--algo", "ring", "--trace", path.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["otherData"]["simulated"], true);
  const Algorithm* ring = find_algorithm(Collective::allreduce, "ring");
  ASSERT_NE(ring, nullptr);
  const auto programs = build_all(*ring, CollectiveSpec{Collective::allreduce, 4, 0, 16384, 4, 0});
  std::vector<std::map<int, nlohmann::json>> by_op(4);
  double last_end = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int rank = e["pid"];
    const int op = e["args"]["op"];
    EXPECT_TRUE(by_op[static_cast<size_t>(rank)].emplace(op, e).second) << "op recorded twice";
    EXPECT_EQ(e["cat"], "allreduce");
    EXPECT_EQ(e["args"]["algorithm"], "ring");
    EXPECT_EQ(e["args"]["call"], 1);
    EXPECT_EQ(e["name"],
              std::string(to_string(
                  programs[static_cast<size_t>(rank)].ops[static_cast<size_t>(op)].kind)));
    last_end = std::max(last_end, e["ts"].get<double>() + e["dur"].get<double>());
  }
  for (int rank = 0; rank < 4; ++rank) {
    const Program& p = programs[static_cast<size_t>(rank)];
    ASSERT_EQ(by_op[static_cast<size_t>(rank)].size(), p.ops.size()) << "rank " << rank;
    for (size_t i = 0; i < p.ops.size(); ++i)
      for (OpIndex d : p.ops[i].deps) {
        const auto& op = by_op[static_cast<size_t>(rank)].at(static_cast<int>(i));
        const auto& dep = by_op[static_cast<size_t>(rank)].at(static_cast<int>(d));
        EXPECT_GE(op["ts"].get<double>() + op["dur"].get<double>(),
                  dep["ts"].get<double>() + dep["dur"].get<double>() - 1e-9)
            << "rank " << rank << " op " << i << " ends before its dep " << d;
      }
  }
  EXPECT_NEAR(last_end, j["otherData"]["time_us"].get<double>(), 1e-6);
  // More than one size or algorithm cannot be one timeline.
  const CliRun two = cli({"allreduce", "--ranks", "4", "-b", "1K", "-e", "1M", "--alpha", "2us",
                          "--beta", "10GB/s", "--algo", "ring", "--trace", path.string()});
  EXPECT_EQ(two.rc, 2);
  EXPECT_NE(two.err.find("--trace needs one size"), std::string::npos) << two.err;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// chorus-sim --tuning: a version 2 file's fitted link drives the simulation
// (a half-duplex link takes twice as long for ring's two-way exchanges), and
// --tuning excludes --alpha/--beta.
TEST(SimCli, TuningFileDrivesTheFittedModel) {
  const auto dir = std::filesystem::temp_directory_path();
  auto file = [&](bool half) {
    const auto path = dir / ("chorus_sim_tuning_" + std::to_string(::getpid()) +
                             (half ? "_half" : "_full") + ".json");
    std::ofstream(path) << R"({"format": "chorus-tuning", "version": 2, "gamma_s_per_B": 0,
      "links": {"shm": {"alpha_s": 1e-7, "beta_Bps": 1e9, "curve": [[4096, 1e-9]],
                        "half_duplex": )"
                        << (half ? "true" : "false") << R"(, "mem_traffic": 4}},
      "host": {"memory_Bps": 0, "cores": 0}})";
    return path.string();
  };
  auto time_of = [](const CliRun& r) { return ring_us(r.out); };
  const std::string full = file(false), half = file(true);
  const CliRun a =
      cli({"allreduce", "--ranks", "2", "--bytes", "1M", "--algo", "ring", "--tuning", full});
  const CliRun b =
      cli({"allreduce", "--ranks", "2", "--bytes", "1M", "--algo", "ring", "--tuning", half});
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(a.out.find("tuning="), std::string::npos) << a.out;
  // Ring at N = 2: two steps of 512 KiB each way, 1 ns per byte.
  EXPECT_NEAR(time_of(a), 2 * (0.1 + 524.288), 0.01) << a.out;
  EXPECT_NEAR(time_of(b), 2 * time_of(a), 0.5) << b.out;
  const CliRun both = cli({"allreduce", "--ranks", "2", "--bytes", "1M", "--tuning", full,
                           "--alpha", "1us", "--beta", "1GB/s"});
  EXPECT_EQ(both.rc, 2);
  EXPECT_NE(both.err.find("exclude"), std::string::npos) << both.err;
  const CliRun none = cli({"allreduce", "--ranks", "2", "--bytes", "1M"});
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.err.find("--tuning"), std::string::npos) << none.err;
  const CliRun missing =
      cli({"allreduce", "--ranks", "2", "--bytes", "1M", "--tuning", full, "--link", "tcp"});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("no link class 'tcp'"), std::string::npos) << missing.err;
  std::filesystem::remove(full);
  std::filesystem::remove(half);
}

// A calibration cache entry's learned corrections (tune/learner.h) scale the
// rows as a communicator's tuner predicts them: ring's own factor at its
// size class (1 MiB: 2^20), the class-wide one for the others.
TEST(SimCli, LearnedCorrectionsScaleTheRows) {
  const auto dir = std::filesystem::temp_directory_path();
  auto file = [&](const std::string& corrections) {
    const auto path = dir / ("chorus_sim_corr_" + std::to_string(::getpid()) +
                             std::to_string(corrections.size()) + ".json");
    std::ofstream(path) << R"({"format": "chorus-tuning", "version": 2, "gamma_s_per_B": 0,
      "links": {"shm": {"alpha_s": 1e-7, "beta_Bps": 1e9, "curve": [[4096, 1e-9]],
                        "half_duplex": false, "mem_traffic": 4}},
      "host": {"memory_Bps": 0, "cores": 0})"
                        << corrections << "}";
    return path.string();
  };
  auto us_of = [](const CliRun& r, const std::string& algo) {
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string size, name;
      double us = 0;
      if (f >> size >> name >> us && name == algo) return us;
    }
    return 0.0;
  };
  const std::string plain = file("");
  const std::string learned = file(R"(, "corrections": [
      {"collective": "allreduce", "type": "float32", "size_class": 20, "algorithm": "ring",
       "factor": 3, "samples": 2},
      {"collective": "allreduce", "type": "float32", "size_class": 20, "algorithm": "",
       "factor": 0.5, "samples": 4}])");
  const std::vector<std::string> args = {
      "allreduce", "--ranks", "2", "--bytes", "1M", "--algo", "ring,halving_doubling", "--tuning"};
  auto run = [&](const std::string& f) {
    std::vector<std::string> a = args;
    a.push_back(f);
    return cli(a);
  };
  const CliRun a = run(plain), b = run(learned);
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.out.find("2 learned corrections"), std::string::npos) << b.out;
  EXPECT_NEAR(us_of(b, "ring"), 3 * us_of(a, "ring"), 0.01) << a.out << b.out;
  EXPECT_NEAR(us_of(b, "halving_doubling"), 0.5 * us_of(a, "halving_doubling"), 0.01) << b.out;
  std::filesystem::remove(plain);
  std::filesystem::remove(learned);
}

}  // namespace
}  // namespace chorus
