// Stores (FileStore and TcpStore behind one parametrized suite) and the
// TcpStore server's failure modes.
#include "net/socket.h"
#include "store/file_store.h"
#include "store/tcp_store.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

std::string fresh_dir(const std::string& tag) {
  std::string templ =
      (std::filesystem::temp_directory_path() / ("chorus-" + tag + ".XXXXXX")).string();
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
      secret_ = kind == "tcp_secret" ? "a job secret" : "";
      server_ = std::make_unique<TcpStoreServer>(resolve("127.0.0.1", 0, "test"), secret_,
                                                 LogLevel::none);
    }
  }
  ~StoreEnv() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::shared_ptr<Store> client() {
    if (kind_ == "file") return std::make_shared<FileStore>(dir_);
    return std::make_shared<TcpStore>(resolve("127.0.0.1", server_->port(), "test"),
                                      Clock::now() + 5s, secret_);
  }
  void stop_server() { server_.reset(); }

 private:
  std::string kind_;
  std::string secret_;
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

// Deadline::max() is what CHORUS_TIMEOUT=inf gives: no deadline, not one
// that overflows into the past.
TEST_P(StoreTest, GetWithoutADeadlineWaitsForALaterSet) {
  auto reader = env_.client();
  auto writer = env_.client();
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    writer->set("late", bytes("here"));
  });
  std::vector<uint8_t> got;
  std::string error;
  try {
    got = reader->get("late", Deadline::max());
  } catch (const Error& e) {
    error = e.what();
  }
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, bytes("here"));
  reader->wait({"late"}, Deadline::max());
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

TEST_P(StoreTest, AddOnANonIntegerValueIsAnErrorNamingTheKey) {
  auto s = env_.client();
  s->set("text", bytes("hello"));
  try {
    s->add("text", 1);
    FAIL() << "add on 'hello' succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("key 'text'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'hello'"), std::string::npos) << e.what();
  }
  // A trailing character or an overflow is no counter either.
  s->set("almost", bytes("12x"));
  EXPECT_THROW(s->add("almost", 1), Error);
  s->set("huge", bytes("9223372036854775807"));
  EXPECT_THROW(s->add("huge", 1), Error);
  EXPECT_EQ(s->add("huge", -7), 9223372036854775800);
}

// An abort fails a get that waits, at once and with the reason, and every
// later operation of every client.
TEST_P(StoreTest, AbortFailsWaitersAndLaterOperationsWithTheReason) {
  auto waiter = env_.client();
  waiter->set("present", bytes("x"));
  std::string waiter_error;
  std::thread t([&] {
    try {
      waiter->get("never", Clock::now() + 120s);
    } catch (const Error& e) {
      waiter_error = e.what();
      EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
    }
  });
  std::this_thread::sleep_for(50ms);  // most likely waiting by now; either way it must fail
  auto aborter = env_.client();
  aborter->abort("rank 2: key 'chorus/x' holds 'abc', not a number");
  aborter->abort("a second reason is ignored");
  t.join();
  EXPECT_NE(waiter_error.find("rank 2: key 'chorus/x' holds 'abc'"), std::string::npos)
      << waiter_error;
  auto late = env_.client();
  for (const auto& op : std::vector<std::function<void()>>{
           [&] { late->get("present", Clock::now() + 1s); }, [&] { late->set("k", bytes("v")); },
           [&] { late->add("n", 1); }}) {
    try {
      op();
      ADD_FAILURE() << "an operation succeeded on an aborted store";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
      EXPECT_NE(std::string(e.what()).find("holds 'abc'"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("second"), std::string::npos) << e.what();
    }
  }
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

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("file", "tcp", "tcp_secret"),
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
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), "", LogLevel::none);
  TcpStore good(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 1s);
  good.set("k", bytes("v"));
  // A raw connection that reads the server's hello and answers garbage.
  Fd raw =
      connect_with_retry(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 5s, "raw");
  std::string err;
  std::vector<uint8_t> hello(store_wire::kServerHelloBytes);
  ASSERT_TRUE(read_all(raw.get(), hello.data(), hello.size(), Clock::now() + 5s, "raw", err));
  std::vector<uint8_t> junk(store_wire::kClientHelloBytes, 0xEE);
  ASSERT_TRUE(write_all(raw.get(), junk.data(), junk.size(), Clock::now() + 5s, "raw", err));
  uint8_t b;
  // The server closes the connection instead of answering...
  EXPECT_FALSE(read_all(raw.get(), &b, 1, Clock::now() + 5s, "raw", err));
  // ...and keeps serving well-formed clients.
  TcpStore ok(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 1s);
  ok.set("still", bytes("serving"));
  EXPECT_EQ(ok.get("still", Clock::now() + 1s), bytes("serving"));
  EXPECT_EQ(good.get("k", Clock::now() + 1s), bytes("v"));
  // The server publishes its counters after it has closed the socket.
  const auto settle = Clock::now() + 10s;
  while (server.stats().closed == 0 && Clock::now() < settle) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.stats().closed, 1u);
}

