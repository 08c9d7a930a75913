// Deterministic reductions through the API (CallOptions::deterministic), on
// ranks as threads: every AllReduce, ReduceScatter and Reduce algorithm at
// every N from 1 to 16 gives the bits of the contributions' deterministic
// sum (support/deterministic_check.h), with zeros on the added ranks and
// the contributions on permuted ranks; the errors and the fast paths.
#include "support/deterministic_check.h"

#include "algorithms/algorithm.h"
#include "core/check.h"
#include "core/exact_sum.h"
#include "engine/communicator_impl.h"

#include <chorus/chorus.h>
#include <chorus/testing.h>

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <vector>

namespace chorus::test {
namespace {

void expect_suite_on(const std::vector<int>& host_of, bool windows) {
  std::mutex mu;
  std::vector<std::string> wrong;
  testing::run_ranks(host_of, [&](Communicator& comm) {
    std::vector<std::string> w = check_deterministic_suite(comm, windows);
    std::lock_guard lock(mu);
    wrong.insert(wrong.end(), w.begin(), w.end());
  });
  for (size_t i = 0; i < std::min<size_t>(wrong.size(), 20); ++i) ADD_FAILURE() << wrong[i];
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " mismatches";
}

void expect_suite(int n, bool windows) {
  expect_suite_on(std::vector<int>(static_cast<size_t>(n), 0), windows);
}

class DeterministicRanks : public ::testing::TestWithParam<int> {};

TEST_P(DeterministicRanks, EveryAlgorithmGivesTheSameBits) {
  expect_suite(GetParam(), false);
}

#ifdef CHORUS_REDUCED_GRIDS
constexpr int kSuiteRanks[] = {1, 2, 3, 4, 5};
#else
constexpr int kSuiteRanks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
#endif
INSTANTIATE_TEST_SUITE_P(N, DeterministicRanks, ::testing::ValuesIn(kSuiteRanks));

TEST(Deterministic, WindowBuffersGiveTheSameBits) {
  expect_suite(2, true);
  expect_suite(4, true);
}

// Two hosts of two ranks and of three: the hierarchical algorithms carry the
// integer pass too.
TEST(Deterministic, AcrossHostsGiveTheSameBits) {
  expect_suite_on({0, 0, 1, 1}, false);
  expect_suite_on({0, 0, 0, 1, 1, 1}, false);
}

// Every reducing row of the registry carries an integer pass in the suites
// above: on one of their layouts (one host of each N they run, two hosts) at
// one of their counts it serves the int64 call (as check_deterministic picks
// its algorithms). A row they do not reach fails here, naming it.
TEST(DeterministicCoverage, EveryReducingRowIsReached) {
  std::vector<std::vector<int>> layouts{{0, 0, 1, 1}, {0, 0, 0, 1, 1, 1}};
  for (int n : kSuiteRanks) layouts.emplace_back(static_cast<size_t>(n), 0);
  std::string missing;
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce})
    for (const Algorithm* a : algorithms_for(c)) {
      bool reached = false;
      for (const auto& layout : layouts) {
        const int n = static_cast<int>(layout.size());
        for (size_t count : {size_t{1}, static_cast<size_t>(n) + 1, size_t{10007}}) {
          CollectiveSpec spec{c, n, 0, count, 8, n - 1};
          spec.windows = true;  // threads share memory
          spec.host_of = std::make_shared<const std::vector<int>>(layout);
          reached = reached || static_cast<bool>(supported_everywhere(*a, spec));
        }
      }
      if (!reached) missing += str_cat(to_string(c), "/", a->name, "\n");
    }
  EXPECT_EQ(missing, "") << "registry rows no deterministic suite reaches";
}

