// RankExchange (tune/rank_exchange.h) over in-process ranks (threads): its
// collectives give every rank the same result, its messages carry the stamp
// it was given, and a wait past its deadline is a timeout naming the rank,
// what the exchange is for and the peer.
#include "tune/rank_exchange.h"

#include "core/call_stamp.h"
#include "transport/inproc/inproc_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

Deadline soon() {
  return Clock::now() + std::chrono::seconds(30);
}

// Runs body(rank's transport) on n threads of one in-process world.
void on_ranks(int n, const std::function<void(Transport&)>& body) {
  auto world = make_inproc_world(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto t = make_inproc_transport(world, r, std::chrono::microseconds{50});
      body(*t);
    });
  for (auto& th : threads) th.join();
}

TEST(RankExchange, AllgatherGivesEveryRankEveryRanksBytes) {
  struct Item {
    int rank;
    double value;
  };
  const int n = 4;
  std::vector<std::vector<Item>> got(n);
  on_ranks(n, [&](Transport& t) {
    RankExchange x(t, soon());
    const Item mine{t.rank(), 0.5 * t.rank()};
    std::vector<Item> all(n, Item{-1, -1});
    x.allgather(&mine, all.data(), sizeof mine);
    got[static_cast<size_t>(t.rank())] = all;
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(q)].rank, q) << "at rank " << r;
      EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(q)].value, 0.5 * q);
    }
}

TEST(RankExchange, BroadcastGivesEveryRankRankZerosTextAndBytes) {
  const int n = 3;
  for (const std::string& sent :
       {std::string("a model's text"), std::string(), std::string(100000, 'x')}) {
    std::vector<std::string> texts(n);
    std::vector<int> numbers(n);
    on_ranks(n, [&](Transport& t) {
      RankExchange x(t, soon());
      std::string text = t.rank() == 0 ? sent : "rank " + std::to_string(t.rank()) + "'s own";
      x.broadcast(text);
      int number = 40 + t.rank();
      x.broadcast(&number, sizeof number);
      texts[static_cast<size_t>(t.rank())] = text;
      numbers[static_cast<size_t>(t.rank())] = number;
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(texts[static_cast<size_t>(r)], sent) << "rank " << r;
      EXPECT_EQ(numbers[static_cast<size_t>(r)], 40) << "rank " << r;
    }
  }
}

TEST(RankExchange, MixedExchangesInOneOrderMatchUp) {
  // A pair's ping-pong, then an agreement and a barrier over every rank,
  // then the pair's simultaneous exchange: what each rank gets is exact.
  const int n = 3;
  std::vector<std::vector<double>> agreed(n);
  std::vector<int> from_pair(n, -1);
  on_ranks(n, [&](Transport& t) {
    RankExchange x(t, soon());
    const int r = t.rank();
    if (r < 2) {
      int out = 10 + r, in = -1;
      if (r == 0) {
        x.send(1, &out, sizeof out);
        x.recv(1, &in, sizeof in);
      } else {
        x.recv(0, &in, sizeof in);
        x.send(0, &out, sizeof out);
      }
      EXPECT_EQ(in, 10 + (1 - r));
    }
    std::vector<double> v = {static_cast<double>(r), -static_cast<double>(r)};
    x.agree_max(v);
    x.barrier();
    agreed[static_cast<size_t>(r)] = v;
    if (r < 2) {
      int out = 20 + r, in = -1;
      x.send_recv(1 - r, &out, &in, sizeof out);
      from_pair[static_cast<size_t>(r)] = in;
    }
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(agreed[static_cast<size_t>(r)], (std::vector<double>{2.0, 0.0})) << "rank " << r;
  EXPECT_EQ(from_pair[0], 21);
  EXPECT_EQ(from_pair[1], 20);
}

TEST(RankExchange, OneRankAloneExchangesNothing) {
  auto world = make_inproc_world(1);
  auto t = make_inproc_transport(world, 0, std::chrono::microseconds{50});
  RankExchange x(*t, Clock::now());  // any wait would time out at once
  std::vector<double> v = {1, 2};
  x.agree_max(v);
  std::string text = "mine";
  x.broadcast(text);
  x.barrier();
  double all = 0, mine = 7;
  x.allgather(&mine, &all, sizeof mine);
  EXPECT_EQ(v, (std::vector<double>{1, 2}));
  EXPECT_EQ(text, "mine");
  EXPECT_EQ(all, 7);
}

TEST(RankExchange, MessagesCarryTheStampGiven) {
  const CallStamp stamp =
      collective_stamp(7, Collective::allreduce, 1, DataType::float32, ReduceOp::sum, 3, 0);
  const CallStamp other =
      collective_stamp(8, Collective::allreduce, 1, DataType::float32, ReduceOp::sum, 3, 0);
  // Sender and receiver with the same stamp: delivered.
  int got = 0;
  on_ranks(2, [&](Transport& t) {
    RankExchange x(t, soon(), "test", stamp);
    int v = 5;
    if (t.rank() == 0)
      x.send(1, &v, sizeof v);
    else
      x.recv(0, &got, sizeof got);
  });
  EXPECT_EQ(got, 5);
  // A receive whose stamp differs from the message's: the receiver raises
  // StampMismatch naming both stamps' calls, and no byte lands.
  bool mismatch = false;
  int untouched = -1;
  on_ranks(2, [&](Transport& t) {
    if (t.rank() == 0) {
      RankExchange x(t, Clock::now() + std::chrono::milliseconds(200), "test", stamp);
      int v = 5;
      try {
        x.send(1, &v, sizeof v);
      } catch (const Error&) {
        // the receiver never takes it: a timeout (or the transport's word)
      }
      return;
    }
    RankExchange x(t, soon(), "test", other);
    try {
      x.recv(0, &untouched, sizeof untouched);
    } catch (const StampMismatch& e) {
      mismatch = e.mine == other && e.theirs == stamp;
    }
  });
  EXPECT_TRUE(mismatch);
  EXPECT_EQ(untouched, -1);
}

TEST(RankExchange, AWaitPastTheDeadlineIsATimeoutNamingRankWhatAndPeer) {
  // Rank 1 of the world never starts: rank 0's waits end at the deadline.
  auto world = make_inproc_world(2);
  auto t = make_inproc_transport(world, 0, std::chrono::microseconds{50});
  RankExchange x(*t, Clock::now() + std::chrono::milliseconds(50), "the probe");
  int v = 0;
  try {
    x.recv(1, &v, sizeof v);
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_EQ(std::string(e.what()), "rank 0: the probe: timeout waiting for peer 1");
  }
  EXPECT_TRUE(x.expired());
  try {
    x.allgather(&v, std::vector<int>(2).data(), sizeof v);
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_EQ(std::string(e.what()), "rank 0: the probe: timeout waiting for its peers");
  }
}

}  // namespace
}  // namespace chorus
