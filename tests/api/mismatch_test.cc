// Mismatched calls over the in-process transport (threads): every kind of
// tests/support/mismatch.h at N = 2 and 4. The same scenarios run over shm
// and tcp processes in mp_check (tests/multiprocess).
#include "support/mismatch.h"

#include <chorus/testing.h>

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <tuple>

namespace chorus::testing {
namespace {

class Mismatch : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(Mismatch, EveryRankRaisesMismatchAndNoneReturnsWrongData) {
  const auto& [kind, n] = GetParam();
  std::mutex mu;
  std::string problems;
  run_ranks(n, [&](Communicator& comm) {
    const std::string p = run_mismatch_case(comm, kind).problems;
    if (p.empty()) return;
    std::lock_guard lock(mu);
    problems += "rank " + std::to_string(comm.rank()) + ": " + p;
  });
  EXPECT_EQ(problems, "");
}

INSTANTIATE_TEST_SUITE_P(Kinds, Mismatch,
                         ::testing::Combine(::testing::ValuesIn(mismatch_kinds()),
                                            ::testing::Values(2, 4)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) + "_N" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace chorus::testing
