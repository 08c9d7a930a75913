// Send/Recv and AllToAll through the public API on in-process ranks: FIFO
// matching per ordered pair, asynchronous forms, interleaving with
// collectives, and the argument errors (raised before any byte moves).
#include "support/recv_any_check.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

// A value unique per (sender, message, element).
float tag(int from, int msg, size_t i) {
  return static_cast<float>(from * 100000 + msg * 1000 + static_cast<int>(i));
}

TEST(PointToPoint, MessagesMatchInOrderPerPair) {
  constexpr int kMessages = 5;
  testing::run_ranks(3, [](Communicator& comm) {
    const int r = comm.rank();
    // Every rank sends kMessages messages of growing size to every other rank
    // (all asynchronous), then receives them in order.
    std::vector<std::vector<float>> out;
    std::vector<Work> sends;
    for (int peer = 0; peer < comm.size(); ++peer) {
      if (peer == r) continue;
      for (int m = 0; m < kMessages; ++m) {
        std::vector<float> v(static_cast<size_t>(m) * 7 + 1);
        for (size_t i = 0; i < v.size(); ++i) v[i] = tag(r, m, i);
        out.push_back(std::move(v));
        sends.push_back(comm.isend(out.back().data(), out.back().size(), DataType::float32, peer));
      }
    }
    for (int peer = 0; peer < comm.size(); ++peer) {
      if (peer == r) continue;
      for (int m = 0; m < kMessages; ++m) {
        std::vector<float> got(static_cast<size_t>(m) * 7 + 1, -1.0f);
        comm.recv(got.data(), got.size(), DataType::float32, peer);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], tag(peer, m, i)) << "rank " << r << " from " << peer << " msg " << m;
      }
    }
    for (auto& w : sends) w.wait();
  });
}

TEST(PointToPoint, AsyncReceivesCompleteAndInterleaveWithCollectives) {
  testing::run_ranks(4, [](Communicator& comm) {
    const int r = comm.rank();
    const int right = (r + 1) % comm.size();
    const int left = (r + comm.size() - 1) % comm.size();
    std::vector<int64_t> in(1000, -1);
    std::vector<int64_t> outv(1000);
    std::iota(outv.begin(), outv.end(), int64_t{r} * 1000);
    Work rw = comm.irecv(in.data(), in.size(), DataType::int64, left);
    Work sw = comm.isend(outv.data(), outv.size(), DataType::int64, right);
    // A collective issued while the messages are outstanding.
    int64_t x = r + 1;
    comm.allreduce(&x, &x, 1, DataType::int64, ReduceOp::sum);
    EXPECT_EQ(x, 10);
    rw.wait();
    sw.wait();
    EXPECT_TRUE(rw.done());
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(in[i], int64_t{left} * 1000 + static_cast<int64_t>(i));
  });
}

TEST(PointToPoint, ZeroCountMessagesOrderWithOthers) {
  testing::run_ranks(2, [](Communicator& comm) {
    double v = 42.0;
    if (comm.rank() == 0) {
      comm.send(nullptr, 0, DataType::float64, 1);
      comm.send(&v, 1, DataType::float64, 1);
    } else {
      double got = 0;
      comm.recv(nullptr, 0, DataType::float64, 0);
      comm.recv(&got, 1, DataType::float64, 0);
      EXPECT_EQ(got, 42.0);
    }
  });
}

TEST(PointToPoint, BadArgumentsAreInvalidArgumentErrors) {
  testing::run_ranks(2, [](Communicator& comm) {
    float v = 0;
    const int other = 1 - comm.rank();
    auto expect_invalid = [&](auto&& call, const char* what) {
      try {
        call();
        ADD_FAILURE() << what << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << what << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(comm.rank())),
                  std::string::npos)
            << e.what();
      }
    };
    expect_invalid([&] { comm.send(&v, 1, DataType::float32, comm.rank()); }, "send to self");
    expect_invalid([&] { comm.recv(&v, 1, DataType::float32, comm.rank()); }, "recv from self");
    expect_invalid([&] { comm.send(&v, 1, DataType::float32, 2); }, "send to peer 2 of 2");
    expect_invalid([&] { comm.irecv(&v, 1, DataType::float32, -1); }, "recv from -1");
    expect_invalid([&] { comm.isend(nullptr, 3, DataType::float32, other); }, "null send buffer");
    expect_invalid([&] { comm.recv(nullptr, 3, DataType::float32, other); }, "null recv buffer");
    expect_invalid([&] { comm.send(&v, 1, static_cast<DataType>(99), other); }, "bad dtype");
    // The communicator is still usable after rejected calls.
    float x = 1.0f;
    if (comm.rank() == 0) comm.send(&x, 1, DataType::float32, 1);
    if (comm.rank() == 1) {
      comm.recv(&x, 1, DataType::float32, 0);
      EXPECT_EQ(x, 1.0f);
    }
  });
}

