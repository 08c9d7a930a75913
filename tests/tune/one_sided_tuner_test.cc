// The one-sided AllReduce algorithms (one_shot, two_shot) in the tuner, the
// selector and the simulated sweep: candidates only where the ranks share
// windows (spec.windows; on one host for a sweep), never otherwise; predicted
// by their closed forms on the seeds' model and by simulation on the fitted
// one, where the tuner chooses them when they win.
#include "tune/tuner.h"

#include "analysis/sim_sweep.h"
#include "tune/model_sim.h"
#include "tune/selector.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace chorus {
namespace {

bool is_one_sided_algorithm(const Algorithm* a) {
  return a->name == "one_shot" || a->name == "two_shot";
}

CollectiveSpec allreduce(int n, size_t count, bool windows) {
  CollectiveSpec spec{Collective::allreduce, n, 0, count, 4, 0};
  spec.windows = windows;
  return spec;
}

// The tuner's log line for `spec` (a fresh tuner logs every size class once).
std::string logged_pick(int n, const CostParams& params, const CollectiveSpec& spec,
                        const Algorithm** pick) {
  Tuner tuner(n, params);
  std::string line;
  tuner.set_log([&](const std::string& text) { line = text; });
  *pick = tuner.pick(spec);
  return line;
}

TEST(OneSidedTuner, CandidatesOnlyWhereTheRanksShareWindows) {
  const CostParams params{1e-6, 4e9, 1e-10, 1};
  for (int n : {2, 3, 4, 8})
    for (size_t count : {size_t{1}, size_t{1} << 10, size_t{1} << 20}) {
      size_t one_sided = 0;
      for (const Algorithm* a : candidates_for(allreduce(n, count, false)))
        EXPECT_FALSE(is_one_sided_algorithm(a)) << a->name << " N=" << n;
      for (const Algorithm* a : candidates_for(allreduce(n, count, true)))
        one_sided += is_one_sided_algorithm(a) ? 1 : 0;
      EXPECT_EQ(one_sided, 2u) << "N=" << n;

      const Algorithm* pick = nullptr;
      const std::string without = logged_pick(n, params, allreduce(n, count, false), &pick);
      ASSERT_NE(pick, nullptr);
      EXPECT_FALSE(is_one_sided_algorithm(pick)) << pick->name;
      EXPECT_NE(without.find("ring="), std::string::npos) << without;
      EXPECT_EQ(without.find("one_shot="), std::string::npos) << without;
      EXPECT_EQ(without.find("two_shot="), std::string::npos) << without;
      const std::string with = logged_pick(n, params, allreduce(n, count, true), &pick);
      EXPECT_NE(with.find("one_shot="), std::string::npos) << with;
      EXPECT_NE(with.find("two_shot="), std::string::npos) << with;
    }
  // Handed a one-sided candidate for a call without windows, the tuner
  // passes it over.
  Tuner tuner(4, params);
  const Algorithm* given[] = {find_algorithm(Collective::allreduce, "one_shot")};
  EXPECT_EQ(tuner.pick(allreduce(4, 1, false), given), nullptr);
  EXPECT_EQ(tuner.pick(allreduce(4, 1, true), given), given[0]);
}

TEST(OneSidedTuner, TheSelectorNamesWhyWithoutWindows) {
  Selector selector(Config{}, std::make_unique<Tuner>(4, CostParams{1e-6, 4e9, 1e-10, 1}));
  try {
    selector.choose(allreduce(4, 1024, false), "one_shot");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("shared windows"), std::string::npos) << e.what();
  }
  EXPECT_EQ(selector.choose(allreduce(4, 1024, true), "two_shot").name, "two_shot");
  for (size_t count : {size_t{1}, size_t{1} << 12, size_t{1} << 22})
    EXPECT_FALSE(is_one_sided_algorithm(&selector.choose(allreduce(4, count, false), "")));
}

TEST(OneSidedTuner, PredictsTheClosedFormsOnTheSeedsModel) {
  // N = 4, alpha 1 us, beta 1 GB/s, gamma 0; M = 1000 floats = 4000 B, a
  // block 1000 B = 1 us.
  //   one_shot: 2 alpha + 3 (alpha + 4 us) = 17 us
  //   two_shot: 4 alpha + 3 (alpha + 1 us) + ceil(3/d) 1 us: 13 us on one
  //   port, 12 us on two.
  const CollectiveSpec spec = allreduce(4, 1000, true);
  const Algorithm* one_shot = find_algorithm(Collective::allreduce, "one_shot");
  const Algorithm* two_shot = find_algorithm(Collective::allreduce, "two_shot");
  ASSERT_NE(one_shot, nullptr);
  ASSERT_NE(two_shot, nullptr);
  Tuner one_port(4, CostParams{1e-6, 1e9, 0, 1});
  Tuner two_ports(4, CostParams{1e-6, 1e9, 0, 2});
  EXPECT_NEAR(one_port.predict(*one_shot, spec), 17e-6, 1e-15);
  EXPECT_NEAR(one_port.predict(*two_shot, spec), 13e-6, 1e-15);
  EXPECT_NEAR(two_ports.predict(*two_shot, spec), 12e-6, 1e-15);
}

