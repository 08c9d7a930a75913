// Measured tuning rules: chorus-perf --calibrate's output format, the rule the
// tuner takes for a size, and the fall-back to the model.
#include "perf/measure_tuning.h"
#include "tune/selector.h"
#include "tune/tuner.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>

namespace chorus {
namespace {

CollectiveSpec allreduce_spec(int n, size_t bytes) {
  return {Collective::allreduce, n, 0, bytes / 4, 4, 0};
}

TEST(TuningRules, LargestRuleNotAboveTheSizeWins) {
  // A model that would always pick something else: huge alpha favours the
  // log-step algorithms, so rules must visibly override it.
  Tuner tuner(4, CostParams{1e-3, 1e9, 0, 1});
  tuner.set_rules({{Collective::allreduce, "shm", 4, 64, "reduce_broadcast"},
                   {Collective::allreduce, "shm", 4, 4096, "ring"},
                   {Collective::allreduce, "shm", 4, 1 << 20, "bidir_ring"}});
  EXPECT_EQ(tuner.pick(allreduce_spec(4, 8))->name, "reduce_broadcast");  // below every rule
  EXPECT_EQ(tuner.pick(allreduce_spec(4, 64))->name, "reduce_broadcast");
  EXPECT_EQ(tuner.pick(allreduce_spec(4, 4092))->name, "reduce_broadcast");
  EXPECT_EQ(tuner.pick(allreduce_spec(4, 4096))->name, "ring");
  EXPECT_EQ(tuner.pick(allreduce_spec(4, 1 << 24))->name, "bidir_ring");
}

TEST(TuningRules, OtherRankCountsAndCollectivesFallBackToTheModel) {
  const CostParams p{1e-3, 1e9, 0, 1};
  Tuner with_rules(4, p), model_only(4, p);
  with_rules.set_rules({{Collective::allreduce, "shm", 8, 0, "ring"},    // other N
                        {Collective::allgather, "shm", 4, 0, "ring"}});  // other collective
  const CollectiveSpec s = allreduce_spec(4, 1 << 16);
  EXPECT_EQ(with_rules.pick(s), model_only.pick(s));
}

TEST(TuningRules, UnsupportedRuleFallsBackToTheModel) {
  // recursive_doubling AllGather declines N = 6; the model decides instead.
  Tuner tuner(6, CostParams{1e-6, 1e9, 0, 1});
  tuner.set_rules({{Collective::allgather, "shm", 6, 0, "recursive_doubling"}});
  const Algorithm* a = tuner.pick({Collective::allgather, 6, 0, 1024, 4, 0});
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->name, "recursive_doubling");
}

TEST(TuningRules, RoundTripThroughTheFileAndMergeByGroup) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("chorus_rules_" + std::to_string(::getpid()) + ".json"))
                               .string();
  TuningTable a;
  a.links["shm"] = {"shm", 1e-6, 5e9};
  a.rules = {{Collective::allreduce, "shm", 2, 8, "recursive_doubling"},
             {Collective::allreduce, "shm", 4, 8, "ring"}};
  write_tuning_file(path, a);
  TuningTable b;
  b.links["shm"] = {"shm", 2e-6, 6e9};
  b.rules = {{Collective::allreduce, "shm", 2, 8, "ring"},
             {Collective::allreduce, "shm", 2, 1 << 20, "bidir_ring"}};
  write_tuning_file(path, b);  // replaces the N=2 group, keeps N=4
  const TuningTable got = read_tuning_file(path);
  std::filesystem::remove(path);
  ASSERT_EQ(got.rules.size(), 3u);
  EXPECT_EQ(got.rules[0], b.rules[0]);
  EXPECT_EQ(got.rules[1], b.rules[1]);
  EXPECT_EQ(got.rules[2], a.rules[1]);
}

TEST(TuningRules, BadRulesNameTheProblem) {
  const char* text = R"({"format": "chorus-tuning", "version": 1, "links": {},
    "rules": [{"collective": "allreduce", "link": "shm", "ranks": 2, "min_bytes": 8,
               "algorithm": "warp_drive"}]})";
  try {
    tuning_from_json(text, "test");
    FAIL() << "an unknown algorithm must be rejected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("warp_drive"), std::string::npos) << e.what();
  }
}

TEST(Calibrate, RulesFromRowsTakeTheFastestAndMergeRuns) {
  auto row = [](size_t bytes, const char* algo, double us) {
    perf::PerfRow r;
    r.collective = Collective::allreduce;
    r.bytes = bytes;
    r.algorithm = algo;
    r.out_of_place.measured = true;
    r.out_of_place.time_us = us;
    return r;
  };
  const std::vector<perf::PerfRow> rows{row(8, "ring", 5),    row(8, "recursive_doubling", 2),
                                        row(64, "ring", 6),   row(64, "recursive_doubling", 3),
                                        row(1024, "ring", 9), row(1024, "recursive_doubling", 12)};
  const auto rules = perf::rules_from_rows(rows, "shm", 2);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0], (TuningRule{Collective::allreduce, "shm", 2, 8, "recursive_doubling"}));
  EXPECT_EQ(rules[1], (TuningRule{Collective::allreduce, "shm", 2, 1024, "ring"}));
}

}  // namespace
}  // namespace chorus
