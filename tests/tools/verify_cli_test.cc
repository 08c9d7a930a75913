// chorus-verify command line: the proof table, docs/ALGORITHMS.md's generated
// tables, the closed forms as JSON (with the seed's AllReduce figures that
// bench/testbed/analyze.py reads), and clear errors on bad input.
#include "verify_cli.h"
#include "support/cli_run.h"

#include "algorithms/algorithm.h"
#include "core/check.h"
#include "model/cost_model.h"
#include "model/units.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace chorus {
namespace {

using test::CliRun;

CliRun cli(std::vector<std::string> args) {
  return test::run_cli(verify_cli_main, "chorus-verify", std::move(args));
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(VerifyCli, ProvesAndCountsMessages) {
  const CliRun r = cli({"allreduce", "--ranks", "8,13", "--count", "8192", "--algo", "ring"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(rows[0].rfind("collective      algorithm", 0), 0u) << rows[0];
  // Ring AllReduce: 2(N-1) messages of about M/N per rank.
  EXPECT_EQ(rows[1],
            "allreduce       ring                      8       8192   proved         14          "
            "57344         14         14    yes");
  EXPECT_NE(rows[2].find(" 13 "), std::string::npos) << rows[2];
  EXPECT_NE(rows[2].find("proved         24"), std::string::npos) << rows[2];
}

TEST(VerifyCli, DeclinedCasesSayWhy) {
  const CliRun r = cli({"allreduce", "--ranks", "4", "--algo", "one_shot"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("declined  (needs shared windows"), std::string::npos) << r.out;
  const CliRun w = cli({"allreduce", "--ranks", "4", "--algo", "one_shot", "--windows"});
  ASSERT_EQ(w.rc, 0) << w.err;
  EXPECT_NE(w.out.find("proved"), std::string::npos) << w.out;
}

TEST(VerifyCli, MarkdownHasARowPerAlgorithm) {
  const CliRun r = cli({"--markdown"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, algorithms_markdown());
  size_t algorithms = 0;
  for (const Algorithm& a : all_algorithms()) {
    ++algorithms;
    const std::string row = str_cat("| ", to_string(a.collective), " | `", a.name, "` |");
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
  }
  EXPECT_EQ(lines(r.out).size(), algorithms + 2);
  EXPECT_NE(r.out.find("| allreduce | `ring` |"), std::string::npos);
  EXPECT_NE(r.out.find("| 14 / 24 | 14 / 24 | any N |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST(VerifyCli, ClosedFormsTableHasEveryFormAndItsTime) {
  const CliRun r = cli({"--closed-forms"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, closed_forms_markdown());
  size_t rows = 0;
  for (const Algorithm& a : all_algorithms()) rows += a.costs.empty() ? 1 : a.costs.size();
  EXPECT_EQ(lines(r.out).size(), rows + 2);
  // ceil(log2 N) alpha at alpha = 2 us.
  EXPECT_NE(r.out.find("| barrier(dissemination) | ceil(log2 N) alpha | switch, 1 or 2 ports | "
                       "6.0 us / 8.0 us |"),
            std::string::npos)
      << r.out;
  // Each form at its own ports: halving_doubling's ring form assumes 2; N = 13
  // is no power of two.
  EXPECT_NE(r.out.find("| ring, 2 ports | 47.5 us / - |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| alltoall(bruck) | none: the simulator gives its time | - | - |"),
            std::string::npos)
      << r.out;
  // The ring's time, 2(N-1)(alpha + M/(N beta)) + (N-1) gamma M/N at N = 8.
  const double m = 64 << 10;
  const double ring = 14 * (2e-6 + m / 8 / 25e9) + 7 * 1e-10 * m / 8;
  char want[64];
  std::snprintf(want, sizeof want, "| %.1f us / ", ring * 1e6);
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(VerifyCli, ClosedFormsAsJson) {
  const CliRun r = cli({"--closed-forms", "--json", "allreduce", "--ranks", "6,8", "--bytes",
                        "8,1M", "--alpha", "20us", "--beta", "0.125GB/s"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  const std::vector<const Algorithm*> algos = algorithms_for(Collective::allreduce);
  ASSERT_EQ(rows.size(), algos.size() * 2 * 2);
  CostParams p;
  p.alpha = parse_time("20us");  // as the command line reads it
  p.beta = parse_bandwidth("0.125GB/s");
  size_t k = 0;
  for (const Algorithm* a : algos)
    for (int n : {6, 8})
      for (double m : {8.0, 1048576.0}) {
        const auto& row = rows[k++];
        EXPECT_EQ(row["collective"], "allreduce");
        EXPECT_EQ(row["algo"], std::string(a->name));
        EXPECT_EQ(row["ranks"], n);
        EXPECT_EQ(row["bytes"].get<double>(), m);
        EXPECT_EQ(row["ports"], 1);
        EXPECT_EQ(row["alpha_s"].get<double>(), p.alpha);
        EXPECT_EQ(row["beta_Bps"].get<double>(), p.beta);
        EXPECT_EQ(row["gamma_s_per_B"].get<double>(), 0.0);
        const Prediction form = closed_form(*a, n, m, p);
        if (form.ok) {
          EXPECT_EQ(row["formula_s"].get<double>(), form.seconds) << a->name;
          EXPECT_TRUE(row["why_none"].is_null());
        } else {
          EXPECT_TRUE(row["formula_s"].is_null()) << a->name;
          EXPECT_EQ(row["why_none"], form.reason);
        }
        const Prediction seed = seed_allreduce_time(a->name, n, m, p);
        if (seed.ok)
          EXPECT_EQ(row["seed_s"].get<double>(), seed.seconds) << a->name;
        else
          EXPECT_TRUE(row["seed_s"].is_null()) << a->name;
      }
}

// The seed's AllReduce table, as analyze.py compares the testbed with it.
TEST(VerifyCli, SeedFiguresOfTheAllreduces) {
  const CliRun r = cli({"--closed-forms", "--json", "allreduce", "--ranks", "6,8", "--bytes", "1M",
                        "--alpha", "20us", "--beta", "0.125GB/s", "--gamma", "1ns"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const double a = 20e-6, b = 0.125e9, m = 1 << 20;
  auto seed = [&](const std::string& algo, int n) {
    for (const auto& row : nlohmann::json::parse(r.out))
      if (row["algo"] == algo && row["ranks"] == n) return row["seed_s"];
    ADD_FAILURE() << "no row " << algo << " N=" << n;
    return nlohmann::json();
  };
  auto near = [](const nlohmann::json& got, double want) {
    return got.is_number() && std::abs(got.get<double>() - want) <= 1e-12 * want;
  };
  EXPECT_TRUE(near(seed("ring", 8), 14 * a + 14.0 / 8 * m / b));
  EXPECT_TRUE(near(seed("ring", 6), 10 * a + 10.0 / 6 * m / b));
  EXPECT_TRUE(near(seed("halving_doubling", 8), 6 * a + 14.0 / 8 * m / b));
  EXPECT_TRUE(seed("halving_doubling", 6).is_null());
  EXPECT_TRUE(near(seed("recursive_doubling", 8), 3 * a + 3 * m / b));
  EXPECT_TRUE(seed("recursive_doubling", 6).is_null());
  // The seed's tree form holds at any N and one port (log2 N, not rounded),
  // where the model's closed form needs 2 ports.
  EXPECT_TRUE(near(seed("double_binary_tree", 8), 6 * a + 3 * m / b));
  EXPECT_TRUE(near(seed("double_binary_tree", 6), 2 * std::log2(6) * a + std::log2(6) * m / b));
  EXPECT_TRUE(near(seed("reduce_broadcast", 6), 6 * a + 6 * m / b));
  EXPECT_TRUE(seed("bidir_ring", 8).is_null());
  EXPECT_TRUE(seed("one_shot", 8).is_null());
  // gamma does not enter the seed's figures.
  EXPECT_TRUE(near(seed("reduce_broadcast", 8), 6 * a + 6 * m / b));

  const CliRun other = cli({"--closed-forms", "--json", "allgather", "--bytes", "1M", "--alpha",
                            "20us", "--beta", "0.125GB/s"});
  ASSERT_EQ(other.rc, 0) << other.err;
  for (const auto& row : nlohmann::json::parse(other.out)) EXPECT_TRUE(row["seed_s"].is_null());
}

TEST(VerifyCli, VersionNeedsNoOtherArgument) {
  const CliRun r = cli({"--version"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("chorus-verify ", 0), 0u) << r.out;
}

TEST(VerifyCli, BadInputExitsWithTwoAndSaysWhy) {
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {{}, "a collective (or all) is required"},
      {{"bogus"}, "unknown collective 'bogus'"},
      {{"allreduce", "--algo", "nosuch"}, "unknown algorithm 'nosuch'"},
      {{"allreduce", "--ranks", "0"}, "--ranks: '0' is not a rank count >= 1"},
      {{"allreduce", "--json"}, "go with --closed-forms"},
      {{"allreduce", "--bytes", "8"}, "go with --closed-forms"},
      {{"--closed-forms", "--alpha", "2us"}, "go with --closed-forms --json"},
      {{"--closed-forms", "allreduce"}, "name one with --json"},
      {{"--closed-forms", "--json", "allreduce", "--bytes", "8"}, "needs --alpha and --beta"},
      {{"--closed-forms", "--json", "--alpha", "2us", "--beta", "1GB/s"}, "needs --bytes"},
      {{"--closed-forms", "--json", "--bytes", "8x", "--alpha", "2us", "--beta", "1GB/s"},
       "--bytes"},
      {{"--closed-forms", "--json", "--bytes", "8", "--alpha", "2 parsecs", "--beta", "1GB/s"},
       "--alpha"},
      {{"--closed-forms", "--json", "--bytes", "8", "--alpha", "2us", "--beta", "1GB/s", "--ports",
        "3"},
       "--ports must be 1 or 2"},
  };
  for (const Bad& b : bad) {
    const CliRun r = cli(b.args);
    EXPECT_EQ(r.rc, 2) << b.says;
    EXPECT_TRUE(r.out.empty()) << b.says << ": " << r.out;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
  }
  // What CLI11 rejects itself keeps its own exit codes.
  EXPECT_NE(cli({"--markdown", "allreduce"}).rc, 0);
  EXPECT_NE(cli({"--markdown", "--closed-forms"}).rc, 0);
}

}  // namespace
}  // namespace chorus