// A fitted model in which the engines decide: a half-duplex shm class at
// 2.5e-10 s/B whatever the size (a rank's sends and receives take turns on
// its engine), copies at 1e-10 s/B and reductions at 1.5e-10 s/B, no limit
// on memory or cores, alpha 0.3 us, no call overhead.
TuningTable engine_bound() {
  TuningTable t;
  LinkParams shm("shm", 0.3e-6, 4e9);
  shm.curve = {{{4096, 2.5e-10}}};
  shm.half_duplex = true;
  shm.mem_traffic = 4;
  t.links["shm"] = shm;
  t.compute.copy = {{{4096, 1e-10}}};
  t.compute.kernels["float32.sum"] = {{{4096, 1.5e-10}}};
  return t;
}

TEST(OneSidedTuner, TheFittedModelSimulatesThemAndChoosesTwoShotWhereItWins) {
  auto model = std::make_shared<MachineSim>(engine_bound(), "shm");
  ASSERT_TRUE(model->fitted());
  Tuner tuner(4, CostParams{0.3e-6, 4e9, 1e-10, 1}, {}, model);
  const Algorithm* two_shot = find_algorithm(Collective::allreduce, "two_shot");
  // N = 4, M = 16 MiB, blocks of c = 4 MiB; a = alpha. two_shot, staged:
  //   copy Input into the window                        4c x 1e-10
  //   kReady (nothing local to do meanwhile)              a
  //   3 get_reduce, one after another (the first reads
  //   the own block from Input): alpha + c x 2.5e-10, then the
  //   kernel's excess over a copy, c x 0.5e-10           3 (a + 3e-10 c)
  //   copy the reduced block into the window              c x 1e-10
  //   kReduced, then 3 gets on the reader's engine      2a + 3c x 2.5e-10
  //   kDone                                               a
  // = 7a + 2.15e-9 c. A get holds only the reader's engine, so no rank's
  // gets wait for another's.
  const double c = 4 << 20;
  const CollectiveSpec big = allreduce(4, size_t{4} << 20, true);
  const double t_two = tuner.predict(*two_shot, big);
  EXPECT_NEAR(t_two, 7 * 0.3e-6 + 2.15e-9 * c, 1e-9 * t_two);
  EXPECT_DOUBLE_EQ(t_two, model->time(*two_shot, big, DataType::float32, ReduceOp::sum));
  // The ring and halving-doubling send and receive 2 (N-1)/N M each way
  // through every rank's engine, which takes turns: at least 3 M x 2.5e-10
  // = 12.6 ms, a third more than two_shot's 9.0 ms.
  for (const char* name : {"ring", "halving_doubling"})
    EXPECT_GT(tuner.predict(*find_algorithm(Collective::allreduce, name), big), 3 * 4 * c * 2.5e-10)
        << name;
  EXPECT_EQ(tuner.pick(big)->name, "two_shot");
  // The same call without windows: a two-sided algorithm.
  const Algorithm* without = tuner.pick(allreduce(4, size_t{4} << 20, false));
  ASSERT_NE(without, nullptr);
  EXPECT_FALSE(is_one_sided_algorithm(without)) << without->name;
  // With Input and Output in windows nothing is staged: the copy of Input
  // into the window (4c) and of the reduced block into it (c) go, 5c x 1e-10
  // less: 7a + 1.65e-9 c.
  CollectiveSpec in_windows = big;
  in_windows.window_buffers = true;
  EXPECT_NEAR(model->time(*two_shot, in_windows, DataType::float32, ReduceOp::sum),
              7 * 0.3e-6 + 1.65e-9 * c, 1e-9 * t_two);
}