// --- admission ------------------------------------------------------------------

constexpr const char* kSecret = "0123456789abcdef-job-secret";

// Connects a TcpStore client with `secret` to `server`; returns the Error it
// raised ("" when admitted), checking it is a refusal, not a timeout.
std::string admission_error(const TcpStoreServer& server, const std::string& secret) {
  try {
    TcpStore client(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 30s, secret);
    client.set("admitted", bytes("yes"));
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::mismatch) << e.what();
    return e.what();
  }
}

TEST(TcpStoreAdmission, RefusesAClientWithoutTheSecret) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), kSecret, LogLevel::none);
  const std::string e = admission_error(server, "");
  EXPECT_NE(e.find("store at " + server.describe() + " refused this client"), std::string::npos)
      << e;
  EXPECT_NE(e.find("CHORUS_STORE_SECRET"), std::string::npos) << e;
  EXPECT_EQ(admission_error(server, kSecret), "");
}

TEST(TcpStoreAdmission, RefusesAClientWithAWrongSecret) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), kSecret, LogLevel::none);
  const std::string e = admission_error(server, "not-the-secret");
  EXPECT_NE(
      e.find("store at " + server.describe() + " refused this client: wrong CHORUS_STORE_SECRET"),
      std::string::npos)
      << e;
  // The server publishes its counters after it has closed the socket.
  const auto settle = Clock::now() + 10s;
  while (server.stats().closed == 0 && Clock::now() < settle) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.stats().closed, 1u);
  // Nothing the refused client tried reached the store; the right secret works.
  TcpStore ok(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 5s, kSecret);
  EXPECT_THROW(ok.get("admitted", Clock::now() + 50ms), Error);
  ok.set("k", bytes("v"));
  EXPECT_EQ(ok.get("k", Clock::now() + 1s), bytes("v"));
}

TEST(TcpStoreAdmission, AClientWithASecretRefusesAnOpenStore) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), "", LogLevel::none);
  const std::string e = admission_error(server, kSecret);
  EXPECT_NE(e.find("has no secret"), std::string::npos) << e;
}

