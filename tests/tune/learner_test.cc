// The learner (tune/learner.h) driven by timings of the test's choosing:
// every rank derives the same exploration order from the call number, the
// ranks agree on the winner from the maximum over ranks of each candidate's
// typical time (so they agree even when one rank's own times favour another
// candidate), far slower candidates are dropped, the budget cuts the rounds,
// a drifting winner is explored again, and a cached decision is watched
// from the start. Also the model's corrections and the tuning file's
// learned sections.
#include "tune/learner.h"

#include "algorithms/algorithm.h"
#include "tune/tuning_file.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace chorus {
namespace {

const Algorithm* algo(const char* name) {
  const Algorithm* a = find_algorithm(Collective::allreduce, name);
  EXPECT_NE(a, nullptr) << name;
  return a;
}

LearnKey key(int size_class = 20) {
  return {Collective::allreduce, DataType::float32, ReduceOp::sum, size_class, false};
}

std::vector<LearnCandidate> three() {
  return {{algo("ring"), 1e-3},
          {algo("double_binary_tree"), 1.1e-3},
          {algo("halving_doubling"), 1.2e-3}};
}

// rank, algorithm, the class's call number -> that call's seconds on the rank.
using Timing = std::function<double(int, const Algorithm&, uint64_t)>;

// N ranks' classes, driven call by call as communicators drive them: an
// agreement where due (every rank must find it due at the same call; the
// figures' maximum over ranks), then next() and record() on every rank.
struct Ranks {
  Ranks(int n, const LearnSettings& s, std::vector<LearnCandidate> cands,
        const LearnedPick* cached = nullptr, LearnKey k = key())
      : settings(s) {
    for (int r = 0; r < n; ++r) classes.emplace_back(k, cands, settings, cached);
  }

  // Runs `calls` calls; returns the algorithm of each (checked equal on
  // every rank) and appends rank 0's agreement lines to `log`.
  std::vector<std::string> run(int calls, const Timing& time) {
    std::vector<std::string> ran;
    for (int i = 0; i < calls; ++i) {
      const Agreement due = classes[0].due();
      for (const LearnClass& c : classes) EXPECT_EQ(c.due(), due) << "call " << i;
      if (due != Agreement::none) {
        std::vector<double> max(classes[0].candidates().size(), 0.0);
        for (const LearnClass& c : classes) {
          const std::vector<double> f = c.figures();
          for (size_t k = 0; k < f.size(); ++k) max[k] = std::max(max[k], f[k]);
        }
        std::vector<std::string> lines;
        for (LearnClass& c : classes) lines.push_back(c.agree(max));
        for (const std::string& l : lines) EXPECT_EQ(l, lines[0]);
        log.push_back(lines[0]);
      }
      std::string name;
      for (size_t r = 0; r < classes.size(); ++r) {
        LearnClass& c = classes[r];
        const uint64_t n = c.calls();
        const LearnStep step = c.next();
        const Algorithm& a = *c.candidates()[static_cast<size_t>(step.candidate)].algorithm;
        if (r == 0) name = a.name;
        EXPECT_EQ(a.name, name) << "rank " << r << " call " << n;
        if (step.ticket != 0) {
          EXPECT_EQ(&c.algorithm_of(step.ticket), &a);
          c.record(step.ticket, time(static_cast<int>(r), a, n));
        }
      }
      ran.push_back(name);
    }
    return ran;
  }

