// The deterministic calls' schedule independence, proved symbolically
// (analysis/verify_algorithm.h: verify_deterministic) for every AllReduce,
// ReduceScatter and Reduce algorithm that serves the integer pass, at
// N = 1 .. 9, 13 and 16, and for the scatter road with every AllToAll
// algorithm; and a broken integer pass is caught.
#include "analysis/verify_algorithm.h"

#include "algorithms/deterministic.h"
#include "core/check.h"
#include "core/exact_sum.h"

#include <gtest/gtest.h>

namespace chorus {
namespace {

TEST(DeterministicProof, EveryIntegerPassGivesEachElementEachRankOnce) {
  int proved = 0;
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce})
    for (const Algorithm* a : algorithms_for(c))
      for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16})
        for (DataType t : {DataType::float16, DataType::float32, DataType::float64})
          for (size_t count : {size_t{1}, static_cast<size_t>(n) + 1, size_t{1031}}) {
            CollectiveSpec call{c, n, 0, count, dtype_size(t), n - 1};
            call.windows = true;
            const VerifyResult r = verify_deterministic(*a, call, t);
            if (!r.supported) continue;  // the algorithm declines the integer call
            ASSERT_TRUE(r.ok()) << r.error->message;
            ++proved;
          }
  EXPECT_GT(proved, 1000);
}

TEST(DeterministicProof, TheScatterRoadWithEveryAllToAll) {
  int proved = 0;
  for (const Algorithm* a : algorithms_for(Collective::alltoall))
    for (int n : {2, 3, 4, 7, 16})
      for (size_t count : {size_t{1}, size_t{1031}}) {
        CollectiveSpec call{Collective::allreduce, n, 0, count, 4, 0};
        call.windows = true;
        const VerifyResult r = verify_deterministic(*a, call, DataType::float32);
        if (!r.supported) continue;
        ASSERT_TRUE(r.ok()) << r.error->message;
        ++proved;
      }
  EXPECT_GT(proved, 8);
}

const DeterministicPart& part(const DeterministicPlan& plan, DeterministicRole role) {
  for (const DeterministicPart& p : plan.parts)
    if (p.role == role) return p;
  ADD_FAILURE() << "no " << to_string(role) << " part";
  return plan.parts.front();
}

TEST(DeterministicProof, PartsCarryTheWiderElementsAndTheScales) {
  const CollectiveSpec call{Collective::allreduce, 4, 0, 1000, 4, 0};
  const DeterministicPlan f32 =
      deterministic_plan(call, DataType::float32, DeterministicRoad::whole, "ring");
  EXPECT_EQ(part(f32, DeterministicRole::integers).spec.elem_size, 8u);
  EXPECT_EQ(part(f32, DeterministicRole::integers).spec.count, 1000u);
  EXPECT_EQ(part(f32, DeterministicRole::integers).algorithm, "ring");
  // One uint8 scale per element, and the flag.
  EXPECT_EQ(part(f32, DeterministicRole::scales).spec.count, 1001u);
  EXPECT_EQ(part(f32, DeterministicRole::scales).spec.elem_size, 1u);
  EXPECT_EQ(part(f32, DeterministicRole::scales).type, DataType::uint8);
  EXPECT_EQ(part(f32, DeterministicRole::scales).op, ReduceOp::max);
  EXPECT_TRUE(part(f32, DeterministicRole::specials).only_with_specials);
  const DeterministicPlan f64 =
      deterministic_plan({Collective::allreduce, 4, 0, 1000, 8, 0}, DataType::float64,
                         DeterministicRoad::whole, "ring");
  EXPECT_EQ(part(f64, DeterministicRole::integers).spec.count, 2000u);  // two lanes
  const DeterministicPlan f16 =
      deterministic_plan({Collective::reduce_scatter, 4, 0, 10, 2, 0}, DataType::float16,
                         DeterministicRoad::whole, "ring");
  EXPECT_EQ(part(f16, DeterministicRole::scales).spec.count, 1u);  // the flag only
  EXPECT_EQ(part(f16, DeterministicRole::integers).spec.count, 10u);
  // ReduceScatter's scales cover every rank's part.
  const DeterministicPlan rs =
      deterministic_plan({Collective::reduce_scatter, 4, 0, 10, 4, 0}, DataType::float32,
                         DeterministicRoad::whole, "ring");
  EXPECT_EQ(part(rs, DeterministicRole::scales).spec.count, 41u);
  // Its scatter road is the exchange alone, of its own part.
  const DeterministicPlan rs_scatter =
      deterministic_plan({Collective::reduce_scatter, 4, 0, 10, 4, 0}, DataType::float32,
                         DeterministicRoad::scatter, "");
  ASSERT_EQ(rs_scatter.parts.size(), 1u);
  EXPECT_EQ(rs_scatter.parts[0].role, DeterministicRole::exchange);
  EXPECT_EQ(rs_scatter.parts[0].spec.count, 10u);
}

