// CHORUS_TRACE: every rank writes a Chrome trace with one event per op of
// each call's Program, with the documented fields.
#include "algorithms/algorithm.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace chorus {
namespace {

using testing::run_ranks;

class TraceDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("chorus-trace-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    setenv("CHORUS_TRACE", dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("CHORUS_TRACE");
    std::filesystem::remove_all(dir_);
  }
  // The trace of rank `rank`'s `nth` communicator made in this test (K
  // counts on across the tests of one process, so the n-th smallest K).
  nlohmann::json load(int rank, size_t nth) const {
    const std::string prefix = "chorus-trace-rank" + std::to_string(rank) + "-comm";
    std::map<int, std::filesystem::path> by_k;
    for (const auto& f : std::filesystem::directory_iterator(dir_)) {
      const std::string name = f.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && name.ends_with(".json"))
        by_k[std::stoi(name.substr(prefix.size()))] = f.path();
    }
    if (by_k.size() <= nth) {
      ADD_FAILURE() << "rank " << rank << " wrote " << by_k.size() << " trace files, not "
                    << nth + 1;
      return nlohmann::json::object({{"traceEvents", nlohmann::json::array()}});
    }
    std::ifstream in(std::next(by_k.begin(), static_cast<std::ptrdiff_t>(nth))->second);
    return nlohmann::json::parse(in);
  }
  std::filesystem::path dir_;
};

// The X events of one call (by its number) on one rank's trace.
std::vector<nlohmann::json> call_events(const nlohmann::json& trace, int call) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("args").at("call") == call) out.push_back(e);
  return out;
}

TEST_F(TraceDir, EveryRankWritesOneEventPerOpOfEachCall) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1000;
  const std::vector<std::string> algorithms = {"ring", "recursive_doubling", "double_binary_tree"};
  run_ranks(kRanks, [&](Communicator& comm) {
    std::vector<float> x(kCount, 1.0f);
    for (const auto& name : algorithms) {
      CallOptions o;
      o.algorithm = name;
      comm.allreduce(x.data(), x.data(), kCount, DataType::float32, ReduceOp::sum, o);
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    const nlohmann::json trace = load(r, 0);
    EXPECT_EQ(trace.at("otherData").at("rank"), r);
    EXPECT_EQ(trace.at("otherData").at("size"), kRanks);
    EXPECT_EQ(trace.at("otherData").at("dropped"), 0);
    // Rows are named: the process after the rank, one row per peer and
    // direction, and the local one.
    std::set<int> named_rows;
    for (const auto& e : trace.at("traceEvents")) {
      if (e.at("ph") != "M") continue;
      EXPECT_EQ(e.at("pid"), r);
      if (e.at("name") == "thread_name") named_rows.insert(e.at("tid").get<int>());
    }
    EXPECT_EQ(named_rows.size(), static_cast<size_t>(2 * (kRanks - 1) + 1));
    for (size_t i = 0; i < algorithms.size(); ++i) {
      const int call = static_cast<int>(i) + 1;  // the communicator's collective calls
      const Algorithm* algo = find_algorithm(Collective::allreduce, algorithms[i]);
      ASSERT_NE(algo, nullptr);
      const CollectiveSpec spec{Collective::allreduce, kRanks, r, kCount, sizeof(float), 0};
      const Program program = build_program(*algo, spec);
      const auto events = call_events(trace, call);
      ASSERT_EQ(events.size(), program.ops.size())
          << "rank " << r << ", call " << call << " (" << algorithms[i] << ")";
      std::set<int> ops;
      for (const auto& e : events) {
        const auto& a = e.at("args");
        const int op = a.at("op").get<int>();
        ASSERT_GE(op, 0);
        ASSERT_LT(static_cast<size_t>(op), program.ops.size());
        ops.insert(op);
        const Op& want = program.ops[static_cast<size_t>(op)];
        EXPECT_EQ(e.at("name"), std::string(to_string(want.kind)));
        EXPECT_EQ(e.at("cat"), "allreduce");
        EXPECT_EQ(a.at("algorithm"), algorithms[i]);
        EXPECT_EQ(e.at("pid"), r);
        EXPECT_GE(e.at("dur").get<double>(), 0.0);
        EXPECT_TRUE(e.at("ts").is_number());
        const Region& region = want.kind == OpKind::send ? want.src : want.dst;
        EXPECT_EQ(a.at("bytes").get<size_t>(), region.count * sizeof(float));
        if (has_peer(want.kind)) {
          EXPECT_EQ(a.at("peer"), want.peer);
          EXPECT_EQ(e.at("tid"), 2 * want.peer + (want.kind == OpKind::send ? 0 : 1));
        } else {
          EXPECT_EQ(a.at("peer"), -1);
          EXPECT_EQ(e.at("tid"), 2 * kRanks);
        }
      }
      EXPECT_EQ(ops.size(), program.ops.size()) << "an op was recorded twice";
    }
  }
}

// A message's receive cannot end before its send started: the ranks'
// clocks are aligned (here they share one, so the alignment's error is its
// own; it stays under a millisecond).
TEST_F(TraceDir, ClocksAreAlignedAcrossRanks) {
  run_ranks(2, [](Communicator& comm) {
    int v = comm.rank();
    for (int i = 0; i < 20; ++i) {
      if (comm.rank() == 0) {
        comm.send(&v, 1, DataType::int32, 1);
      } else {
        comm.recv(&v, 1, DataType::int32, 0);
      }
    }
  });
  const nlohmann::json t0 = load(0, 0), t1 = load(1, 0);
  std::map<int, double> send_start;
  for (const auto& e : t0.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name") == "send")
      send_start[e.at("args").at("call")] = e.at("ts");
  int checked = 0;
  for (const auto& e : t1.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("name") != "recv") continue;
    const int call = e.at("args").at("call");
    ASSERT_TRUE(send_start.count(call)) << "message " << call;
    const double recv_end = e.at("ts").get<double>() + e.at("dur").get<double>();
    EXPECT_GT(recv_end, send_start[call] - 1000.0) << "message " << call;
    ++checked;
  }
  EXPECT_EQ(checked, 20);
}

TEST_F(TraceDir, EachCommunicatorOfARankHasItsOwnFile) {
  for (int k = 0; k < 2; ++k) run_ranks(2, [](Communicator& comm) { comm.barrier(); });
  for (int r = 0; r < 2; ++r)
    for (size_t k = 0; k < 2; ++k) EXPECT_FALSE(call_events(load(r, k), 1).empty());
}

}  // namespace
}  // namespace chorus
