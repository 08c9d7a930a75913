// The socket helpers of src/net: host:port parsing and its errors, address
// resolution and formatting, listening and connecting on loopback, bounded
// blocking transfers (data, end of stream, timeouts), refused connections
// retried until the deadline, and the little-endian wire integers.
#include "net/socket.h"

#include <chorus/error.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using namespace std::chrono_literals;

// The Error `f` throws (a test failure when it throws none).
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error was thrown";
  return Error(ErrorCode::internal, "none");
}

TEST(SplitHostPort, SplitsAtTheLastColon) {
  EXPECT_EQ(split_host_port("node7:2950", "x"),
            std::make_pair(std::string("node7"), uint16_t{2950}));
  EXPECT_EQ(split_host_port("10.0.0.1:0", "x"),
            std::make_pair(std::string("10.0.0.1"), uint16_t{0}));
  EXPECT_EQ(split_host_port("a:b:65535", "x"), std::make_pair(std::string("a:b"), uint16_t{65535}));
}

TEST(SplitHostPort, MalformedTextIsAnErrorNamingWhatItWas) {
  for (const char* bad :
       {"node7", ":2950", "node7:", "node7:http", "node7:65536", "node7:-1", "node7:29 50", ""}) {
    const Error e = error_of([&] { split_host_port(bad, "CHORUS_STORE"); });
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << bad;
    EXPECT_NE(std::string(e.what()).find("CHORUS_STORE"), std::string::npos) << e.what();
  }
}

TEST(Endpoint, ResolvesDottedQuadsAndNamesAndDescribesThem) {
  EXPECT_EQ(resolve("127.0.0.1", 2950, "x").describe(), "127.0.0.1:2950");
  EXPECT_EQ(resolve("10.1.2.3", 0, "x").describe(), "10.1.2.3:0");
  // "localhost" resolves through the hosts file, to a loopback address.
  const std::string local = resolve("localhost", 80, "x").describe();
  EXPECT_EQ(local.rfind("127.", 0), 0u) << local;
  EXPECT_EQ(local.substr(local.size() - 3), ":80") << local;
}

TEST(Endpoint, TheLocalAddressTowardsLoopbackIsLoopback) {
  EXPECT_EQ(local_address_towards(resolve("127.0.0.1", 0, "x")), "127.0.0.1");
}

// A listener on an ephemeral loopback port; the accepted end of a connection.
Fd accept_one(int listener, Deadline deadline) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, poll_timeout_ms(deadline)) != 1) return Fd();
  return Fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

TEST(Sockets, ListenConnectAndTransferOnLoopback) {
  Fd listener = listen_on(resolve("127.0.0.1", 0, "test"), "test listener");
  const uint16_t port = local_port(listener.get());
  ASSERT_NE(port, 0);
  EXPECT_NE(::fcntl(listener.get(), F_GETFL) & O_NONBLOCK, 0) << "the listener must not block";

  Fd client = connect_with_retry(resolve("127.0.0.1", port, "test"), Clock::now() + 10s, "test");
  ASSERT_TRUE(client.valid());
  Fd server = accept_one(listener.get(), Clock::now() + 10s);
  ASSERT_TRUE(server.valid());

  // Larger than the socket buffers: read_all has to wait for write_all.
  std::vector<uint8_t> out(size_t{8} << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 31 + 7);
  std::string write_error;
  bool wrote = false;
  std::thread writer([&] {
    wrote = write_all(client.get(), out.data(), out.size(), Clock::now() + 30s, "test write",
                      write_error);
  });
  std::string read_error;
  EXPECT_TRUE(
      read_all(server.get(), in.data(), in.size(), Clock::now() + 30s, "test read", read_error))
      << read_error;
  writer.join();
  EXPECT_TRUE(wrote) << write_error;
  EXPECT_TRUE(in == out) << "the bytes read differ from those written";

  // The other end closes: read_all reports the end of the stream, not a timeout.
  client.reset();
  uint8_t b = 0;
  EXPECT_FALSE(read_all(server.get(), &b, 1, Clock::now() + 10s, "test read", read_error));
  EXPECT_EQ(read_error, "connection closed by the other end");
}