// Every road, for every reducing collective and floating type, is one
// description that the simulator prices and the verifier proves; the
// runtime runs the same description (tests/api/deterministic_test.cc holds
// it to it). A road the description lacks, or a part that neither can
// price or prove, fails here.
TEST(DeterministicProof, EveryRoadIsPricedAndProvedFromItsDescription) {
  const LinkParams link{"link", 1e-6, 1e10};
  int proved = 0;
  for (int road = 0; road < kDeterministicRoadCount; ++road)
    for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce})
      for (DataType t :
           {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64})
        for (int n : {1, 2, 3, 5, 8}) {
          const auto r = static_cast<DeterministicRoad>(road);
          const CollectiveSpec call{c, n, 0, 1031, dtype_size(t), n - 1};
          if (r == DeterministicRoad::gather && c == Collective::reduce_scatter) {
            EXPECT_THROW(deterministic_plan(call, t, r, ""), Error);
            continue;
          }
          const DeterministicPlan plan = deterministic_plan(call, t, r, "");
          EXPECT_EQ(plan.road, r);
          ASSERT_FALSE(plan.parts.empty());
          const VerifyResult v = verify_deterministic_plan(plan);
          ASSERT_TRUE(v.ok()) << to_string(r) << " " << to_string(c) << " N=" << n << ": "
                              << v.error->message;
          ASSERT_TRUE(v.supported) << to_string(r) << " " << to_string(c) << " " << v.reason;
          const auto topology = make_topology("switch", n, link, link);
          const double t_sim = simulate_deterministic_plan(plan, *topology, SimOptions{});
          if (n > 1) {
            EXPECT_GT(t_sim, 0) << to_string(r) << " " << to_string(c);
          }
          ++proved;
        }
  EXPECT_EQ(proved, 160);  // 3 roads x 3 collectives x 4 types x 5 N, less gather ReduceScatter
}

TEST(DeterministicProof, BadInputIsRefusedClearly) {
  const CollectiveSpec call{Collective::allgather, 4, 0, 10, 4, 0};
  EXPECT_THROW(deterministic_plan(call, DataType::float32, DeterministicRoad::whole, "ring"),
               Error);
  const CollectiveSpec ar{Collective::allreduce, 4, 0, 10, 4, 0};
  EXPECT_THROW(deterministic_plan(ar, DataType::int32, DeterministicRoad::whole, "ring"), Error);
  DeterministicPlan plan =
      deterministic_plan(ar, DataType::float32, DeterministicRoad::whole, "ring");
  plan.parts[1].algorithm = "no_such_algorithm";
  EXPECT_THROW(verify_deterministic_plan(plan), Error);
}

TEST(DeterministicProof, SimulatedCostCountsTheExtraBytes) {
  // On an alpha-beta switch without local costs, a large call's deterministic
  // ring moves twice the bytes: about twice the time, plus the scale pass
  // (one uint8 per element).
  const LinkParams link{"link", 1e-6, 1e10};
  const auto topology = make_topology("switch", 4, link, link);
  const Algorithm& ring = *find_algorithm(Collective::allreduce, "ring");
  const CollectiveSpec call{Collective::allreduce, 4, 0, size_t{1} << 22, 4, 0};
  SimOptions o;
  o.elem_size = 4;
  const double plain = simulate(build_all(ring, call), *topology, o).time;
  const double det = simulate_deterministic(ring, call, DataType::float32, *topology, o);
  // Twice the bytes, and the scale pass: a quarter of them in a ring.
  EXPECT_GT(det, 2.1 * plain);
  EXPECT_LT(det, 2.4 * plain);
}

TEST(DeterministicProof, AnIntegerPassThatDropsAContributionIsRefused) {
  const CollectiveSpec call{Collective::allreduce, 4, 0, 1031, 4, 0};
  const DeterministicPlan plan =
      deterministic_plan(call, DataType::float32, DeterministicRoad::whole, "ring");
  const CollectiveSpec integers = part(plan, DeterministicRole::integers).spec;
  std::vector<Program> programs =
      build_all(*find_algorithm(Collective::allreduce, "ring"), integers);
  // Rank 1 keeps what arrives instead of adding its own integers to it.
  for (Op& op : programs[1].ops)
    if (op.kind == OpKind::recv_reduce) {
      op.kind = OpKind::recv;
      break;
    }
  const VerifyResult r = verify_programs(integers, programs, "ring");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, VerifyErrorKind::wrong_result) << r.error->message;
}

}  // namespace
}  // namespace chorus
