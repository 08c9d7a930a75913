// The tuner on a fitted machine model: it predicts by simulating the model,
// and a measured rule overrides the model only where the model cannot tell
// the rule's algorithm from its own pick.
#include "tune/tuner.h"

#include "tune/model_sim.h"

#include <gtest/gtest.h>

#include <limits>

namespace chorus {
namespace {

TuningTable fitted() {
  TuningTable t;
  LinkParams shm("shm", 0.3e-6, 4e9);
  shm.curve = {{{4096, 1e-10}, {1 << 20, 5e-11}, {64 << 20, 2.5e-10}}};
  shm.half_duplex = true;
  shm.half_duplex_from = 1 << 20;
  shm.mem_traffic = 4;
  shm.call_overhead = 0.4e-6;
  t.links["shm"] = shm;
  t.host = {20e9, 2};
  t.compute.copy = {{{65536, 2e-11}, {64 << 20, 1.6e-10}}};
  t.compute.kernels["float32.sum"] = {{{65536, 3e-11}, {64 << 20, 1.1e-10}}};
  return t;
}

CollectiveSpec allreduce(int n, size_t count) {
  return CollectiveSpec{Collective::allreduce, n, 0, count, 4, 0};
}

TEST(MachineTuner, PredictsBySimulatingTheFittedModel) {
  auto model = std::make_shared<MachineSim>(fitted(), "shm");
  ASSERT_TRUE(model->fitted());
  Tuner tuner(4, CostParams{0.3e-6, 4e9, 1e-10, 1}, {}, model);
  for (size_t count : {size_t{2}, size_t{1} << 16, size_t{1} << 22})
    for (const Algorithm* a : candidates_for(allreduce(4, count))) {
      const double want = model->time(*a, allreduce(4, count), DataType::float32, ReduceOp::sum);
      EXPECT_DOUBLE_EQ(tuner.predict(*a, allreduce(4, count)), want) << a->name << " " << count;
      // The call overhead is part of every prediction.
      EXPECT_GE(want, 0.4e-6);
    }
  // Without the model, the same tuner is the seeds' alpha-beta-gamma.
  Tuner plain(4, CostParams{0.3e-6, 4e9, 1e-10, 1});
  const Algorithm* ring = find_algorithm(Collective::allreduce, "ring");
  EXPECT_NE(plain.predict(*ring, allreduce(4, 1 << 22)),
            tuner.predict(*ring, allreduce(4, 1 << 22)));
}

TEST(MachineTuner, ARuleWinsOnlyWhereTheModelCannotTellItFromItsPick) {
  auto model = std::make_shared<MachineSim>(fitted(), "shm");
  const CollectiveSpec spec = allreduce(4, size_t{1} << 22);  // 16 MiB
  const auto candidates = candidates_for(spec);
  Tuner probe(4, CostParams{0.3e-6, 4e9, 1e-10, 1}, {}, model);
  const Algorithm* pick = probe.pick(spec, candidates);
  ASSERT_NE(pick, nullptr);
  const double best = probe.predict(*pick, spec);
  const Algorithm* close = nullptr;
  const Algorithm* far = nullptr;
  for (const Algorithm* a : candidates) {
    if (a == pick) continue;
    const double t = probe.predict(*a, spec);
    if (t <= best * (1 + kTunerPickMargin) && close == nullptr) close = a;
    if (t > best * 1.5 && far == nullptr) far = a;
  }
  ASSERT_NE(far, nullptr) << "the model should rank some algorithm far behind " << pick->name;
  auto rule_for = [&](const Algorithm* a) {
    return std::vector<TuningRule>{{Collective::allreduce, "shm", 4, 0, std::string(a->name)}};
  };
  // A rule the model can tell apart (predicted 50% slower): the model wins.
  Tuner with_far(4, CostParams{0.3e-6, 4e9, 1e-10, 1}, rule_for(far), model);
  EXPECT_EQ(with_far.pick(spec, candidates), pick) << far->name;
  // Without a fitted model the same rule wins, as version 1 files had it.
  Tuner v1(4, CostParams{0.3e-6, 4e9, 1e-10, 1}, rule_for(far));
  EXPECT_EQ(v1.pick(spec, candidates), far);
  if (close != nullptr) {
    Tuner with_close(4, CostParams{0.3e-6, 4e9, 1e-10, 1}, rule_for(close), model);
    EXPECT_EQ(with_close.pick(spec, candidates), close) << close->name;
  }
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// The learner's candidates (tune/learner.h): the model's pick first, the
// seeds' closed-form pick always (the model's ranking may be wrong), then
// the model's next best, at most `max`, each with its uncorrected
// prediction.
TEST(MachineTuner, LearnCandidatesAreTheModelsPickTheSeedsPickAndTheNextBest) {
  auto model = std::make_shared<MachineSim>(fitted(), "shm");
  const CostParams seeds_params{0.3e-6, 4e9, 1e-10, 1};
  for (size_t count : {size_t{2}, size_t{1} << 12, size_t{1} << 18, size_t{1} << 22}) {
    const CollectiveSpec spec = allreduce(4, count);
    const auto candidates = candidates_for(spec);
    Tuner tuner(4, seeds_params, {}, model);
    Tuner seeds(4, seeds_params);
    const Algorithm* model_pick = tuner.pick(spec, candidates);
    const Algorithm* seeds_pick = seeds.pick(spec, candidates);
    const std::vector<LearnCandidate> got = tuner.learn_candidates(spec, candidates, 1.0, 2, 3);
    ASSERT_GE(got.size(), 2u) << count;
    ASSERT_LE(got.size(), 3u) << count;
    EXPECT_EQ(got[0].algorithm, model_pick) << count;
    bool has_seeds = false;
    for (const LearnCandidate& c : got) {
      has_seeds |= c.algorithm == seeds_pick;
      EXPECT_DOUBLE_EQ(c.predicted, tuner.predict(*c.algorithm, spec, false));
    }
    EXPECT_TRUE(has_seeds) << count << ": " << seeds_pick->name;
    // max 1: the model's pick alone.
    EXPECT_EQ(tuner.learn_candidates(spec, candidates, 2.0, 1, 1).size(), 1u);
  }
}

}  // namespace
}  // namespace chorus
