// The in-process transport on its own: the ranks of one InprocWorld, driven
// from the test's thread (isend and irecv never block, and whichever side of
// a match comes second moves the data at once), or from a thread per rank
// where a wait must block. FIFO order per ordered pair, zero-byte messages,
// reducing receives, mismatched sizes and stamps, aborts, ranks that have
// returned, interrupts, deadlines and stall reports.
#include "transport/inproc/inproc_transport.h"
#include "support/wait_all.h"

#include "support/latch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using namespace std::chrono_literals;

// The n transports of a fresh world.
struct World {
  explicit World(int n) : world(make_inproc_world(n)) {
    for (int r = 0; r < n; ++r) ranks.push_back(make_inproc_transport(world, r, 0us));
  }
  Transport& operator[](int r) { return *ranks[static_cast<size_t>(r)]; }
  std::shared_ptr<InprocWorld> world;
  std::vector<std::unique_ptr<Transport>> ranks;
};

using test::wait_all;

CallStamp call(uint32_t seq) {
  return collective_stamp(seq, Collective::allreduce, 1, DataType::int32, ReduceOp::sum, 4, 0);
}

TEST(InprocTransport, NamesItselfAndSharesMemory) {
  World w(2);
  EXPECT_EQ(w[0].kind(), TransportKind::inproc);
  EXPECT_EQ(w[0].name(), "inproc");
  EXPECT_TRUE(w[0].shares_memory());
  EXPECT_EQ(w[1].rank(), 1);
  EXPECT_EQ(w[1].size(), 2);
}

// Messages of varied sizes, zero bytes among them, posted sends-first for
// half of them and receives-first for the others: each lands in the receive
// of its own position.
TEST(InprocTransport, MessagesKeepFifoOrderPerPair) {
  World w(3);
  constexpr int kMsgs = 40;
  std::vector<std::vector<uint32_t>> out(kMsgs), in(kMsgs);
  std::vector<RequestId> sends, recvs;
  for (int m = 0; m < kMsgs; ++m) {
    const size_t count = m % 5 == 0 ? 0 : static_cast<size_t>(m) * 3;
    out[static_cast<size_t>(m)].assign(count, static_cast<uint32_t>(m));
    in[static_cast<size_t>(m)].assign(count, 0xFFFFFFFF);
  }
  auto send = [&](int m) {
    auto& b = out[static_cast<size_t>(m)];
    sends.push_back(w[0].isend(2, b.data(), b.size() * 4));
  };
  auto recv = [&](int m) {
    auto& b = in[static_cast<size_t>(m)];
    recvs.push_back(w[2].irecv(0, b.data(), b.size() * 4, nullptr));
  };
  for (int m = 0; m < kMsgs / 2; ++m) send(m);  // queued: no receive yet
  for (int m = 0; m < kMsgs; ++m) recv(m);      // the first half matches now
  for (int m = kMsgs / 2; m < kMsgs; ++m) send(m);
  // A message of another pair (1 -> 2) in between changes nothing.
  uint32_t other = 7, got_other = 0;
  const RequestId s1 = w[1].isend(2, &other, 4);
  const RequestId r1 = w[2].irecv(1, &got_other, 4, nullptr);
  recvs.push_back(r1);
  wait_all(w[0], sends);
  wait_all(w[1], {s1});
  wait_all(w[2], recvs);
  for (int m = 0; m < kMsgs; ++m)
    for (uint32_t x : in[static_cast<size_t>(m)]) ASSERT_EQ(x, static_cast<uint32_t>(m));
  EXPECT_EQ(got_other, 7u);
}

TEST(InprocTransport, ZeroByteMessagesCompleteBothSides) {
  World w(2);
  const RequestId r = w[1].irecv(0, nullptr, 0, nullptr);
  const RequestId s = w[0].isend(1, nullptr, 0);
  wait_all(w[0], {s});
  wait_all(w[1], {r});
  std::vector<RequestId> done;
  w[0].poll(done);
  w[1].poll(done);
  EXPECT_TRUE(done.empty()) << "a request completed twice";
}

// dst = local (+) incoming, with the receive posted before and after the
// send, in place (dst == local) and apart from local.
TEST(InprocTransport, ReducingReceiveCombinesAsItArrives) {
  World w(2);
  constexpr size_t kCount = 1001;
  std::vector<int32_t> incoming(kCount), local(kCount), apart(kCount, -1), in_place(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    incoming[i] = static_cast<int32_t>(i) - 500;
    local[i] = static_cast<int32_t>(3 * i);
  }
  in_place = local;
  const Reducer sum{DataType::int32, ReduceOp::sum, local.data()};
  const Reducer max_in_place{DataType::int32, ReduceOp::max, in_place.data()};
  const RequestId r1 = w[1].irecv(0, apart.data(), kCount * 4, &sum);  // receive first
  const RequestId s1 = w[0].isend(1, incoming.data(), kCount * 4);
  const RequestId s2 = w[0].isend(1, incoming.data(), kCount * 4);  // send first
  const RequestId r2 = w[1].irecv(0, in_place.data(), kCount * 4, &max_in_place);
  wait_all(w[0], {s1, s2});
  wait_all(w[1], {r1, r2});
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(apart[i], incoming[i] + local[i]) << i;
    ASSERT_EQ(in_place[i], std::max(incoming[i], local[i])) << i;
  }
}

