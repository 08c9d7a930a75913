// chorus-perf's library part: the sweep and its report, the exact checker,
// the bus bandwidth factors and the iteration count of --min-time.
#include "perf/perf.h"
#include "core/reduce_kernels.h"
#include "model/cost_model.h"
#include "perf/perf_check.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace chorus::perf {
namespace {

using std::chrono::milliseconds;

// A sweep of `c` from min_bytes to max_bytes with one timed call per row.
PerfOptions options(std::vector<Collective> c, size_t min_bytes, size_t max_bytes) {
  PerfOptions o;
  o.collectives = std::move(c);
  o.min_bytes = min_bytes;
  o.max_bytes = max_bytes;
  o.iters = 1;
  o.warmup = 0;
  return o;
}

// The closed forms of the expected output against a serial fold of every
// rank's input with the reduction kernels, rank 0 first: at rank counts
// around each modulus and period, in every type and op.
TEST(PerfCheck, ExpectedOutputIsTheSerialReductionOfTheInputs) {
  for (int n : {1, 2, 3, 5, 8, 16, 17, 33, 60, 61, 62, 100, 130, 1024})
    for (int t = 0; t < kDataTypeCount; ++t)
      for (int o = 0; o < kReduceOpCount; ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        if (!applies(op, type)) continue;  // band, bor, bxor: integers only
        const size_t count = 131;          // two cycles of the largest modulus and more
        const size_t es = dtype_size(type);
        std::vector<std::byte> acc(count * es), in(count * es);
        for (int r = 0; r < n; ++r) {
          fill_input({Collective::allreduce, type, op, n, r, count, 0},
                     r == 0 ? acc.data() : in.data());
          if (r > 0) reduce_into(type, op, acc.data(), acc.data(), in.data(), count);
        }
        if (op == ReduceOp::avg) divide_by(type, acc.data(), count, static_cast<size_t>(n));
        const CheckCase c{Collective::allreduce, type, op, n, 0, count, 0};
        EXPECT_EQ(expected_output(c), acc)
            << "N=" << n << " " << to_string(type) << " " << to_string(op);
        EXPECT_EQ(count_wrong(c, acc.data()), 0u);
      }
}

// Each rank's block of reduce_scatter and alltoall, and only the root's
// output of reduce.
TEST(PerfCheck, ExpectedOutputPlacesEveryRanksBlock) {
  constexpr int n = 4;
  constexpr size_t count = 5;
  const CheckCase all{Collective::allreduce, DataType::int32, ReduceOp::sum, n, 0, count * n, 0};
  const std::vector<std::byte> whole = expected_output(all);
  for (int r = 0; r < n; ++r) {
    const CheckCase rs{Collective::reduce_scatter, DataType::int32, ReduceOp::sum, n, r, count, 0};
    const auto block = whole.begin() + static_cast<long>(r * count * sizeof(int32_t));
    EXPECT_EQ(expected_output(rs), std::vector<std::byte>(block, block + count * sizeof(int32_t)));
    // alltoall: block j of rank r's output is block r of rank j's input.
    const CheckCase a2a{Collective::alltoall, DataType::int32, ReduceOp::sum, n, r, count, 0};
    const std::vector<std::byte> got = expected_output(a2a);
    for (int j = 0; j < n; ++j) {
      std::vector<std::byte> input(count * n * sizeof(int32_t));
      fill_input({Collective::alltoall, DataType::int32, ReduceOp::sum, n, j, count, 0},
                 input.data());
      const auto from = input.begin() + static_cast<long>(r * count * sizeof(int32_t));
      EXPECT_TRUE(std::equal(from, from + count * sizeof(int32_t),
                             got.begin() + static_cast<long>(j * count * sizeof(int32_t))));
    }
    const CheckCase red{Collective::reduce, DataType::int32, ReduceOp::sum, n, r, count, 2};
    EXPECT_EQ(expected_output(red).size(), r == 2 ? count * sizeof(int32_t) : 0u);
  }
}

// Runs a sweep on in-process ranks and returns rank 0's report.
PerfReport sweep(int nranks, const PerfOptions& o) {
  PerfReport report;
  testing::run_ranks(nranks, [&](Communicator& comm) {
    PerfReport r = run_perf(comm, o);
    if (comm.rank() == 0) report = std::move(r);
  });
  return report;
}

TEST(PerfFormulas, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::allreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::allgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::alltoall, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::broadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::reduce, 4), 1.0);
}

// --min-time: enough calls of the probed length to last min_time, between -n
// and 10^6; without it, exactly -n.
TEST(PerfIterations, MinTimeRaisesTheCountOfShortCallsOnly) {
  EXPECT_EQ(iterations_for(milliseconds(0), 1e-6, 7), 7);
  EXPECT_EQ(iterations_for(milliseconds(0), 10.0, 7), 7);
  EXPECT_EQ(iterations_for(milliseconds(50), std::ldexp(1.0, -20), 1), 52429);  // 52428.8
  EXPECT_EQ(iterations_for(milliseconds(5), 2e-3, 1), 3);    // 2.5 calls, rounded up
  EXPECT_EQ(iterations_for(milliseconds(5), 2e-3, 20), 20);  // never below -n
  EXPECT_EQ(iterations_for(milliseconds(5), 1.0, 1), 1);
  EXPECT_EQ(iterations_for(milliseconds(5), 1e-12, 1), 1000000);  // capped
  EXPECT_EQ(iterations_for(milliseconds(5), 0.0, 1), 1000000);
}