// A raw client that knows the protocol but not the secret: its guess at a
// proof is refused with the reason, a get sent right behind it is never
// answered, and the connection is closed.
TEST(TcpStoreAdmission, ARawClientWithoutTheSecretReadsNothing) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), kSecret, LogLevel::none);
  TcpStore(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 5s, kSecret)
      .set("tcp/token", bytes("sixteen-byte-tok"));
  Fd raw =
      connect_with_retry(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 5s, "raw");
  std::string err;
  std::vector<uint8_t> hello(store_wire::kServerHelloBytes);
  ASSERT_TRUE(read_all(raw.get(), hello.data(), hello.size(), Clock::now() + 5s, "raw", err));
  EXPECT_EQ(get_u32(hello.data() + 8) & store_wire::kFlagSecretRequired, 1u);
  std::vector<uint8_t> mine(store_wire::kClientHelloBytes, 0);
  put_u32(mine.data(), store_wire::kClientHelloMagic);
  put_u32(mine.data() + 4, store_wire::kProtocolVersion);
  std::vector<uint8_t> get(store_wire::kRequestHeaderBytes, 0);
  put_u32(get.data(), store_wire::kRequestMagic);
  get[4] = store_wire::op_get;
  const std::string key = "tcp/token";
  put_u32(get.data() + 5, static_cast<uint32_t>(key.size()));
  mine.insert(mine.end(), get.begin(), get.end());
  mine.insert(mine.end(), key.begin(), key.end());
  ASSERT_TRUE(write_all(raw.get(), mine.data(), mine.size(), Clock::now() + 5s, "raw", err));
  std::vector<uint8_t> got;
  uint8_t buf[256];
  while (true) {
    const ssize_t n = ::recv(raw.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    got.insert(got.end(), buf, buf + n);
  }
  ASSERT_GE(got.size(), store_wire::kResponseHeaderBytes);
  EXPECT_EQ(got[0], store_wire::status_refused);
  const std::string text(got.begin() + store_wire::kResponseHeaderBytes, got.end());
  EXPECT_EQ(text, "wrong CHORUS_STORE_SECRET");  // the refusal and nothing else
}

// A fake server records the client's hello: the secret is not in it, and a
// server that cannot prove the secret is refused by the client.
TEST(TcpStoreAdmission, TheSecretStaysOffTheWireAndTheServerMustProveIt) {
  Fd listener = listen_on(resolve("127.0.0.1", 0, "test"), "fake");
  const uint16_t port = local_port(listener.get());
  std::vector<uint8_t> client_hello(store_wire::kClientHelloBytes);
  std::atomic<bool> fake_ok{false};
  std::thread fake([&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 30000) != 1) return;
    Fd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c.valid()) return;
    std::vector<uint8_t> hello(store_wire::kServerHelloBytes, 7);
    put_u32(hello.data(), store_wire::kServerHelloMagic);
    put_u32(hello.data() + 4, store_wire::kProtocolVersion);
    put_u32(hello.data() + 8, store_wire::kFlagSecretRequired);
    std::string err;
    if (!write_all(c.get(), hello.data(), hello.size(), Clock::now() + 10s, "fake", err) ||
        !read_all(c.get(), client_hello.data(), client_hello.size(), Clock::now() + 10s, "fake",
                  err))
      return;
    // "Admitted", with a proof it cannot have computed.
    std::vector<uint8_t> answer(store_wire::kResponseHeaderBytes + kMacBytes, 0);
    put_u64(answer.data() + 1, kMacBytes);
    fake_ok = write_all(c.get(), answer.data(), answer.size(), Clock::now() + 10s, "fake", err);
  });
  try {
    TcpStore client(resolve("127.0.0.1", port, "test"), Clock::now() + 30s, kSecret);
    ADD_FAILURE() << "the client accepted a server that does not hold the secret";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::mismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("did not prove"), std::string::npos) << e.what();
  }
  fake.join();
  ASSERT_TRUE(fake_ok.load());
  const std::string wire(client_hello.begin(), client_hello.end());
  EXPECT_EQ(wire.find(kSecret), std::string::npos);
  EXPECT_EQ(wire.find("job-secret"), std::string::npos);
}

// --- caps -----------------------------------------------------------------------