  LearnSettings settings;
  std::vector<LearnClass> classes;
  std::vector<std::string> log;
};

// Fixed seconds per algorithm, the same on every rank and call.
Timing fixed(double ring, double tree, double hd) {
  return [=](int, const Algorithm& a, uint64_t) {
    return a.name == "ring" ? ring : a.name == "double_binary_tree" ? tree : hd;
  };
}

TEST(Learner, RunsTheModelsPickFirstThenEachCandidateInARotatingOrder) {
  Ranks ranks(2, LearnSettings{}, three());
  const LearnSettings& s = ranks.settings;
  ASSERT_EQ(s.burst, 2);
  const std::vector<std::string> ran = ranks.run(s.start + 3 * 3 * 2, fixed(1, 1, 1));
  for (int i = 0; i < s.start; ++i) EXPECT_EQ(ran[static_cast<size_t>(i)], "ring") << i;
  const char* ring = "ring";
  const char* tree = "double_binary_tree";
  const char* hd = "halving_doubling";
  // Each visit is two calls in a row (the first not timed).
  const std::vector<std::string> expect = {
      ring, ring, tree, tree, hd,   hd,    // round 0 (warm-up)
      tree, tree, hd,   hd,   ring, ring,  // round 1, rotated by 1
      hd,   hd,   ring, ring, tree, tree,  // round 2, rotated by 2
  };
  EXPECT_EQ(std::vector<std::string>(ran.begin() + s.start, ran.end()), expect);
  EXPECT_EQ(ranks.classes[0].phase(), LearnPhase::exploring);
}

TEST(Learner, TheDecisionIsTheLeastOfTheMaximumOverRanks) {
  // Rank 0's own times favour the tree, rank 1's the ring; the call's time
  // is its slowest rank's: ring max(1.0, 2.0) = 2.0, tree max(1.5, 1.4) = 1.5,
  // halving-doubling max(1.8, 1.9) = 1.9. Both decide the tree.
  const Timing t = [](int rank, const Algorithm& a, uint64_t) {
    if (a.name == "ring") return rank == 0 ? 2.0e-3 : 1.0e-3;
    if (a.name == "double_binary_tree") return rank == 0 ? 1.5e-3 : 1.4e-3;
    return rank == 0 ? 1.8e-3 : 1.9e-3;
  };
  Ranks ranks(2, LearnSettings{}, three());
  ranks.run(200, t);
  for (const LearnClass& c : ranks.classes) {
    EXPECT_EQ(c.phase(), LearnPhase::decided);
    EXPECT_EQ(c.current().name, "double_binary_tree");
    EXPECT_DOUBLE_EQ(c.learned_seconds(), 1.5e-3);
  }
  ASSERT_FALSE(ranks.log.empty());
  const std::string& decision = ranks.log[1];
  EXPECT_NE(decision.find("learn allreduce float32 sum 2^20 B user: times"), std::string::npos)
      << decision;
  EXPECT_NE(decision.find("-> double_binary_tree"), std::string::npos) << decision;
  // After the decision every call runs the winner.
  const std::vector<std::string> after = ranks.run(50, t);
  EXPECT_TRUE(std::all_of(after.begin(), after.end(),
                          [](const std::string& n) { return n == "double_binary_tree"; }));
}

TEST(Learner, ACandidateWithAHeavyTailLosesToASteadyOne) {
  // The ring is 1 ms on most calls but 4 ms on every third (a late
  // wake-up): its median, 1 ms, would win, but a job pays its mean, about
  // 2 ms. The tree is a steady 1.6 ms and wins. Size class 10: 8 timed
  // rounds.
  std::map<std::pair<int, std::string>, int> seen;
  const Timing t = [&seen](int rank, const Algorithm& a, uint64_t) {
    const int k = seen[{rank, std::string(a.name)}]++;
    if (a.name == "ring") return k % 3 == 0 ? 4e-3 : 1e-3;
    return a.name == "double_binary_tree" ? 1.6e-3 : 3e-3;
  };
  Ranks ranks(2, LearnSettings{}, three(), nullptr, key(10));
  ranks.run(200, t);
  for (const LearnClass& c : ranks.classes) EXPECT_EQ(c.current().name, "double_binary_tree");
}

TEST(Learner, OrderAndDecisionAreAFunctionOfTheTimingsAlone) {
  // Noisy but seeded timings: two runs give the same calls and log lines.
  const Timing t = [](int rank, const Algorithm& a, uint64_t call) {
    const double base = a.name == "ring" ? 1.0 : a.name == "double_binary_tree" ? 1.05 : 1.1;
    return base *
           (1 + 0.2 * static_cast<double>((call * 7 + static_cast<uint64_t>(rank) * 3) % 5) / 5);
  };
  Ranks a(3, LearnSettings{}, three()), b(3, LearnSettings{}, three());
  EXPECT_EQ(a.run(120, t), b.run(120, t));
  EXPECT_EQ(a.log, b.log);
  EXPECT_EQ(a.classes[0].phase(), LearnPhase::decided);
}

TEST(Learner, AFarSlowerCandidateIsDroppedAfterTheFirstTimedRound) {
  Ranks ranks(2, LearnSettings{}, three());
  const LearnSettings& s = ranks.settings;
  // halving_doubling 3x the ring: dropped at the agreement after round 2.
  const std::vector<std::string> ran = ranks.run(120, fixed(1e-3, 1.2e-3, 3e-3));
  ASSERT_GE(ranks.log.size(), 2u);
  EXPECT_NE(ranks.log[0].find("dropped halving_doubling"), std::string::npos) << ranks.log[0];
  const size_t round3 = static_cast<size_t>(s.start + 3 * 3 * s.burst);
  EXPECT_EQ(std::count(ran.begin() + static_cast<std::ptrdiff_t>(round3), ran.end(),
                       std::string("halving_doubling")),
            0);
  EXPECT_EQ(ranks.classes[0].current().name, "ring");
}

TEST(Learner, TheBudgetCutsTheRounds) {
  // A budget of 5% of 20 calls of the winner (1 ms) is 1 ms: rounds 0 to 2
  // already spent 3 x 2 x (0.9 + 0.9) ms over it, so the class decides at
  // once.
  LearnSettings s;
  s.budget_calls = 20;
  Ranks ranks(2, s, three());
  ranks.run(s.start + 3 * 3 * s.burst + 1, fixed(1e-3, 1.9e-3, 1.9e-3));
  ASSERT_EQ(ranks.log.size(), 1u);
  EXPECT_NE(ranks.log[0].find("0 more rounds; learn"), std::string::npos) << ranks.log[0];
  EXPECT_NE(ranks.log[0].find("decided on rounds 1-2"), std::string::npos) << ranks.log[0];
  EXPECT_EQ(ranks.classes[1].phase(), LearnPhase::decided);
  EXPECT_EQ(ranks.classes[1].current().name, "ring");
  // The default budget (1,000 calls) runs every round: 4 timed rounds
  // above 64 KiB (rounds_large), 2 after the drop agreement.
  Ranks roomy(2, LearnSettings{}, three());
  roomy.run(200, fixed(1e-3, 1.9e-3, 1.9e-3));
  ASSERT_GE(roomy.log.size(), 2u);
  EXPECT_NE(roomy.log[0].find(", 2 more rounds"), std::string::npos) << roomy.log[0];
  EXPECT_NE(roomy.log[1].find(": times "), std::string::npos) << roomy.log[1];
}

TEST(Learner, ADriftingWinnerIsExploredAgain) {
  Ranks ranks(2, LearnSettings{}, three());
  ranks.run(120, fixed(1e-3, 1.3e-3, 1.6e-3));
  ASSERT_EQ(ranks.classes[0].current().name, "ring");
  EXPECT_EQ(ranks.classes[0].explorations(), 1);
  const size_t before = ranks.log.size();
  // The same times: the drift checks keep the winner.
  ranks.run(100, fixed(1e-3, 1.3e-3, 1.6e-3));
  ASSERT_GT(ranks.log.size(), before);
  EXPECT_NE(ranks.log.back().find(": kept"), std::string::npos) << ranks.log.back();
  // The ring turns 3x slower (another job on the host, a link gone bad):
  // the next check explores again, and the tree wins.
  ranks.run(600, fixed(3e-3, 1.3e-3, 1.6e-3));
  bool explored = false;
  for (const std::string& l : ranks.log) explored |= l.find("exploring again") != std::string::npos;
  EXPECT_TRUE(explored);
  EXPECT_EQ(ranks.classes[0].explorations(), 2);
  for (const LearnClass& c : ranks.classes) EXPECT_EQ(c.current().name, "double_binary_tree");
}

TEST(Learner, ACachedDecisionIsWatchedFromTheStart) {
  const LearnSettings s;
  const LearnedPick pick{
      Collective::allreduce, DataType::float32, ReduceOp::sum, 20, false, "halving_doubling", 1e-3};
  // As cached and still true: kept, no exploration.
  Ranks ok(2, s, three(), &pick);
  EXPECT_EQ(ok.classes[0].phase(), LearnPhase::decided);
  const std::vector<std::string> ran = ok.run(s.start + s.first_check + 1, fixed(2e-3, 2e-3, 1e-3));
  EXPECT_TRUE(std::all_of(ran.begin(), ran.end(),
                          [](const std::string& n) { return n == "halving_doubling"; }));
  ASSERT_EQ(ok.log.size(), 1u);
  EXPECT_NE(ok.log[0].find("halving_doubling now 1000us, learned 1000us: kept"), std::string::npos)
      << ok.log[0];
  // A poisoned cache: the cached winner is 4x what it says; the first check
  // explores, and the truly fastest wins.
  Ranks poisoned(2, s, three(), &pick);
  poisoned.run(200, fixed(1e-3, 2e-3, 4e-3));
  ASSERT_FALSE(poisoned.log.empty());
  EXPECT_NE(poisoned.log[0].find("halving_doubling now 4000us against 1000us learned: "
                                 "exploring again"),
            std::string::npos)
      << poisoned.log[0];
  EXPECT_EQ(poisoned.classes[0].current().name, "ring");
  // A cached winner no longer among the candidates keeps its place.
  const LearnedPick other{
      Collective::allreduce, DataType::float32, ReduceOp::sum, 20, false, "reduce_broadcast", 1e-3};
  LearnClass c(key(), three(), s, &other);
  EXPECT_EQ(c.current().name, "reduce_broadcast");
  EXPECT_EQ(c.candidates().size(), 4u);
}

TEST(Learner, AClassOfOneCandidateNeverExploresOrAgrees) {
  Ranks ranks(2, LearnSettings{}, {{algo("ring"), 1e-3}});
  const std::vector<std::string> ran = ranks.run(300, fixed(1e-3, 1e-3, 1e-3));
  EXPECT_TRUE(ranks.log.empty());
  EXPECT_TRUE(
      std::all_of(ran.begin(), ran.end(), [](const std::string& n) { return n == "ring"; }));
}

TEST(Learner, StaleTicketsAreIgnored) {
  LearnSettings s;
  LearnClass c(key(), three(), s);
  LearnStep step;
  int calls = 0;
  while (step.ticket == 0) {  // the first timed call: round 1, a visit's second
    step = c.next();
    ++calls;
  }
  EXPECT_EQ(calls, s.start + 3 * s.burst + s.burst);
  c.record(step.ticket + (uint64_t{1} << 40), 5.0);  // another exploration's
  c.record(step.ticket, -1.0);                       // not a time
  c.record(step.ticket, 2e-3);
  while (c.due() == Agreement::none) c.next();
  ASSERT_EQ(c.due(), Agreement::drop);
  const std::vector<double> f = c.figures();
  EXPECT_EQ(f[static_cast<size_t>(step.candidate)], 2e-3);
}

TEST(Learner, DecisionsBecomeLearnedPicksAndCorrections) {
  Learner learner;
  int made = 0;
  LearnClass* c = learner.at(key(), [&] {
    ++made;
    return three();
  });
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(learner.at(key(), [&] { return three(); }), c);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(learner.at(key(10), [] { return std::vector<LearnCandidate>{}; }), nullptr);
  bool decided = false;
  while (!decided) {
    if (c->due() != Agreement::none) {
      std::vector<double> f = c->figures();
      c->agree(f);  // one rank: its figures are the maximum
      decided = learner.absorb(*c);
      continue;
    }
    const LearnStep step = c->next();
    const Algorithm& a = *c->candidates()[static_cast<size_t>(step.candidate)].algorithm;
    c->record(step.ticket, a.name == "double_binary_tree" ? 0.5e-3 : 2e-3);
  }
  const std::vector<LearnedPick> picks = learner.learned();
  ASSERT_EQ(picks.size(), 1u);
  EXPECT_EQ(picks[0].algorithm, "double_binary_tree");
  EXPECT_EQ(picks[0].size_class, 20);
  EXPECT_DOUBLE_EQ(picks[0].seconds, 0.5e-3);
  // The tree was predicted 1.1 ms and ran 0.5: its correction is 0.5/1.1.
  const auto& corr = learner.corrections();
  EXPECT_NEAR(
      correction_factor(corr, Collective::allreduce, DataType::float32, "double_binary_tree", 20),
      0.5 / 1.1, 1e-9);
  EXPECT_NEAR(correction_factor(corr, Collective::allreduce, DataType::float32, "ring", 20), 2.0,
              1e-9);
  // No size class of its own: the class-wide factor (geometric mean of the
  // candidates' ratios, in the order observed) stands for any algorithm.
  const double wide =
      correction_factor(corr, Collective::allreduce, DataType::float32, "reduce_broadcast", 20);
  EXPECT_GT(wide, 0.5 / 1.1);
  EXPECT_LT(wide, 2.0);
}

TEST(Learner, AClassExploringAgainKeepsItsLastDecisionForTheCache) {
  Learner learner;
  LearnClass* c = learner.at(key(), [] { return three(); });
  ASSERT_NE(c, nullptr);
  double ring_time = 1e-3;
  auto drive = [&](int calls) {
    for (int i = 0; i < calls; ++i) {
      if (c->due() != Agreement::none) {
        c->agree(c->figures());  // one rank: its figures are the maximum
        learner.absorb(*c);
      }
      const LearnStep step = c->next();
      const Algorithm& a = *c->candidates()[static_cast<size_t>(step.candidate)].algorithm;
      c->record(step.ticket, a.name == "ring" ? ring_time : 2e-3);
    }
  };
  drive(100);
  ASSERT_EQ(c->phase(), LearnPhase::decided);
  ring_time = 5e-3;  // the ring drifts: the class explores again
  while (c->phase() == LearnPhase::decided) drive(1);
  ASSERT_EQ(c->phase(), LearnPhase::exploring);
  const std::vector<LearnedPick> picks = learner.learned();
  ASSERT_EQ(picks.size(), 1u);
  EXPECT_EQ(picks[0].algorithm, "ring");
  EXPECT_DOUBLE_EQ(picks[0].seconds, 1e-3);
}

TEST(CorrectionFactor, OwnThenInterpolatedThenOne) {
  const std::vector<ModelCorrection> corr = {
      {Collective::allreduce, DataType::float32, 10, "", 2.0, 3},
      {Collective::allreduce, DataType::float32, 20, "", 8.0, 3},
      {Collective::allreduce, DataType::float32, 14, "ring", 0.5, 1},
      {Collective::allreduce, DataType::float32, 12, "halving_doubling", 1.0, 1},
      {Collective::allreduce, DataType::float32, 16, "halving_doubling", 4.0, 1},
  };
  auto f = [&](std::string_view a, int cls, DataType t = DataType::float32) {
    return correction_factor(corr, Collective::allreduce, t, a, cls);
  };
  EXPECT_DOUBLE_EQ(f("ring", 14), 0.5);
  EXPECT_NEAR(f("halving_doubling", 14), 2.0, 1e-12);  // between its own, geometric
  EXPECT_NEAR(f("halving_doubling", 18), 2.0 * std::pow(4.0, 0.8), 1e-12);  // the class's
  EXPECT_NEAR(f("ring", 15), 2.0 * std::pow(4.0, 0.5), 1e-12);              // halfway, geometric
  EXPECT_DOUBLE_EQ(f("double_binary_tree", 5), 2.0);                        // below the lowest
  EXPECT_DOUBLE_EQ(f("double_binary_tree", 30), 8.0);                       // above the highest
  EXPECT_DOUBLE_EQ(f("", 20), 8.0);
  EXPECT_DOUBLE_EQ(f("ring", 14, DataType::float64), 1.0);  // nothing for this type
  EXPECT_DOUBLE_EQ(correction_factor(corr, Collective::allgather, DataType::float32, "ring", 14),
                   1.0);
}

TEST(LearnKeys, SizeClassesAreFactorsOfTwo) {
  EXPECT_EQ(size_class_of(0), 0);
  EXPECT_EQ(size_class_of(1), 0);
  EXPECT_EQ(size_class_of(2), 1);
  EXPECT_EQ(size_class_of(1024), 10);
  EXPECT_EQ(size_class_of(1025), 11);
  EXPECT_EQ(describe({Collective::reduce_scatter, DataType::bfloat16, ReduceOp::max, 12, true}),
            "reduce_scatter bfloat16 max 2^12 B window");
}

TEST(TuningFileLearned, RoundTripsAndBadEntriesAreClearErrors) {
  TuningTable t;
  t.links["shm"] = LinkParams("shm", 1e-6, 5e9);
  t.learned = {{Collective::allreduce, DataType::float32, ReduceOp::sum, 20, false, "ring", 1e-4},
               {Collective::allgather, DataType::uint8, ReduceOp::sum, 3, true, "ring", 2e-6}};
  t.corrections = {{Collective::allreduce, DataType::float32, 20, "ring", 0.8, 3},
                   {Collective::allreduce, DataType::float32, 20, "", 0.9, 5}};
  const TuningTable back = tuning_from_json(tuning_to_json(t), "test");
  EXPECT_EQ(back.learned, t.learned);
  EXPECT_EQ(back.corrections, t.corrections);

  auto error = [](const std::string& extra) {
    try {
      tuning_from_json(
          R"({"format": "chorus-tuning", "version": 2, "links": {"shm": {"alpha_s": 1e-6, "beta_Bps": 5e9}})" +
              extra + "}",
          "f");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string pick =
      R"("collective": "allreduce", "type": "float32", "op": "sum", "size_class": 20)";
  EXPECT_NE(error(R"(, "learned": {})").find("\"learned\" must be a list"), std::string::npos);
  EXPECT_NE(error(R"(, "learned": [{)" + pick +
                  R"(, "buffers": "user", "algorithm": "fastest", "time_s": 1e-4}])")
                .find("unknown algorithm 'fastest'"),
            std::string::npos);
  EXPECT_NE(error(R"(, "learned": [{)" + pick +
                  R"(, "buffers": "gpu", "algorithm": "ring", "time_s": 1e-4}])")
                .find("buffers must be"),
            std::string::npos);
  EXPECT_NE(error(R"(, "learned": [{)" + pick +
                  R"(, "buffers": "user", "algorithm": "ring", "time_s": -1}])")
                .find("time_s must be > 0"),
            std::string::npos);
  EXPECT_NE(
      error(
          R"(, "learned": [{"collective": "allreduce", "type": "float32", "op": "sum", "size_class": 64, "buffers": "user", "algorithm": "ring", "time_s": 1}])")
          .find("size_class must be a whole number from 0 to 63"),
      std::string::npos);
  EXPECT_NE(
      error(
          R"(, "corrections": [{"collective": "allreduce", "type": "float32", "size_class": 3, "algorithm": "ring", "factor": 0, "samples": 1}])")
          .find("factor must be > 0"),
      std::string::npos);
  EXPECT_NE(
      error(
          R"(, "corrections": [{"collective": "allreduce", "type": "float32", "size_class": 3, "algorithm": "quick", "factor": 1, "samples": 1}])")
          .find("unknown algorithm 'quick'"),
      std::string::npos);
}

}  // namespace
}  // namespace chorus
