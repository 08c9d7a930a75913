// The tcp transport with ranks as threads of this process (each thread drives
// its own transport: there is no progress thread), over a FileStore:
// collectives with one and several streams per peer, large messages both ways
// at once, size mismatches, refused connections, aborts and closed peers.
#include "transport/tcp/tcp_transport.h"
#include "core/check.h"
#include "engine/communicator_impl.h"
#include "net/socket.h"
#include "store/file_store.h"
#include "support/grid.h"
#include "support/latch.h"
#include "transport/tcp/tcp_setup.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

class TempStore {
 public:
  TempStore() {
    std::string templ = (std::filesystem::temp_directory_path() / "chorus-tcp.XXXXXX").string();
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    store_ = std::make_shared<FileStore>(dir_);
  }
  ~TempStore() { std::filesystem::remove_all(dir_); }
  std::shared_ptr<Store> store() const { return store_; }

 private:
  std::string dir_;
  std::shared_ptr<Store> store_;
};

TcpOptions options(size_t streams) {
  TcpOptions o;
  o.streams = streams;
  o.host_id = "test-host";
  o.deadline = Clock::now() + 30s;
  o.log_level = LogLevel::none;
  return o;
}

// Runs body(rank, transport) on n threads; returns the first exception's text
// per rank ("" when it returned normally).
// `configure` may adjust each rank's options (e.g. its peers mask).
std::vector<std::string> run_tcp(int n, size_t streams,
                                 const std::function<void(int, std::unique_ptr<Transport>&)>& body,
                                 Store& store,
                                 const std::function<void(int, TcpOptions&)>& configure = {}) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        TcpOptions o = options(streams);
        if (configure) configure(r, o);
        auto t = make_tcp_transport(store, r, n, o);
        body(r, t);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

void wait_all(Transport& t, std::vector<RequestId> ids, Deadline deadline) {
  std::vector<RequestId> done;
  while (!ids.empty()) {
    done.clear();
    t.wait_some(done, deadline);
    if (done.empty() && Clock::now() >= deadline) fail(ErrorCode::timeout, "test wait timed out");
    for (RequestId id : done) std::erase(ids, id);
  }
}

class TcpGrid : public ::testing::TestWithParam<size_t> {};

// The allreduce, allgather and reduce_scatter grids (large prime included) at
// N = 3 over one stream and over three striped streams per peer.
TEST_P(TcpGrid, CollectivesMatchTheReference) {
  TempStore ts;
  std::mutex mu;
  std::vector<std::string> mismatches;
  const int n = 3;
  auto errors = run_tcp(
      n, GetParam(),
      [&](int, std::unique_ptr<Transport>& t) {
        Communicator comm = make_communicator(std::move(t), Config{});
        for (Collective c :
             {Collective::allreduce, Collective::allgather, Collective::reduce_scatter}) {
          std::vector<test::GridCase> cases;
          for (const auto& gc : test::grid_cases(c, n, true))
            if (gc.type == DataType::float32 || gc.type == DataType::int8 || gc.count > 1000)
              cases.push_back(gc);
          auto e = test::run_grid(comm, cases, "ring");
          std::lock_guard lock(mu);
          mismatches.insert(mismatches.end(), e.begin(), e.end());
        }
      },
      *ts.store());
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (const auto& m : mismatches) ADD_FAILURE() << m;
}

INSTANTIATE_TEST_SUITE_P(Streams, TcpGrid, ::testing::Values(1, 3),
                         [](const auto& p) { return "streams" + std::to_string(p.param); });