// A raw connection admitted by an open server.
Fd raw_admitted(uint16_t port) {
  Fd raw = connect_with_retry(resolve("127.0.0.1", port, "test"), Clock::now() + 5s, "raw");
  std::string err;
  std::vector<uint8_t> hello(store_wire::kServerHelloBytes);
  EXPECT_TRUE(read_all(raw.get(), hello.data(), hello.size(), Clock::now() + 5s, "raw", err));
  std::vector<uint8_t> mine(store_wire::kClientHelloBytes, 0);
  put_u32(mine.data(), store_wire::kClientHelloMagic);
  put_u32(mine.data() + 4, store_wire::kProtocolVersion);
  EXPECT_TRUE(write_all(raw.get(), mine.data(), mine.size(), Clock::now() + 5s, "raw", err));
  uint8_t answer[store_wire::kResponseHeaderBytes];
  EXPECT_TRUE(read_all(raw.get(), answer, sizeof answer, Clock::now() + 5s, "raw", err));
  EXPECT_EQ(answer[0], store_wire::status_ok);
  return raw;
}

std::vector<uint8_t> get_request(const std::string& key) {
  std::vector<uint8_t> r(store_wire::kRequestHeaderBytes, 0);
  put_u32(r.data(), store_wire::kRequestMagic);
  r[4] = store_wire::op_get;
  put_u32(r.data() + 5, static_cast<uint32_t>(key.size()));
  r.insert(r.end(), key.begin(), key.end());
  return r;
}

// The client: 24 pipelined gets of a 32 MiB value, never read. It is
// closed at the reply cap, the server never queued more than the cap for it,
// and the other clients go on.
TEST(TcpStoreCaps, AClientThatNeverReadsIsClosedAtTheReplyCap) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), "", LogLevel::none);
  const TcpStoreLimits limits;
  TcpStore writer(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 5s);
  std::vector<uint8_t> big(size_t{32} << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  writer.set("big", big);

  Fd greedy = raw_admitted(server.port());
  std::vector<uint8_t> gets;
  for (int i = 0; i < 24; ++i) {
    const auto r = get_request("big");
    gets.insert(gets.end(), r.begin(), r.end());
  }
  std::string err;
  // The server may close the connection before it has read all of them.
  write_all(greedy.get(), gets.data(), gets.size(), Clock::now() + 30s, "greedy", err);
  // The server publishes the close before it drops the client, so the count
  // of clients follows a moment later.
  const Deadline give_up = Clock::now() + 60s;
  while ((server.stats().closed == 0 || server.stats().clients != 1) && Clock::now() < give_up)
    std::this_thread::sleep_for(5ms);
  const auto stats = server.stats();
  EXPECT_EQ(stats.closed, 1u);
  EXPECT_LE(stats.peak_client_queued_bytes, limits.max_queued_reply_bytes);
  EXPECT_EQ(stats.clients, 1u);  // the writer
  // Everyone else goes on.
  TcpStore other(resolve("127.0.0.1", server.port(), "test"), Clock::now() + 5s);
  other.set("small", bytes("x"));
  EXPECT_EQ(other.get("small", Clock::now() + 5s), bytes("x"));
  EXPECT_EQ(writer.get("big", Clock::now() + 30s), big);
}

TEST(TcpStoreCaps, AnOversizedKeyClosesTheClient) {
  TcpStoreServer server(resolve("127.0.0.1", 0, "test"), "", LogLevel::none);
  Fd raw = raw_admitted(server.port());
  std::vector<uint8_t> r(store_wire::kRequestHeaderBytes, 0);
  put_u32(r.data(), store_wire::kRequestMagic);
  r[4] = store_wire::op_set;
  put_u32(r.data() + 5, 1u << 20);  // a 1 MiB key: over the 4 KiB cap
  std::string err;
  ASSERT_TRUE(write_all(raw.get(), r.data(), r.size(), Clock::now() + 5s, "raw", err));
  uint8_t b;
  EXPECT_FALSE(read_all(raw.get(), &b, 1, Clock::now() + 30s, "raw", err));
  // The server publishes its counters after it has closed the socket.
  const auto settle = Clock::now() + 10s;
  while (server.stats().closed == 0 && Clock::now() < settle) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.stats().closed, 1u);
}

}  // namespace
}  // namespace chorus
