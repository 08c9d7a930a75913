// Stores (FileStore and TcpStore behind one parametrized suite) and the
// TcpStore server's failure modes.
#include "net/socket.h"
#include "store/file_store.h"
#include "store/tcp_store.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string fresh_dir(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("chorus-" + tag + ".XXXXXX")).string();
  EXPECT_NE(::mkdtemp(templ.data()), nullptr);
  return templ;
}

// A store of either kind; each client() is a separate connection for TcpStore.
class StoreEnv {
 public:
  explicit StoreEnv(const std::string& kind) : kind_(kind) {
    if (kind == "file") {
      dir_ = fresh_dir("store");
    } else {
      server_ = std::make_unique<TcpStoreServer>(resolve("127.0.0.1", 0, "test"));
    }
  }
  ~StoreEnv() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::shared_ptr<Store> client() {
    if (kind_ == "file") return std::make_shared<FileStore>(dir_);
    return std::make_shared<TcpStore>(resolve("127.0.0.1", server_->port(), "test"),
                                      Clock::now() + 5s);
  }
  void stop_server() { server_.reset(); }

 private:
  std::string kind_;
  std::string dir_;
  std::unique_ptr<TcpStoreServer> server_;
};

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  StoreEnv env_{GetParam()};
};

TEST_P(StoreTest, SetThenGetReturnsTheValueAndOverwrites) {
  auto s = env_.client();
  s->set("a", bytes("one"));
  EXPECT_EQ(s->get("a", Clock::now() + 1s), bytes("one"));
  s->set("a", bytes("two"));
  EXPECT_EQ(s->get("a", Clock::now() + 1s), bytes("two"));
  // Binary values with zero bytes and odd key characters survive unchanged.
  const std::vector<uint8_t> bin{0, 1, 0, 255, 10, 0};
  s->set("dir/with spaces/\n%", bin);
  EXPECT_EQ(env_.client()->get("dir/with spaces/\n%", Clock::now() + 1s), bin);
  s->set("empty", {});
  EXPECT_TRUE(s->get("empty", Clock::now() + 1s).empty());
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  auto reader = env_.client();
  auto writer = env_.client();
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    writer->set("late", bytes("here"));
  });
  EXPECT_EQ(reader->get("late", Clock::now() + 10s), bytes("here"));
  t.join();
}

TEST_P(StoreTest, GetAndWaitTimeOutNamingTheKey) {
  auto s = env_.client();
  const auto start = Clock::now();
  try {
    s->get("never", Clock::now() + 200ms);
    FAIL() << "get returned for a key nobody set";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - start, 200ms);
  s->set("present", bytes("x"));
  try {
    s->wait({"present", "missing"}, Clock::now() + 100ms);
    FAIL() << "wait returned with a key missing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos) << e.what();
  }
  // The store still works after a timed-out request.
  s->wait({"present"}, Clock::now() + 1s);
}

TEST_P(StoreTest, ConcurrentClientsAddAtomically) {
  constexpr int kClients = 6;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kClients);
  for (int c = 0; c < kClients; ++c)
    threads.emplace_back([&, c] {
      auto s = env_.client();
      for (int i = 0; i < kAdds; ++i) seen[static_cast<size_t>(c)].push_back(s->add("counter", 1));
    });
  for (auto& t : threads) t.join();
  // Every intermediate value was handed out exactly once.
  std::map<int64_t, int> count;
  for (const auto& v : seen)
    for (int64_t x : v) ++count[x];
  EXPECT_EQ(count.size(), static_cast<size_t>(kClients * kAdds));
  EXPECT_EQ(count.begin()->first, 1);
  EXPECT_EQ(count.rbegin()->first, kClients * kAdds);
  EXPECT_EQ(env_.client()->add("counter", -5), kClients * kAdds - 5);
  EXPECT_EQ(env_.client()->add("fresh", 0), 0);
}