TEST(Deterministic, OneGibibyteCallEqualsItsParts) {
  const int n = 2;
  const size_t count = size_t{1} << 27;
  std::atomic<int> wrong{0};
  testing::run_ranks(n, [&](Communicator& comm) {
    std::vector<std::byte> in = wide_values(DataType::float32, count, 5, comm.rank(), n);
    std::vector<float> out(count);
    CallOptions o;
    o.deterministic = true;
    comm.allreduce(in.data(), out.data(), count, DataType::float32, ReduceOp::sum, o);
    // The same elements in a call of their own block's size, far into the
    // call: the bits must not depend on the size of the call.
    for (size_t at : {size_t{0}, (size_t{1} << 22) - 64, (size_t{1} << 26) + 4096, count - 64}) {
      std::vector<float> part(64);
      comm.allreduce(in.data() + at * 4, part.data(), 64, DataType::float32, ReduceOp::sum, o);
      if (std::memcmp(part.data(), out.data() + at, 64 * 4) != 0) ++wrong;
    }
    if (comm.rank() == 0) {
      // And against the sum computed without communication, on a sample.
      std::vector<std::byte> other = wide_values(DataType::float32, count, 5, 1, n);
      for (size_t at = 0; at < count; at += 1'000'003) {
        const size_t m = std::min<size_t>(64, count - at);
        const size_t b = at / 64 * 64;
        std::vector<std::byte> both(2 * 64 * 4);
        std::memcpy(both.data(), in.data() + b * 4, 64 * 4);
        std::memcpy(both.data() + 64 * 4, other.data() + b * 4, 64 * 4);
        float want[64];
        exact::sum_gathered(DataType::float32, both.data(), 64, 2, 1, want);
        if (std::memcmp(want, out.data() + b, m * 4) != 0) ++wrong;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

// The case: three contributors, an AllReduce of the first 7
// elements and one of 2^20 (its neighbours spread over +-120 binades, some
// the largest finite values): element i is the same in both, on every road
// (gather for 7 elements, scatter for 2^20, the whole road with ring and
// recursive doubling), and within 22 binades the exact sum rounded once.
TEST(Deterministic, ASevenElementCallIsThePrefixOfAMillionElementOne) {
  const size_t count = size_t{1} << 20;
  std::atomic<int> wrong{0};
  testing::run_ranks(3, [&](Communicator& comm) {
    std::vector<float> in(count);
    std::mt19937 rng(static_cast<unsigned>(40 + comm.rank()));
    for (size_t i = 0; i < count; ++i) {
      const int e = i < 7 ? static_cast<int>(rng() % 8) : static_cast<int>(rng() % 241) - 120;
      in[i] = std::ldexp(1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f, e) *
              (rng() % 2 ? -1.0f : 1.0f);
      if (i >= 7 && rng() % 50 == 0) in[i] = FLT_MAX / 4;
    }
    for (const std::string algo : {"", "ring", "recursive_doubling"}) {
      CallOptions o;
      o.deterministic = true;
      o.algorithm = algo;
      std::vector<float> big(count);
      comm.allreduce(in.data(), big.data(), count, DataType::float32, ReduceOp::sum, o);
      float small[7];
      comm.allreduce(in.data(), small, 7, DataType::float32, ReduceOp::sum, o);
      if (std::memcmp(small, big.data(), sizeof small) != 0) ++wrong;
      // Exact: contributions within 8 binades sum exactly in a double.
      std::vector<float> all(3 * 7);
      comm.allgather(in.data(), all.data(), 7, DataType::float32);
      for (size_t i = 0; i < 7; ++i) {
        const double exact = static_cast<double>(all[i]) + all[7 + i] + all[14 + i];
        if (small[i] != static_cast<float>(exact)) ++wrong;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

// The runtime runs the description (algorithms/deterministic.h): every road
// of every reducing collective, on calls that take it, makes exactly the
// calls its plan lists, with the algorithms the plan names, and together
// the calls reach every road there is.
TEST(Deterministic, EveryRoadRunsAsItsPlanDescribesIt) {
  std::mutex mu;
  std::set<int> roads;
  std::atomic<int> wrong{0};
  testing::run_ranks(3, [&](Communicator& comm) {
    auto& impl = detail::impl_of(comm);
    for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce})
      for (const char* algo : {"", c == Collective::reduce ? "binomial" : "ring"})
        for (size_t count : {size_t{5}, size_t{20000}}) {
          const size_t total = c == Collective::reduce_scatter ? 3 * count : count;
          std::vector<float> in(total, 1.5f);
          if (count == 5) in[1] = std::numeric_limits<float>::infinity();  // the specials pass
          std::vector<float> out(count);
          CallOptions o;
          o.deterministic = true;
          o.algorithm = algo;
          Call call{Call::Kind::collective, c, in.data(), out.data(), count, DataType::float32,
                    ReduceOp::sum,          0, -1,        o};
          const DeterministicPlan plan = impl.deterministic_plan(call);
          if (c == Collective::allreduce)
            comm.allreduce(in.data(), out.data(), count, DataType::float32, ReduceOp::sum, o);
          else if (c == Collective::reduce_scatter)
            comm.reduce_scatter(in.data(), out.data(), count, DataType::float32, ReduceOp::sum, o);
          else
            comm.reduce(in.data(), out.data(), count, DataType::float32, ReduceOp::sum, 0, o);
          const auto& ran = impl.deterministic_ran();
          size_t at = 0;
          for (const DeterministicPart& p : plan.parts) {
            if (at == ran.size()) break;
            const auto& r = ran[at];
            const bool same = r.collective == p.spec.collective && r.count == p.spec.count &&
                              r.type == p.type && r.op == p.op && r.algorithm == p.algorithm;
            if (same) {
              ++at;
            } else if (!p.only_with_specials) {
              ++wrong;
              ADD_FAILURE() << to_string(c) << " '" << algo << "' count " << count << ": "
                            << to_string(p.role) << " part planned as "
                            << to_string(p.spec.collective) << "/" << p.algorithm << " x"
                            << p.spec.count << ", ran " << to_string(r.collective) << "/"
                            << r.algorithm << " x" << r.count;
            }
          }
          if (at != ran.size()) {
            ++wrong;
            ADD_FAILURE() << to_string(c) << " ran " << ran.size() << " calls, planned "
                          << plan.parts.size();
          }
          std::lock_guard lock(mu);
          roads.insert(static_cast<int>(plan.road));
        }
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(roads.size(), static_cast<size_t>(kDeterministicRoadCount));
}

TEST(Deterministic, InfinitiesNaNsAndOverflowAsIeeeSummation) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Per element, what ranks 0, 1 and 2 hold. (Element 4 is exact: its own
  // contributions lie within 11 binades, whatever its neighbours hold.)
  const float in[3][6] = {{inf, inf, nan, FLT_MAX, 0x1p120f, -FLT_MAX},
                          {1, -inf, 1, FLT_MAX, 0x1p121f, -FLT_MAX},
                          {2, 0, 2, 0, 0x1p110f, 0}};
  for (const std::string algo : {"", "ring", "recursive_doubling"}) {
    testing::run_ranks(3, [&](Communicator& comm) {
      float out[6];
      CallOptions o;
      o.deterministic = true;
      o.algorithm = algo;
      comm.allreduce(in[comm.rank()], out, 6, DataType::float32, ReduceOp::sum, o);
      EXPECT_EQ(out[0], inf) << algo;
      EXPECT_TRUE(std::isnan(out[1])) << algo;  // inf + -inf
      EXPECT_TRUE(std::isnan(out[2])) << algo;
      EXPECT_EQ(out[3], inf) << algo;                             // 2 * FLT_MAX overflows
      EXPECT_EQ(out[4], 0x1p120f + 0x1p121f + 0x1p110f) << algo;  // exact
      EXPECT_EQ(out[5], -inf) << algo;
    });
  }
}

TEST(Deterministic, FloatProdIsRefusedAndOtherOpsKeepTheirPath) {
  testing::run_ranks(2, [&](Communicator& comm) {
    CallOptions o;
    o.deterministic = true;
    float x[4] = {1, 2, 3, 4};
    float y[4];
    try {
      comm.allreduce(x, y, 4, DataType::float32, ReduceOp::prod, o);
      ADD_FAILURE() << "prod on float32 was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("prod"), std::string::npos) << e.what();
    }
    // max on floats and sums of integers are order independent: the ordinary call.
    comm.allreduce(x, y, 4, DataType::float32, ReduceOp::max, o);
    EXPECT_EQ(y[3], 4.0f);
    int32_t a[3] = {comm.rank(), 7, -1};
    int32_t b[3];
    comm.allreduce(a, b, 3, DataType::int32, ReduceOp::sum, o);
    EXPECT_EQ(b[0], 1);
    EXPECT_EQ(b[1], 14);
    EXPECT_EQ(b[2], -2);
  });
}

// min and max keep the ordinary call, and give the same bits with every
// algorithm also where NaNs and zeros of both signs meet.
TEST(Deterministic, FloatMinMaxAreTheSameWithEveryAlgorithm) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float in[3][5] = {{0.0f, -0.0f, nan, 1.0f, -0.0f},
                          {-0.0f, 0.0f, 2.0f, nan, -0.0f},
                          {0.0f, 0.0f, 3.0f, 4.0f, -0.0f}};
  for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
    std::vector<std::vector<uint32_t>> results;
    std::mutex mu;
    for (const char* algo : {"ring", "bidir_ring", "halving_doubling", "recursive_doubling",
                             "double_binary_tree", "reduce_broadcast"}) {
      testing::run_ranks(3, [&](Communicator& comm) {
        float out[5];
        CallOptions o;
        o.deterministic = true;
        o.algorithm = algo;
        comm.allreduce(in[comm.rank()], out, 5, DataType::float32, op, o);
        std::vector<uint32_t> bits(5);
        std::memcpy(bits.data(), out, sizeof out);
        std::lock_guard lock(mu);
        results.push_back(bits);
      });
    }
    for (const auto& r : results) EXPECT_EQ(r, results.front()) << to_string(op);
    // -0 < +0; a NaN wins.
    EXPECT_EQ(results.front()[0], op == ReduceOp::min ? 0x80000000u : 0u);
    EXPECT_TRUE(std::isnan(std::bit_cast<float>(results.front()[2])));
    EXPECT_TRUE(std::isnan(std::bit_cast<float>(results.front()[3])));
    EXPECT_EQ(results.front()[4], 0x80000000u);
  }
}

TEST(Deterministic, RanksThatDisagreeRaiseMismatch) {
  std::atomic<int> mismatches{0};
  testing::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> x(1000, 1.0f);
    std::vector<float> y(1000);
    CallOptions o;
    o.deterministic = comm.rank() == 0;
    o.timeout = std::chrono::milliseconds(5000);
    try {
      comm.allreduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum, o);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::mismatch) ++mismatches;
    }
  });
  EXPECT_GE(mismatches.load(), 1);
}

TEST(Deterministic, AvgIsTheExactSumDividedOnce) {
  testing::run_ranks(3, [&](Communicator& comm) {
    // 1 + 1 + 2^-30 over 3 ranks: (2 + 2^-30) / 3 rounded once.
    const float v[3] = {1.0f, 1.0f, 0x1p-30f};
    float out = 0;
    CallOptions o;
    o.deterministic = true;
    comm.allreduce(&v[comm.rank()], &out, 1, DataType::float32, ReduceOp::avg, o);
    const double exact = (2.0 + std::ldexp(1.0, -30)) / 3.0;  // within 2^-53 relative
    EXPECT_EQ(out, static_cast<float>(exact));
  });
}

}  // namespace
}  // namespace chorus::test