TEST(TcpTransport, LargeMessagesBothWaysAtOnceDoNotDeadlock) {
  // Each rank sends 48 MiB to the other before receiving anything: far more
  // than the socket buffers hold, so this completes only if progress keeps
  // reading while it writes.
  TempStore ts;
  constexpr size_t kBytes = size_t{48} << 20;
  auto errors = run_tcp(
      2, 2,
      [&](int r, std::unique_ptr<Transport>& t) {
        std::vector<uint8_t> out(kBytes), in(kBytes, 0);
        for (size_t i = 0; i < kBytes; ++i)
          out[i] = static_cast<uint8_t>(i * 7 + static_cast<size_t>(r));
        const RequestId s = t->isend(1 - r, out.data(), kBytes);
        const RequestId v = t->irecv(1 - r, in.data(), kBytes, nullptr);
        wait_all(*t, {s, v}, Clock::now() + 60s);
        for (size_t i = 0; i < kBytes; i += 4099)
          ASSERT_EQ(in[i], static_cast<uint8_t>(i * 7 + static_cast<size_t>(1 - r)))
              << "byte " << i;
      },
      *ts.store());
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpTransport, ReducingReceiveOfStripedMessage) {
  TempStore ts;
  constexpr size_t kCount = 1000003;
  auto errors = run_tcp(
      2, 4,
      [&](int r, std::unique_ptr<Transport>& t) {
        std::vector<int64_t> mine(kCount), dst(kCount, -1);
        for (size_t i = 0; i < kCount; ++i) mine[i] = static_cast<int64_t>(i) * (r + 1);
        Reducer red{DataType::int64, ReduceOp::sum, mine.data()};
        const RequestId s = t->isend(1 - r, mine.data(), kCount * 8);
        const RequestId v = t->irecv(1 - r, dst.data(), kCount * 8, &red);
        wait_all(*t, {s, v}, Clock::now() + 60s);
        for (size_t i = 0; i < kCount; ++i)
          ASSERT_EQ(dst[i], static_cast<int64_t>(i) * 3) << "element " << i;
      },
      *ts.store());
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpTransport, MessagesKeepFifoOrderAndZeroBytesCount) {
  TempStore ts;
  auto errors = run_tcp(
      2, 3,
      [&](int r, std::unique_ptr<Transport>& t) {
        constexpr int kMsgs = 20;
        std::vector<std::vector<uint32_t>> bufs(kMsgs);
        std::vector<RequestId> ids;
        for (int m = 0; m < kMsgs; ++m) {
          // Sizes from 0 to several chunks, so stripes of different messages interleave.
          const size_t count = m % 4 == 0 ? 0 : static_cast<size_t>(m) * 40000;
          bufs[static_cast<size_t>(m)].assign(count,
                                              r == 0 ? static_cast<uint32_t>(m) : 0xFFFFFFFF);
          auto& b = bufs[static_cast<size_t>(m)];
          ids.push_back(r == 0 ? t->isend(1, b.data(), b.size() * 4)
                               : t->irecv(0, b.data(), b.size() * 4, nullptr));
        }
        wait_all(*t, ids, Clock::now() + 30s);
        if (r == 1) {
          for (int m = 0; m < kMsgs; ++m)
            for (uint32_t x : bufs[static_cast<size_t>(m)]) ASSERT_EQ(x, static_cast<uint32_t>(m));
        }
      },
      *ts.store());
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpTransport, SizeMismatchIsAnError) {
  TempStore ts;
  test::Latch judged;
  auto errors = run_tcp(
      2, 1,
      [&](int r, std::unique_ptr<Transport>& t) {
        std::vector<uint8_t> b(200);
        if (r == 0) {
          wait_all(*t, {t->isend(1, b.data(), 100)}, Clock::now() + 10s);
          // Keep the connection open until the peer has judged the message.
          EXPECT_TRUE(judged.wait());
        } else {
          test::CountDownOnExit done(judged);
          wait_all(*t, {t->irecv(0, b.data(), 200, nullptr)}, Clock::now() + 10s);
        }
      },
      *ts.store());
  EXPECT_EQ(errors[0], "");
  EXPECT_NE(errors[1].find("rank 1"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("peer 0"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("100 B"), std::string::npos) << errors[1];
}

TEST(TcpTransport, AbortReachesPeersWithItsReason) {
  TempStore ts;
  test::Latch learnt(2);  // ranks 0 and 1 are done with their receive
  auto errors = run_tcp(
      3, 1,
      [&](int r, std::unique_ptr<Transport>& t) {
        if (r == 2) {
          t->abort(ErrorCode::internal, "rank 2 gave up on purpose");
          // The transport stays open until both peers have judged their receive.
          EXPECT_TRUE(learnt.wait());
          return;
        }
        test::CountDownOnExit done(learnt);
        // Ranks 0 and 1 only exchange among themselves, yet learn of rank 2 at once.
        uint8_t b = 0;
        std::vector<RequestId> ids{t->irecv(1 - r, &b, 1, nullptr)};
        const auto start = Clock::now();
        try {
          wait_all(*t, ids, Clock::now() + 20s);
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::peer_failure);
          EXPECT_LT(Clock::now() - start, 5s);
          throw;
        }
      },
      *ts.store());
  for (int r : {0, 1}) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("peer 2"), std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_NE(errors[static_cast<size_t>(r)].find("gave up on purpose"), std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
}

// A chain 0 - 1 - 2 (rank 0 has no connection to rank 2): rank 2 aborts,
// rank 1 fails waiting for it, and when rank 1's transport closes it tells
// rank 0 the cause instead of saying goodbye, so rank 0 reports rank 2's
// reason rather than only "peer 1 closed".
TEST(TcpTransport, AFailedRankPassesTheCauseOnWhenItCloses) {
  TempStore ts;
  auto errors = run_tcp(
      3, 1,
      [&](int r, std::unique_ptr<Transport>& t) {
        uint8_t b = 0;
        if (r == 2) {
          t->abort(ErrorCode::internal, "rank 2 gave up on purpose");
          return;
        }
        wait_all(*t, {t->irecv(r == 0 ? 1 : 2, &b, 1, nullptr)}, Clock::now() + 20s);
      },
      *ts.store(),
      [](int r, TcpOptions& o) {
        o.peers = {r == 1, r != 1, r == 1};
      });
  EXPECT_EQ(errors[2], "");
  EXPECT_NE(errors[1].find("peer 2 failed: rank 2 gave up on purpose"), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[0].find("peer 1 failed: rank 1: tcp: peer 2 failed: rank 2 gave up on purpose"),
            std::string::npos)
      << errors[0];
}

TEST(TcpTransport, APeerThatClosedIsAFailureOnlyWhenNeeded) {
  TempStore ts;
  test::Latch closed;
  auto errors = run_tcp(
      2, 1,
      [&](int r, std::unique_ptr<Transport>& t) {
        uint8_t b = 7;
        if (r == 0) {
          test::CountDownOnExit done(closed);
          wait_all(*t, {t->isend(1, &b, 1)}, Clock::now() + 10s);
          t.reset();  // closes with a goodbye
          return;
        }
        wait_all(*t, {t->irecv(0, &b, 1, nullptr)}, Clock::now() + 10s);
        EXPECT_EQ(b, 7);
        // Rank 0 has gone on purpose: fine until this rank wants more from it.
        ASSERT_TRUE(closed.wait());
        std::vector<RequestId> done;
        t->poll(done);
        wait_all(*t, {t->irecv(0, &b, 1, nullptr)}, Clock::now() + 10s);
      },
      *ts.store());
  EXPECT_EQ(errors[0], "");
  EXPECT_NE(errors[1].find("peer 0"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("closed its communicator"), std::string::npos) << errors[1];
}

// A peer whose message waits here, parked (no receive posted for it yet), and
// which then stops polling (stopped, or cut off) is reported as not
// answering: having sent early does not make it reachable now.
TEST(TcpTransport, APeerAheadThatStopsAnsweringIsReportedAsSuch) {
  TempStore ts;
  test::Latch sent;
  test::Latch reported;
  std::vector<PeerProgress> seen;
  auto errors = run_tcp(
      2, 1,
      [&](int r, std::unique_ptr<Transport>& t) {
        std::vector<uint8_t> b(64, static_cast<uint8_t>(r == 1 ? 9 : 0));
        if (r == 1) {
          {
            // A small message is done once written, before rank 0 asks for it.
            test::CountDownOnExit written(sent);
            wait_all(*t, {t->isend(0, b.data(), b.size())}, Clock::now() + 10s);
          }
          // Silent (no progress, so no status answers) until rank 0 has judged.
          EXPECT_TRUE(reported.wait());
          return;
        }
        test::CountDownOnExit judged(reported);
        // Take the message's header in, where it parks (no receive asks for it).
        ASSERT_TRUE(sent.wait());
        auto parked = [](const std::vector<PeerProgress>& report) {
          return report.size() == 1 && report[0].note.find("waits here") != std::string::npos;
        };
        const auto until = Clock::now() + 10s;
        std::vector<RequestId> done;
        do {
          t->wait_some(done, Clock::now() + 5ms);
        } while (!parked(t->peer_progress(Clock::now())) && Clock::now() < until);
        seen = t->peer_progress(Clock::now() + 300ms);
        reported.count_down();
        wait_all(*t, {t->irecv(1, b.data(), b.size(), nullptr)}, Clock::now() + 10s);
        EXPECT_EQ(b[63], 9);
      },
      *ts.store());
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].rank, 1);
  EXPECT_FALSE(seen[0].responsive);
  EXPECT_NE(seen[0].note.find("does not answer"), std::string::npos) << seen[0].note;
  EXPECT_NE(seen[0].note.find("waits here"), std::string::npos) << seen[0].note;
}

// Reads rank `rank`'s published port from the store.
uint16_t published_port(Store& store, int rank) {
  const auto v = store.get("tcp/addr/" + std::to_string(rank), Clock::now() + 10s);
  const std::string s(v.begin(), v.end());
  return static_cast<uint16_t>(std::stoul(s.substr(s.rfind('\n') + 1)));
}

// A connection presenting a wrong token (during set-up and after it) is
// closed, and the job goes on.
TEST(TcpTransport, WrongTokenIsRefusedAndTheJobGoesOn) {
  TempStore ts;
  Store& store = *ts.store();
  std::atomic<bool> closed_during_setup{false};
  std::atomic<bool> closed_after_setup{false};
  test::Latch early_knocked;  // the early rogue's handshake is on its way to rank 0
  test::Latch setup_done;
  auto rogue = [&](std::atomic<bool>& closed, test::Latch& knocked) {
    test::CountDownOnExit done(knocked);  // also when it fails
    try {
      Fd fd = connect_with_retry(resolve("127.0.0.1", published_port(store, 0), "rogue"),
                                 Clock::now() + 10s, "rogue");
      // A well-formed handshake from "rank 1" with an all-zero token.
      std::vector<uint8_t> hs(40, 0);
      put_u32(hs.data(), 0x48524843);
      put_u32(hs.data() + 4, 1);
      put_u32(hs.data() + 24, 1);
      put_u32(hs.data() + 28, 2);
      std::string err;
      write_all(fd.get(), hs.data(), hs.size(), Clock::now() + 5s, "rogue", err);
      knocked.count_down();
      uint8_t b;
      closed = !read_all(fd.get(), &b, 1, Clock::now() + 10s, "rogue", err);
    } catch (const Error& e) {
      ADD_FAILURE() << "rogue: " << e.what();
    }
  };
  std::thread early([&] { rogue(closed_during_setup, early_knocked); });
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        // Rank 1 comes once the rogue's connection waits at rank 0 (which
        // accepts nothing before rank 1 has checked the store too), so that
        // rank 0 meets the rogue during its set-up, before rank 1.
        if (r == 1 && !early_knocked.wait()) fail(ErrorCode::timeout, "the early rogue never came");
        Communicator comm =
            make_communicator(make_tcp_transport(store, r, 2, options(1)), Config{});
        if (r == 0) setup_done.count_down();
        const auto until = Clock::now() + 30s;
        while (true) {
          int32_t v = r + 1;
          comm.allreduce(&v, &v, 1, DataType::int32, ReduceOp::sum);
          if (v != 3) fail(ErrorCode::internal, "allreduce gave ", v);
          // Both ranks stop in the same round: once rank 0 saw the rogue out
          // (or gave up waiting for it, which the checks below report).
          int32_t stop = r == 0 && (closed_after_setup || Clock::now() >= until) ? 1 : 0;
          comm.allreduce(&stop, &stop, 1, DataType::int32, ReduceOp::max);
          if (stop) break;
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
      if (r == 0) setup_done.count_down();  // also when the set-up failed
    });
  EXPECT_TRUE(setup_done.wait());
  test::Latch late_knocked;
  std::thread late([&] { rogue(closed_after_setup, late_knocked); });
  early.join();
  late.join();
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(closed_during_setup.load());
  EXPECT_TRUE(closed_after_setup.load());
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpTransport, SetUpTimesOutNamingTheMissingPeer) {
  TempStore ts;
  TcpOptions o = options(1);
  o.deadline = Clock::now() + 300ms;
  ts.store()->set("tcp/token", std::vector<uint8_t>(16, 1));
  try {
    make_tcp_transport(*ts.store(), 1, 2, o);  // rank 0 never comes
    FAIL() << "set-up succeeded without rank 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

// A rank's data port listens on the address it publishes (not on 0.0.0.0),
// and peers connect to it there. 127.0.0.2 is a loopback address other than
// the default, so that neither "any" nor a fixed 127.0.0.1 would pass.
class TcpDataPort : public ::testing::TestWithParam<std::string> {};

TEST_P(TcpDataPort, ListensOnThePublishedAddress) {
  const std::string published = GetParam().empty() ? "127.0.0.1" : GetParam();
  try {
    listen_on(resolve(published, 0, "probe"), "probe");
  } catch (const Error& e) {
    GTEST_SKIP() << published << " is not an address of this host: " << e.what();
  }
  TempStore ts;
  std::vector<sockaddr_in> listening(2), connected_to(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        TcpOptions o = options(1);
        o.address = GetParam();
        std::vector<Fd> streams;
        Fd listen = tcp::connect_mesh(*ts.store(), r, 2, o, [&](Fd fd, int, uint32_t) {
          socklen_t len = sizeof(sockaddr_in);
          auto* peer = reinterpret_cast<sockaddr*>(&connected_to[static_cast<size_t>(r)]);
          ::getpeername(fd.get(), peer, &len);
          streams.push_back(std::move(fd));
        });
        socklen_t len = sizeof(sockaddr_in);
        ::getsockname(listen.get(), reinterpret_cast<sockaddr*>(&listening[static_cast<size_t>(r)]),
                      &len);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors, std::vector<std::string>(2, ""));
  in_addr want{};
  ASSERT_EQ(::inet_pton(AF_INET, published.c_str(), &want), 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(listening[static_cast<size_t>(r)].sin_addr.s_addr, want.s_addr) << "rank " << r;
    EXPECT_EQ(ntohs(listening[static_cast<size_t>(r)].sin_port), published_port(*ts.store(), r));
  }
  // Rank 1 connected to rank 0's published address and port.
  EXPECT_EQ(connected_to[1].sin_addr.s_addr, want.s_addr);
  EXPECT_EQ(connected_to[1].sin_port, listening[0].sin_port);
}

INSTANTIATE_TEST_SUITE_P(Addresses, TcpDataPort, ::testing::Values("", "127.0.0.2"),
                         [](const auto& p) {
                           return p.param.empty() ? std::string("Default")
                                                  : std::string("Loopback2");
                         });

// A malformed address record fails the set-up naming the key (not an
// exception from deep inside the parser).
TEST(TcpTransport, AMalformedAddressRecordIsNamed) {
  TempStore ts;
  TcpOptions o = options(1);
  o.deadline = Clock::now() + 30s;
  ts.store()->set("tcp/token", std::vector<uint8_t>(16, 1));
  const std::string bad = "host\n127.0.0.1\nnot-a-port";
  ts.store()->set("tcp/addr/0", std::vector<uint8_t>(bad.begin(), bad.end()));
  try {
    make_tcp_transport(*ts.store(), 1, 2, o);
    FAIL() << "set-up succeeded with a bad address record";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::mismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("store key 'tcp/addr/0'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chorus