TEST(PointToPoint, MismatchedSizesFailInsteadOfCorrupting) {
  EXPECT_THROW(testing::run_ranks(2,
                                  [](Communicator& comm) {
                                    std::vector<float> v(8, 1.0f);
                                    CallOptions o;
                                    o.timeout = std::chrono::milliseconds(5000);
                                    if (comm.rank() == 0)
                                      comm.send(v.data(), 8, DataType::float32, 1, o);
                                    else
                                      comm.recv(v.data(), 4, DataType::float32, 0, o);
                                  }),
               Error);
}

// recv_any (support/recv_any_check.h); mp_check recv-any runs the same over
// shm and tcp.
TEST(PointToPoint, ReceiveFromAnyRank) {
  for (int n : {3, 4}) {
    std::mutex mu;
    std::vector<std::string> problems;
    testing::run_ranks(n, [&](Communicator& comm) {
      for (const std::string& p : test::check_recv_any(comm)) {
        std::lock_guard lock(mu);
        problems.push_back("N=" + std::to_string(n) + " rank " + std::to_string(comm.rank()) +
                           ": " + p);
      }
    });
    EXPECT_TRUE(problems.empty()) << problems.front();
  }
}

TEST(PointToPoint, ReceiveFromAnyRankChecksItsArguments) {
  testing::run_ranks(1, [](Communicator& comm) {
    int32_t v = 0;
    try {
      comm.recv_any(&v, 1, DataType::int32);
      ADD_FAILURE() << "recv_any on one rank returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("no other rank"), std::string::npos) << e.what();
    }
  });
  testing::run_ranks(2, [](Communicator& comm) {
    try {
      comm.recv_any(nullptr, 4, DataType::int32);
      ADD_FAILURE() << "a null buffer was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("buffer is null"), std::string::npos) << e.what();
    }
  });
}

// recv_any keeps the fault contract: a peer that is gone, and an abort from
// another thread, end it instead of leaving it to its deadline.
TEST(PointToPoint, ReceiveFromAnyRankEndsWhenAPeerIsGone) {
  std::atomic<bool> raised{false};
  try {
    testing::run_ranks(3, [&](Communicator& comm) {
      if (comm.rank() == 2) throw Error(ErrorCode::internal, "rank 2 leaves");
      if (comm.rank() == 1) return;  // its thread ends: it is gone too
      int32_t v = 0;
      try {
        comm.recv_any(&v, 1, DataType::int32);
        ADD_FAILURE() << "recv_any returned with no sender";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
        raised = true;
      }
    });
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 leaves"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(raised.load());
}

TEST(PointToPoint, ReceiveFromAnyRankEndsOnAbort) {
  std::atomic<bool> ended{false};
  testing::run_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 1) {
      comm.barrier();
      // Stays until rank 0's call has ended, so that only the abort can end it.
      while (!ended.load()) std::this_thread::yield();
      return;
    }
    comm.barrier();
    std::thread aborter([&comm] { comm.abort("stop waiting"); });
    int32_t v = 0;
    try {
      comm.recv_any(&v, 1, DataType::int32);
      ADD_FAILURE() << "recv_any returned with no sender";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
      EXPECT_NE(std::string(e.what()).find("stop waiting"), std::string::npos) << e.what();
    }
    ended = true;
    aborter.join();
  });
}

TEST(AllToAll, BothAlgorithmsAgreeWithTheDefinition) {
  for (int n : {1, 2, 3, 6}) {
    for (const char* algo : {"pairwise", "bruck", ""}) {
      testing::run_ranks(n, [&](Communicator& comm) {
        const size_t c = 5;
        const auto nn = static_cast<size_t>(n);
        std::vector<int32_t> in(nn * c), out(nn * c, -1);
        // Element i of block j of rank r: encodes (r, j, i).
        for (size_t j = 0; j < nn; ++j)
          for (size_t i = 0; i < c; ++i)
            in[j * c + i] = static_cast<int32_t>(comm.rank() * 10000 + j * 100 + i);
        CallOptions o;
        o.algorithm = algo;
        comm.alltoall(in.data(), out.data(), c, DataType::int32, o);
        for (size_t j = 0; j < nn; ++j)
          for (size_t i = 0; i < c; ++i)
            ASSERT_EQ(out[j * c + i], static_cast<int32_t>(j * 10000 + comm.rank() * 100 + i))
                << "N=" << n << " algo=" << algo << " rank " << comm.rank() << " block " << j;
      });
    }
  }
}

TEST(AllToAll, UnknownAlgorithmAndOverlapAreRejected) {
  testing::run_ranks(2, [](Communicator& comm) {
    std::vector<float> buf(4);
    CallOptions o;
    o.algorithm = "ring";
    try {
      comm.alltoall(buf.data(), buf.data() + 1, 1, DataType::float32);
      ADD_FAILURE() << "overlapping alltoall accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    }
    std::vector<float> out(4);
    try {
      comm.alltoall(buf.data(), out.data(), 2, DataType::float32, o);
      ADD_FAILURE() << "alltoall with algorithm 'ring' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("pairwise"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace chorus