TEST(InprocTransport, SizeMismatchFailsBothSidesAndNoByteLands) {
  World w(2);
  std::vector<uint8_t> out(100, 1), in(200, 0);
  w[0].isend(1, out.data(), out.size());
  w[1].irecv(0, in.data(), in.size(), nullptr);
  for (int rank : {0, 1}) {
    std::vector<RequestId> done;
    try {
      w[rank].wait_some(done, Clock::now() + 10s);
      ADD_FAILURE() << "rank " << rank << " completed a mismatched message";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::mismatch);
      EXPECT_NE(std::string(e.what()).find("100 B"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("200 B"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(std::all_of(in.begin(), in.end(), [](uint8_t b) { return b == 0; }));
}

TEST(InprocTransport, StampMismatchNamesBothCalls) {
  World w(2);
  int32_t out = 5, in = 0;
  w[0].isend(1, &out, 4, call(3));
  w[1].irecv(0, &in, 4, nullptr, call(4));
  std::vector<RequestId> done;
  try {
    w[1].wait_some(done, Clock::now() + 10s);
    FAIL() << "a message of call 3 completed a receive of call 4";
  } catch (const StampMismatch& m) {
    EXPECT_EQ(m.rank, 1);
    EXPECT_EQ(m.peer, 0);
    EXPECT_EQ(m.mine.seq, 4u);
    EXPECT_EQ(m.theirs.seq, 3u);
  }
  EXPECT_EQ(in, 0);
}

// A rank that returned fails the peers still waiting for it, at once.
TEST(InprocTransport, ARankThatReturnedIsAPeerFailure) {
  World w(2);
  int32_t in = 0;
  w[0].irecv(1, &in, 4, nullptr);
  w.ranks[1].reset();
  inproc_rank_exited(*w.world, 1);
  std::vector<RequestId> done;
  const auto start = Clock::now();
  try {
    w[0].wait_some(done, Clock::now() + 20s);
    FAIL() << "a receive from a rank that returned completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_failure);
    EXPECT_NE(std::string(e.what()).find("peer 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_THROW(w[0].check_peer(1), Error);
}

// An abort reaches a peer blocked in wait_some on another thread, with the
// reason, though the two never exchange a message.
TEST(InprocTransport, AbortReachesABlockedPeerWithItsReason) {
  World w(3);
  test::Latch posted;
  std::string error;
  ErrorCode code = ErrorCode::internal;
  std::thread waiter([&] {
    int32_t in = 0;
    w[0].irecv(1, &in, 4, nullptr);
    posted.count_down();
    std::vector<RequestId> done;
    try {
      w[0].wait_some(done, Clock::now() + 20s);
    } catch (const PeerAborted& e) {
      error = e.what();
      code = e.code();
      EXPECT_EQ(e.origin, "rank 2 gave up");
    } catch (const Error& e) {
      error = e.what();
    }
  });
  ASSERT_TRUE(posted.wait());
  w[2].abort(ErrorCode::internal, "rank 2 gave up");
  waiter.join();
  EXPECT_EQ(code, ErrorCode::peer_failure) << error;
  EXPECT_NE(error.find("peer 2 failed: rank 2 gave up"), std::string::npos) << error;
  // The next call of any other rank fails too.
  EXPECT_THROW(w[1].begin_call(call(1)), PeerAborted);
}

TEST(InprocTransport, InterruptEndsABlockedWait) {
  World w(2);
  int32_t in = 0;
  const RequestId r = w[0].irecv(1, &in, 4, nullptr);
  test::Latch waiting;
  std::vector<RequestId> done;
  std::thread waiter([&] {
    waiting.count_down();
    w[0].wait_some(done, Clock::now() + 60s);
  });
  ASSERT_TRUE(waiting.wait());
  const auto start = Clock::now();
  w[0].interrupt();
  waiter.join();
  EXPECT_LT(Clock::now() - start, 30s);
  EXPECT_TRUE(done.empty());
  // The transport goes on: the receive completes once sent.
  const int32_t out = 9;
  w[1].isend(0, &out, 4);
  wait_all(w[0], {r});
  EXPECT_EQ(in, 9);
}

TEST(InprocTransport, APassedDeadlineReturnsEmpty) {
  World w(2);
  int32_t in = 0;
  w[0].irecv(1, &in, 4, nullptr);
  std::vector<RequestId> done;
  w[0].wait_some(done, Clock::now());
  EXPECT_TRUE(done.empty());
}

TEST(InprocTransport, PeerProgressReportsCallsAndReturnedRanks) {
  World w(3);
  w[1].begin_call(call(5));
  w[2].begin_call(point_to_point_stamp(2, DataType::int8, 1, 0));
  inproc_rank_exited(*w.world, 2);
  const std::vector<PeerProgress> report = w[0].peer_progress(Clock::now());
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0].rank, 1);
  EXPECT_TRUE(report[0].responsive);
  EXPECT_EQ(report[0].last, call(5));
  EXPECT_EQ(report[0].collectives_entered, 5u);
  EXPECT_EQ(report[1].rank, 2);
  EXPECT_FALSE(report[1].responsive);
  EXPECT_EQ(report[1].collectives_entered, 0u);  // a point-to-point message is no collective
  EXPECT_NE(report[1].note.find("returned"), std::string::npos) << report[1].note;
}

// Two ranks in the same collective call with different stamps: the one that
// starts its call sees the disagreement at once.
TEST(InprocTransport, BeginCallSeesAPeerInTheSameCallWithAnotherStamp) {
  World w(2);
  w[1].begin_call(call(7));
  CallStamp other = call(7);
  other.count = 8;
  EXPECT_THROW(w[0].begin_call(other), StampMismatch);
}

TEST(InprocTransport, BadPeersAreRejected) {
  World w(2);
  int32_t b = 0;
  EXPECT_THROW(w[0].isend(0, &b, 4), Error);
  EXPECT_THROW(w[0].isend(2, &b, 4), Error);
  EXPECT_THROW(w[0].irecv(-1, &b, 4, nullptr), Error);
}

}  // namespace
}  // namespace chorus