TEST(Sockets, AReadWithNothingToReadTimesOutNamingWhatItWas) {
  Fd listener = listen_on(resolve("127.0.0.1", 0, "test"), "test listener");
  Fd client = connect_with_retry(resolve("127.0.0.1", local_port(listener.get()), "test"),
                                 Clock::now() + 10s, "test");
  Fd server = accept_one(listener.get(), Clock::now() + 10s);
  ASSERT_TRUE(server.valid());
  std::string error;
  uint8_t b = 0;
  const Error e = error_of(
      [&] { read_all(server.get(), &b, 1, Clock::now() + 50ms, "the peer's handshake", error); });
  EXPECT_EQ(e.code(), ErrorCode::timeout);
  EXPECT_NE(std::string(e.what()).find("the peer's handshake"), std::string::npos) << e.what();
}

TEST(Sockets, APortInUseCannotBeListenedOn) {
  Fd first = listen_on(resolve("127.0.0.1", 0, "test"), "first");
  const uint16_t port = local_port(first.get());
  const Error e =
      error_of([&] { listen_on(resolve("127.0.0.1", port, "test"), "second listener"); });
  EXPECT_EQ(e.code(), ErrorCode::system);
  EXPECT_NE(std::string(e.what()).find("second listener"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(std::to_string(port)), std::string::npos) << e.what();
}

// Nobody listens: connect_with_retry retries the refused connection until
// its deadline, then names what it was connecting for and where.
TEST(Sockets, RefusedConnectionsAreRetriedUntilTheDeadline) {
  uint16_t port = 0;
  {
    Fd probe = listen_on(resolve("127.0.0.1", 0, "test"), "probe");
    port = local_port(probe.get());
  }  // closed: the port is free, and refuses connections
  const auto start = Clock::now();
  const Error e = error_of([&] {
    connect_with_retry(resolve("127.0.0.1", port, "test"), Clock::now() + 100ms, "rank 3's store");
  });
  EXPECT_EQ(e.code(), ErrorCode::timeout);
  EXPECT_GE(Clock::now() - start, 50ms) << "gave up before the deadline came near";
  const std::string what = e.what();
  EXPECT_NE(what.find("rank 3's store"), std::string::npos) << what;
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << what;
}

TEST(Sockets, PollTimeoutsAreClampedAndRoundedUp) {
  EXPECT_EQ(poll_timeout_ms(Clock::now() - 1s), 0);
  const int soon = poll_timeout_ms(Clock::now() + 1500us);
  EXPECT_GE(soon, 1);
  EXPECT_LE(soon, 2);
  EXPECT_EQ(poll_timeout_ms(Clock::time_point::max()), INT_MAX);
}

TEST(Sockets, ErrnoTextCarriesTheNumber) {
  const std::string text = errno_text(ECONNREFUSED);
  EXPECT_NE(text.find("errno " + std::to_string(ECONNREFUSED)), std::string::npos) << text;
}

TEST(WireIntegers, AreLittleEndianAndRoundTrip) {
  uint8_t b[8] = {};
  put_u32(b, 0x01020304u);
  EXPECT_EQ(std::vector<uint8_t>(b, b + 4), (std::vector<uint8_t>{4, 3, 2, 1}));
  EXPECT_EQ(get_u32(b), 0x01020304u);
  put_u64(b, 0x0102030405060708ull);
  EXPECT_EQ(std::vector<uint8_t>(b, b + 8), (std::vector<uint8_t>{8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(get_u64(b), 0x0102030405060708ull);
  for (uint64_t v : {uint64_t{0}, ~uint64_t{0}, uint64_t{1} << 63, uint64_t{0xdeadbeef}}) {
    put_u64(b, v);
    EXPECT_EQ(get_u64(b), v);
  }
}

}  // namespace
}  // namespace chorus