TEST_P(StoreTest, AddOnANonIntegerValueIsAnError) {
  auto s = env_.client();
  s->set("text", bytes("hello"));
  EXPECT_THROW(s->add("text", 1), Error);
}

TEST_P(StoreTest, PrefixStoresDoNotSeeEachOther) {
  auto base = env_.client();
  PrefixStore a(base, "comm0");
  PrefixStore b(base, "comm1");
  a.set("k", bytes("a"));
  b.set("k", bytes("b"));
  EXPECT_EQ(a.get("k", Clock::now() + 1s), bytes("a"));
  EXPECT_EQ(b.get("k", Clock::now() + 1s), bytes("b"));
  EXPECT_EQ(base->get("comm0/k", Clock::now() + 1s), bytes("a"));
  EXPECT_THROW(b.get("only_in_a", Clock::now() + 50ms), Error);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("file", "tcp"),
                         [](const auto& p) { return p.param; });

TEST(TcpStore, ServerGoneAwayIsAPeerFailure) {
  StoreEnv env("tcp");
  auto s = env.client();
  s->set("k", bytes("v"));
  std::atomic<int> code{-1};
  std::thread blocked([&] {
    try {
      s->get("never", Clock::now() + 30s);
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
    }
  });
  std::this_thread::sleep_for(100ms);
  const auto start = Clock::now();
  env.stop_server();
  blocked.join();
  EXPECT_EQ(code.load(), static_cast<int>(ErrorCode::peer_failure));
  EXPECT_LT(Clock::now() - start, 5s) << "the blocked get did not notice the server going away";
  try {
    s->set("k", bytes("v"));
    FAIL() << "set succeeded without a server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
  }
}

TEST(TcpStore, ClientRetriesUntilTheServerIsUp) {
  // Find a free port, then start the server on it only after the client began.
  uint16_t port;
  {
    Fd probe = listen_on(resolve("127.0.0.1", 0, "test"), "test");
    port = local_port(probe.get());
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<TcpStoreServer>(resolve("127.0.0.1", port, "test"));
  });
  TcpStore client(resolve("127.0.0.1", port, "test"), Clock::now() + 10s);
  client.set("up", bytes("yes"));
  EXPECT_EQ(client.get("up", Clock::now() + 1s), bytes("yes"));
  late.join();
}

TEST(TcpStore, ConnectTimesOutWithoutAServer) {
  uint16_t port;
  {
    Fd probe = listen_on(resolve("127.0.0.1", 0, "test"), "test");
    port = local_port(probe.get());
  }
  try {
    TcpStore client(resolve("127.0.0.1", port, "test"), Clock::now() + 300ms);
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
  }
}

TEST(TcpStore, AMalformedRequestClosesOnlyThatConnection) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"));
  TcpStore good(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 1s);
  good.set("k", bytes("v"));
  Fd raw;
  {
    // A raw connection that speaks garbage.
    TcpStoreServer& other = server;
    raw = connect_with_retry(resolve("127.0.0.1", other.port(), "test"), Clock::now() + 1s, "raw");
    std::vector<uint8_t> junk(64, 0xEE);
    std::string err;
    ASSERT_TRUE(write_all(raw.get(), junk.data(), junk.size(), Clock::now() + 1s, "raw", err));
    uint8_t b;
    // The server closes the connection instead of answering.
    EXPECT_FALSE(read_all(raw.get(), &b, 1, Clock::now() + 2s, "raw", err));
    // ...and keeps serving well-formed clients.
    TcpStore ok(resolve("127.0.0.1", other.port(), "test"), Clock::now() + 1s);
    ok.set("still", bytes("serving"));
    EXPECT_EQ(ok.get("still", Clock::now() + 1s), bytes("serving"));
  }
  EXPECT_EQ(good.get("k", Clock::now() + 1s), bytes("v"));
}

}  // namespace
}  // namespace chorus
