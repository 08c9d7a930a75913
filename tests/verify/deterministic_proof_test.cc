// The deterministic calls' schedule independence, proved symbolically
// (analysis/verify_algorithm.h: verify_deterministic) for every AllReduce,
// ReduceScatter and Reduce algorithm that serves the integer pass, at
// N = 1 .. 9, 13 and 16, and for the scatter road with every AllToAll
// algorithm; and a broken integer pass is caught.
#include "analysis/verify_algorithm.h"

#include "algorithms/deterministic.h"
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

TEST(DeterministicProof, PartsCarryTheWiderElementsAndTheScales) {
  const CollectiveSpec call{Collective::allreduce, 4, 0, 1000, 4, 0};
  const DeterministicParts f32 = deterministic_parts(call, DataType::float32);
  EXPECT_EQ(f32.integers.elem_size, 8u);
  EXPECT_EQ(f32.integers.count, 1000u);
  EXPECT_EQ(f32.scales.count, exact::block_count(1000) + 1);
  EXPECT_EQ(f32.scales.elem_size, 4u);
  const DeterministicParts f64 =
      deterministic_parts({Collective::allreduce, 4, 0, 1000, 8, 0}, DataType::float64);
  EXPECT_EQ(f64.integers.count, 2000u);  // two lanes per element
  const DeterministicParts f16 =
      deterministic_parts({Collective::reduce_scatter, 4, 0, 10, 2, 0}, DataType::float16);
  EXPECT_EQ(f16.scales.count, 1u);  // float16 needs no scales: the flag only
  EXPECT_EQ(f16.integers.count, 10u);
}

TEST(DeterministicProof, SimulatedCostCountsTheExtraBytes) {
  // On an alpha-beta switch without local costs, a large call's deterministic
  // ring moves twice the bytes: about twice the time, plus the scale pass.
  const LinkParams link{"link", 1e-6, 1e10};
  const auto topology = make_topology("switch", 4, link, link);
  const Algorithm& ring = *find_algorithm(Collective::allreduce, "ring");
  const CollectiveSpec call{Collective::allreduce, 4, 0, size_t{1} << 22, 4, 0};
  SimOptions o;
  o.elem_size = 4;
  const double plain = simulate(build_all(ring, call), *topology, o).time;
  const double det = simulate_deterministic(ring, call, DataType::float32, *topology, o);
  EXPECT_GT(det, 1.9 * plain);
  EXPECT_LT(det, 2.2 * plain);
}

TEST(DeterministicProof, AnIntegerPassThatDropsAContributionIsRefused) {
  const CollectiveSpec call{Collective::allreduce, 4, 0, 1031, 4, 0};
  const DeterministicParts parts = deterministic_parts(call, DataType::float32);
  std::vector<Program> programs =
      build_all(*find_algorithm(Collective::allreduce, "ring"), parts.integers);
  // Rank 1 keeps what arrives instead of adding its own integers to it.
  for (Op& op : programs[1].ops)
    if (op.kind == OpKind::recv_reduce) {
      op.kind = OpKind::recv;
      break;
    }
  const VerifyResult r = verify_programs(parts.integers, programs, "ring");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, VerifyErrorKind::wrong_result) << r.error->message;
}

}  // namespace
}  // namespace chorus
