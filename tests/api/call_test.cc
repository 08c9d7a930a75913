// The call API: chorus::Call, Communicator::submit and the _async form of
// every collective and of send/recv. Every form is one Call submitted, so the
// checks here are that each form builds the Call its blocking form does, that
// calls left outstanding complete correctly in issue order, and that a Call
// with values outside its enums is refused before any byte moves.
#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <vector>

namespace chorus {
namespace {

using testing::run_ranks;

constexpr int kRanks = 3;
constexpr size_t kCount = 5;

// A value no other (rank, index) pair has, so a misplaced block shows.
int32_t value(int rank, size_t i) {
  return rank * 1000 + static_cast<int32_t>(i);
}

TEST(Call, EveryAsyncFormCompletesWhileTheOthersAreOutstanding) {
  run_ranks(kRanks, [](Communicator& comm) {
    const int r = comm.rank();
    const auto n = static_cast<size_t>(kRanks);
    std::vector<int32_t> in(kCount * n);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
    std::vector<int32_t> sum(kCount), gathered(kCount * n), scattered(kCount), bcast(kCount),
        reduced(kCount, -1), swapped(kCount * n), message(kCount, -1);
    const int next = (r + 1) % kRanks;
    const int prev = (r + kRanks - 1) % kRanks;
    // Every call issued before the first wait.
    std::vector<Work> works;
    works.push_back(
        comm.allreduce_async(in.data(), sum.data(), kCount, DataType::int32, ReduceOp::sum));
    works.push_back(comm.allgather_async(in.data(), gathered.data(), kCount, DataType::int32));
    works.push_back(comm.reduce_scatter_async(in.data(), scattered.data(), kCount, DataType::int32,
                                              ReduceOp::max));
    works.push_back(comm.broadcast_async(in.data(), bcast.data(), kCount, DataType::int32, 2));
    works.push_back(
        comm.reduce_async(in.data(), reduced.data(), kCount, DataType::int32, ReduceOp::min, 1));
    works.push_back(comm.alltoall_async(in.data(), swapped.data(), kCount, DataType::int32));
    works.push_back(comm.barrier_async());
    works.push_back(comm.recv_async(message.data(), kCount, DataType::int32, prev));
    works.push_back(comm.send_async(in.data(), kCount, DataType::int32, next));
    for (Work& w : works) w.wait();

    for (size_t i = 0; i < kCount; ++i) {
      int32_t s = 0, mx = INT32_MIN, mn = INT32_MAX;
      for (int j = 0; j < kRanks; ++j) {
        s += value(j, i);
        mx = std::max(mx, value(j, static_cast<size_t>(r) * kCount + i));
        mn = std::min(mn, value(j, i));
      }
      EXPECT_EQ(sum[i], s) << i;
      EXPECT_EQ(scattered[i], mx) << i;
      EXPECT_EQ(bcast[i], value(2, i)) << i;
      EXPECT_EQ(reduced[i], r == 1 ? mn : -1) << i;  // recv is the root's only
      EXPECT_EQ(message[i], value(prev, i)) << i;
      for (int j = 0; j < kRanks; ++j) {
        const size_t at = static_cast<size_t>(j) * kCount + i;
        EXPECT_EQ(gathered[at], value(j, i)) << at;
        EXPECT_EQ(swapped[at], value(j, static_cast<size_t>(r) * kCount + i)) << at;
      }
    }
  });
}

TEST(Call, SubmitRunsTheCallItIsGiven) {
  run_ranks(kRanks, [](Communicator& comm) {
    std::vector<double> v(kCount, comm.rank() + 1.0);
    Call call = Call::allreduce(v.data(), v.data(), v.size(), DataType::float64, ReduceOp::prod);
    call.options.algorithm = "ring";
    EXPECT_EQ(call.kind, Call::Kind::collective);
    EXPECT_EQ(call.collective, Collective::allreduce);
    comm.submit(call).wait();
    for (double x : v) EXPECT_EQ(x, 6.0);  // 1 * 2 * 3
    // A Call is plain data: the same call again, built field by field.
    Call again;
    again.collective = Collective::allreduce;
    again.send = again.recv = v.data();
    again.count = v.size();
    again.type = DataType::float64;
    again.op = ReduceOp::sum;
    comm.submit(again).wait();
    for (double x : v) EXPECT_EQ(x, 18.0);
  });
}

TEST(Call, NamesFollowTheCall) {
  EXPECT_EQ(Call::allreduce(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum).name(),
            "allreduce");
  EXPECT_EQ(Call::reduce_scatter(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum).name(),
            "reduce_scatter");
  EXPECT_EQ(Call::barrier().name(), "barrier");
  EXPECT_EQ(Call::send_to(nullptr, 0, DataType::int8, 1).name(), "send");
  EXPECT_EQ(Call::recv_from(nullptr, 0, DataType::int8, 1).name(), "recv");
  const Call b = Call::broadcast(nullptr, nullptr, 4, DataType::int64, 2);
  EXPECT_EQ(b.root, 2);
  EXPECT_EQ(b.count, 4u);
  EXPECT_EQ(b.type, DataType::int64);
}

// A Call whose enums hold values outside them is refused on every rank with
// the value named, before any byte moves.
void expect_refused(Call call, const std::string& what) {
  std::atomic<int> refused{0};
  run_ranks(kRanks, [&](Communicator& comm) {
    std::vector<int32_t> in(kCount * kRanks, 7), out(kCount * kRanks, -1);
    Call mine = call;
    mine.send = in.data();
    mine.recv = out.data();
    try {
      comm.submit(mine).wait();
      ADD_FAILURE() << "rank " << comm.rank() << " accepted a Call with " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      for (int32_t x : out) EXPECT_EQ(x, -1);
      ++refused;
    }
  });
  EXPECT_EQ(refused.load(), kRanks);
}

TEST(Call, ValuesOutsideTheEnumsAreRefused) {
  Call call = Call::allreduce(nullptr, nullptr, kCount, DataType::int32, ReduceOp::sum);
  call.collective = static_cast<Collective>(kCollectiveCount);
  expect_refused(call, "invalid Collective value " + std::to_string(kCollectiveCount));
  call = Call::allreduce(nullptr, nullptr, kCount, DataType::int32, ReduceOp::sum);
  call.kind = static_cast<Call::Kind>(9);
  expect_refused(call, "invalid Call::Kind value 9");
}

TEST(Call, APointToPointCallNamesItsPeer) {
  Call call = Call::send_to(nullptr, kCount, DataType::int32, kRanks);
  expect_refused(call, "peer outside [0, 3)");
}

}  // namespace
}  // namespace chorus