TEST(OneSidedTuner, AFittedFlagAlphaPricesOneShotsFlagsAndGets) {
  // engine_bound() at N = 2, M = 8 B (2 floats), staged; f = the signal and
  // get latency (flag_alpha where fitted, else alpha = 0.3 us). Rank 0:
  //   copy Input into the window                  0 -> 0.8 ns
  //   kReady at once; rank 1's arrives             0.8 ns + f
  //   copy its own Input into Output               0.8 -> 1.6 ns
  //   get_reduce of rank 1's 8 B on its engine     from 0.8 ns + 2f, 2 ns,
  //   then the kernel's excess, 0.4 ns             -> 3.2 ns + 2f
  //   kDone; rank 1's arrives                      4.0 ns + 3f
  // Rank 1 gets rank 0's input (0.8 ns + 2f -> 2.8 ns + 2f), reduces its own
  // into it (1.2 ns), raises kDone at 4.0 ns + 2f. The call: 4 ns + 3f.
  // Recursive doubling's one exchange pays alpha, and both messages take
  // turns on the engines: 0.3 us + 2 x 2 ns, then 0.4 ns of reduction (into
  // scratch) and a 0.8 ns copy into Output.
  const CollectiveSpec tiny = allreduce(2, 2, true);
  const Algorithm* one_shot = find_algorithm(Collective::allreduce, "one_shot");
  const Algorithm* doubling = find_algorithm(Collective::allreduce, "recursive_doubling");
  ASSERT_NE(one_shot, nullptr);
  ASSERT_NE(doubling, nullptr);
  TuningTable unfitted = engine_bound();
  TuningTable fitted = engine_bound();
  fitted.links["shm"].flag_alpha = 0.05e-6;
  auto time = [&](const TuningTable& t, const Algorithm& a) {
    return MachineSim(t, "shm").time(a, tiny, DataType::float32, ReduceOp::sum);
  };
  EXPECT_NEAR(time(unfitted, *one_shot), 4e-9 + 3 * 0.3e-6, 1e-15);
  EXPECT_NEAR(time(fitted, *one_shot), 4e-9 + 3 * 0.05e-6, 1e-15);
  // Messages keep alpha: recursive doubling is the same either way.
  EXPECT_NEAR(time(unfitted, *doubling), 0.3e-6 + 5.2e-9, 1e-15);
  EXPECT_DOUBLE_EQ(time(fitted, *doubling), time(unfitted, *doubling));
  // So the tuner picks one_shot only where the flags are fitted fast.
  auto pick = [&](const TuningTable& t) {
    Tuner tuner(2, CostParams{0.3e-6, 4e9, 1e-10, 1}, {}, std::make_shared<MachineSim>(t, "shm"));
    return tuner.pick(tiny)->name;
  };
  EXPECT_NE(pick(unfitted), "one_shot");
  EXPECT_EQ(pick(fitted), "one_shot");
}

TEST(OneSidedTuner, ASweepRunsThemWhereTheTopologyIsOneHost) {
  // alpha 1 us, beta 1 GB/s, gamma 0, M = 4000 B on 4 ranks: one_shot
  // 17 us (above), on a switch with its closed form; on hier:4 (one host)
  // simulated alike but without a form (its forms assume a switch); on
  // hier:2 (two hosts) skipped, saying why.
  const LinkParams link{"link", 1e-6, 1e9};
  SimSweepSpec spec;
  spec.collective = Collective::allreduce;
  spec.ranks = 4;
  spec.elem_size = 4;
  spec.params = CostParams{1e-6, 1e9, 0, 1};
  spec.algorithms = {find_algorithm(Collective::allreduce, "one_shot")};
  spec.sizes = {4000};
  auto sw = make_topology("switch", 4, link, link);
  EXPECT_TRUE(sweep_call(spec, *sw, 1000).windows);
  const SimSweep on_switch = sim_sweep(spec, *sw);
  ASSERT_EQ(on_switch.sizes.size(), 1u);
  ASSERT_EQ(on_switch.sizes[0].size(), 1u);
  EXPECT_NEAR(on_switch.sizes[0][0].time, 17e-6, 1e-15);
  ASSERT_TRUE(on_switch.sizes[0][0].formula.has_value());
  EXPECT_NEAR(*on_switch.sizes[0][0].formula, 17e-6, 1e-15);

  const SimSweep one_host = sim_sweep(spec, *make_topology("hier:4", 4, link, link));
  ASSERT_EQ(one_host.sizes[0].size(), 1u);
  EXPECT_NEAR(one_host.sizes[0][0].time, 17e-6, 1e-15);
  EXPECT_FALSE(one_host.sizes[0][0].formula.has_value());

  const SimSweep two_hosts = sim_sweep(spec, *make_topology("hier:2", 4, link, link));
  EXPECT_TRUE(two_hosts.sizes[0].empty());
  ASSERT_EQ(two_hosts.skipped.size(), 1u);
  EXPECT_NE(two_hosts.skipped[0].find("one_shot skipped"), std::string::npos);
  EXPECT_NE(two_hosts.skipped[0].find("shared windows"), std::string::npos);
}

}  // namespace
}  // namespace chorus