TEST(PerfRun, RowsTimeExactlyTheIterationsOfDashN) {
  PerfOptions o = options({Collective::allreduce}, 8, 64);
  o.iters = 3;
  o.check = false;
  const PerfReport rep = sweep(2, o);
  ASSERT_EQ(rep.rows.size(), 4u);
  for (const PerfRow& r : rep.rows) {
    EXPECT_EQ(r.out_of_place.iters, 3);
    EXPECT_EQ(r.in_place.iters, 3);
  }
}

TEST(PerfCheck, CountsEveryWrongElementOfEveryType) {
  for (int t = 0; t < kDataTypeCount; ++t) {
    const auto type = static_cast<DataType>(t);
    // At N = 1, allgather's output is the rank's own input.
    CheckCase c{Collective::allgather, type, ReduceOp::sum, 1, 0, 100, 0};
    const size_t es = dtype_size(type);
    std::vector<std::byte> buf(100 * es);
    fill_input(c, buf.data());
    EXPECT_EQ(count_wrong(c, buf.data()), 0u) << to_string(type);
    buf[37 * es] = ~buf[37 * es];
    EXPECT_EQ(count_wrong(c, buf.data()), 1u) << to_string(type);
    poison(type, buf.data(), 100);
    EXPECT_EQ(count_wrong(c, buf.data()), 100u) << to_string(type);
  }
}

TEST(PerfRun, EveryCollectiveDtypeAndOpChecksClean) {
  PerfOptions o = options({Collective::allreduce, Collective::allgather, Collective::reduce_scatter,
                           Collective::broadcast, Collective::reduce, Collective::alltoall},
                          1, 300);
  o.step_factor = 17;
  o.types.clear();
  for (int t = 0; t < kDataTypeCount; ++t) o.types.push_back(static_cast<DataType>(t));
  o.ops.clear();
  for (int x = 0; x < kReduceOpCount; ++x) o.ops.push_back(static_cast<ReduceOp>(x));
  o.root = 2;
  o.algorithms = {"all"};
  const PerfReport rep = sweep(3, o);
  EXPECT_EQ(rep.wrong, 0u);
  size_t checked = 0;
  for (const PerfRow& r : rep.rows) {
    EXPECT_TRUE(r.out_of_place.measured);
    EXPECT_EQ(r.in_place.measured, r.collective != Collective::alltoall);
    checked += r.out_of_place.measured + r.in_place.measured;
    // The size is the model's M of a whole number of API elements, and the
    // bound the cost model's at the measured link.
    const double unit = model_bytes(r.collective, 3, 1, dtype_size(r.type));
    EXPECT_EQ(r.bytes % static_cast<size_t>(unit), 0u) << r.bytes;
    const CostParams link{rep.link.alpha, rep.link.beta};
    EXPECT_DOUBLE_EQ(
        r.bound_us,
        lower_bound(r.collective, 3, static_cast<double>(r.bytes), link).combined() * 1e6);
  }
  EXPECT_GT(checked, 100u);
}

// --deterministic: every reducing row runs deterministic calls, which check
// clean (the harness's data sum exactly); an automatic row names its road
// and every row has the model's time of the deterministic call.
TEST(PerfRun, DeterministicRowsCheckCleanAndNameTheirRoad) {
  PerfOptions o =
      options({Collective::allreduce, Collective::reduce_scatter, Collective::reduce}, 8, 1 << 20);
  o.step_factor = 64;
  o.types = {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64};
  o.ops = {ReduceOp::sum, ReduceOp::avg};
  o.deterministic = true;
  o.algorithms = {"auto", "ring"};
  const PerfReport rep = sweep(3, o);
  EXPECT_EQ(rep.wrong, 0u);
  std::set<std::string> roads;
  for (const PerfRow& r : rep.rows) {
    EXPECT_TRUE(r.out_of_place.measured);
    EXPECT_TRUE(std::isfinite(r.predicted_us)) << r.algorithm;
    if (r.collective == Collective::allreduce) roads.insert(r.algorithm);
  }
  // Small AllReduce rows gather, the 1 MiB row takes the scatter road, and
  // the named rows the integer pass of their algorithm.
  EXPECT_TRUE(roads.count("gather")) << rep.rows.size();
  EXPECT_TRUE(roads.count("scatter")) << rep.rows.size();
  EXPECT_TRUE(roads.count("ring")) << rep.rows.size();
}

TEST(PerfRun, UnknownAlgorithmAndBadRootAreRejected) {
  PerfOptions o = options({Collective::allreduce}, 8, 64);
  o.algorithms = {"nosuch"};
  EXPECT_THROW(sweep(2, o), Error);
  PerfOptions r = options({Collective::broadcast}, 8, 64);
  r.root = 5;
  EXPECT_THROW(sweep(2, r), Error);
}

}  // namespace
}  // namespace chorus::perf
