// The TcpStore server's protocol core, driven without sockets (as a fuzzer
// drives it), and the keyed hash it admits clients by.
#include "store/tcp_store_core.h"
#include "net/socket.h"
#include "store/store_auth.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace store_wire;

std::string hex(const Mac& m) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : m) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

// RFC 4231, test cases 1 and 2.
TEST(StoreAuth, HmacSha256MatchesTheRfc4231Vectors) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), bytes("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", bytes("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(StoreAuth, ProofsDependOnSecretNoncesAndDirection) {
  Nonce a{}, b{};
  b[0] = 1;
  const Mac p = client_proof("s", a, b);
  EXPECT_TRUE(equal_in_constant_time(p, client_proof("s", a, b)));
  EXPECT_FALSE(equal_in_constant_time(p, client_proof("t", a, b)));
  EXPECT_FALSE(equal_in_constant_time(p, client_proof("s", b, a)));
  EXPECT_FALSE(equal_in_constant_time(p, server_proof("s", a, b)));
  EXPECT_NE(random_nonce(), random_nonce());
  EXPECT_EQ(random_secret().size(), 64u);
}

// --- the core -------------------------------------------------------------------

const Deadline kT0{};  // the core has no clock: any time base will do

Nonce nonce_of(uint8_t v) {
  Nonce n{};
  n.fill(v);
  return n;
}

std::vector<uint8_t> client_hello(const std::string& secret, const Nonce& server,
                                  const Nonce& client) {
  std::vector<uint8_t> h(kClientHelloBytes, 0);
  put_u32(h.data(), kClientHelloMagic);
  put_u32(h.data() + 4, kProtocolVersion);
  std::memcpy(h.data() + 8, client.data(), kNonceBytes);
  if (!secret.empty()) {
    const Mac p = client_proof(secret, server, client);
    std::memcpy(h.data() + 8 + kNonceBytes, p.data(), kMacBytes);
  }
  return h;
}

std::vector<uint8_t> request(Op op, const std::string& key, const std::vector<uint8_t>& value,
                             uint64_t timeout_ms = 0) {
  return encode_request(op, key, value, timeout_ms);
}

struct Reply {
  uint8_t status;
  std::string payload;
};

// Splits queued output into replies.
std::vector<Reply> replies(const std::vector<uint8_t>& out) {
  std::vector<Reply> r;
  size_t pos = 0;
  while (pos + kResponseHeaderBytes <= out.size()) {
    const size_t len = get_u64(out.data() + pos + 1);
    r.push_back(
        {out[pos], std::string(out.begin() + static_cast<long>(pos + kResponseHeaderBytes),
                               out.begin() + static_cast<long>(pos + kResponseHeaderBytes + len))});
    pos += kResponseHeaderBytes + len;
  }
  EXPECT_EQ(pos, out.size());
  return r;
}

// Connects and admits a client of `core` (whose secret is `secret`).
TcpStoreCore::ClientId admitted(TcpStoreCore& core, const std::string& secret, uint8_t tag) {
  const auto id = core.connect(nonce_of(tag), kT0 + 10s);
  const auto hello = core.take_output(id);
  EXPECT_EQ(hello.size(), kServerHelloBytes);
  EXPECT_FALSE(core.receive(id, client_hello(secret, nonce_of(tag), nonce_of(0x5a)), kT0).close);
  const auto r = replies(core.take_output(id));
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.at(0).status, status_ok);
  return id;
}

TEST(TcpStoreCore, AdmitsTheSecretAndProvesItBack) {
  TcpStoreCore core("s3cret");
  const auto id = core.connect(nonce_of(1), kT0 + 10s);
  const auto hello = core.take_output(id);
  ASSERT_EQ(hello.size(), kServerHelloBytes);
  EXPECT_EQ(get_u32(hello.data()), kServerHelloMagic);
  EXPECT_EQ(get_u32(hello.data() + 8), kFlagSecretRequired);
  EXPECT_EQ(0, std::memcmp(hello.data() + 12, nonce_of(1).data(), kNonceBytes));
  // Byte by byte: partial messages wait for the rest.
  const auto mine = client_hello("s3cret", nonce_of(1), nonce_of(2));
  for (uint8_t b : mine) EXPECT_FALSE(core.receive(id, {&b, 1}, kT0).close);
  const auto r = replies(core.take_output(id));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, status_ok);
  const Mac expected = server_proof("s3cret", nonce_of(1), nonce_of(2));
  EXPECT_EQ(r[0].payload, std::string(expected.begin(), expected.end()));
}

TEST(TcpStoreCore, RefusesAWrongProofAndAReplayedOne) {
  TcpStoreCore core("s3cret");
  const auto id = core.connect(nonce_of(1), kT0 + 10s);
  core.take_output(id);
  // A request pipelined behind the wrong hello is never handled.
  auto bytes_in = client_hello("guess", nonce_of(1), nonce_of(2));
  const auto get = request(op_get, "k", {});
  bytes_in.insert(bytes_in.end(), get.begin(), get.end());
  const auto out = core.receive(id, bytes_in, kT0);
  EXPECT_TRUE(out.close);
  EXPECT_NE(out.reason.find("wrong CHORUS_STORE_SECRET"), std::string::npos) << out.reason;
  const auto r = replies(core.take_output(id));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, status_refused);
  EXPECT_EQ(r[0].payload, "wrong CHORUS_STORE_SECRET");
  ASSERT_EQ(core.take_closed().size(), 1u);
  core.disconnect(id);
  // A proof made for another server nonce does not pass.
  const auto id2 = core.connect(nonce_of(3), kT0 + 10s);
  core.take_output(id2);
  EXPECT_TRUE(core.receive(id2, client_hello("s3cret", nonce_of(1), nonce_of(2)), kT0).close);
}

TEST(TcpStoreCore, AClientThatDoesNotCompleteItsHelloIsClosedAtItsDeadline) {
  TcpStoreCore core("");
  const auto id = core.connect(nonce_of(1), kT0 + 10s);
  EXPECT_EQ(core.expire(kT0 + 1s), kT0 + 10s);
  core.expire(kT0 + 10s);
  const auto closed = core.take_closed();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].first, id);
}

TEST(TcpStoreCore, SetGetAddAndAWaitingGet) {
  TcpStoreCore core("");
  const auto a = admitted(core, "", 1);
  const auto b = admitted(core, "", 2);
  // b waits for "late"; a sets it; b's reply is queued by a's request.
  core.receive(b, request(op_get, "late", {}, 5000), kT0);
  EXPECT_FALSE(core.wants_input(b));
  EXPECT_TRUE(core.take_output(b).empty());
  core.receive(a, request(op_set, "late", bytes("here")), kT0);
  auto rb = replies(core.take_output(b));
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].payload, "here");
  EXPECT_TRUE(core.wants_input(b));
  // add keeps decimal text; a non-integer is refused with the key named.
  std::vector<uint8_t> delta(8);
  put_u64(delta.data(), 5);
  core.receive(a, request(op_add, "n", delta), kT0);
  core.receive(a, request(op_set, "text", bytes("abc")), kT0);
  core.receive(a, request(op_add, "text", delta), kT0);
  const auto ra = replies(core.take_output(a));
  ASSERT_EQ(ra.size(), 4u);
  EXPECT_EQ(get_u64(reinterpret_cast<const uint8_t*>(ra[1].payload.data())), 5u);
  EXPECT_EQ(ra[3].status, status_bad);
  EXPECT_NE(ra[3].payload.find("key 'text'"), std::string::npos) << ra[3].payload;
  // A get times out at its own deadline.
  core.receive(b, request(op_get, "never", {}, 100), kT0);
  EXPECT_EQ(core.expire(kT0 + 50ms), kT0 + 100ms);
  core.expire(kT0 + 100ms);
  rb = replies(core.take_output(b));
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].status, status_timeout);
}

TEST(TcpStoreCore, RequestsBehindAWaitingGetRunOnceItIsAnswered) {
  TcpStoreCore core("");
  const auto a = admitted(core, "", 1);
  const auto b = admitted(core, "", 2);
  auto pipelined = request(op_get, "k", {}, 5000);
  const auto set = request(op_set, "after", bytes("x"));
  pipelined.insert(pipelined.end(), set.begin(), set.end());
  core.receive(b, pipelined, kT0);
  core.receive(a, request(op_set, "k", bytes("v")), kT0);
  const auto rb = replies(core.take_output(b));
  ASSERT_EQ(rb.size(), 2u);  // the get's value, then the set's ok
  core.receive(a, request(op_get, "after", {}), kT0);
  const auto ra = replies(core.take_output(a));
  ASSERT_EQ(ra.size(), 2u);
  EXPECT_EQ(ra[1].payload, "x");
}

TEST(TcpStoreCore, UnreadRepliesPastTheCapCloseTheClientOnly) {
  TcpStoreLimits limits;
  limits.max_value_bytes = 1000;
  limits.max_queued_reply_bytes = 1000 + kResponseHeaderBytes;
  TcpStoreCore core("", limits);
  const auto writer = admitted(core, "", 1);
  const auto greedy = admitted(core, "", 2);
  core.receive(writer, request(op_set, "big", std::vector<uint8_t>(600, 1)), kT0);
  core.take_output(writer);
  std::vector<uint8_t> gets;
  for (int i = 0; i < 24; ++i) {
    const auto g = request(op_get, "big", {});
    gets.insert(gets.end(), g.begin(), g.end());
  }
  const auto out = core.receive(greedy, gets, kT0);
  EXPECT_TRUE(out.close);
  EXPECT_NE(out.reason.find("did not read its replies"), std::string::npos) << out.reason;
  EXPECT_EQ(core.queued_bytes(greedy), 0u);  // what it had queued is released
  EXPECT_LE(core.stats().peak_client_queued_bytes, limits.max_queued_reply_bytes);
  core.disconnect(greedy);
  core.receive(writer, request(op_get, "big", {}), kT0);
  const auto r = replies(core.take_output(writer));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].payload.size(), 600u);
}

TEST(TcpStoreCore, OversizedOrMalformedRequestsCloseTheClient) {
  TcpStoreLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_stored_bytes = 64;
  TcpStoreCore core("", limits);
  const std::vector<std::vector<uint8_t>> bad = {
      request(op_set, "a-long-key", bytes("v")),          // key over the cap
      request(op_set, "k", std::vector<uint8_t>(17, 0)),  // value over the cap
      request(op_get, "k", bytes("v")),                   // a get with a value
      request(op_add, "k", bytes("1")),                   // a 1-byte delta
      request(static_cast<Op>(9), "k", {}),               // an unknown op
      std::vector<uint8_t>(kRequestHeaderBytes, 0xEE),    // a bad magic number
  };
  uint8_t tag = 1;
  for (const auto& b : bad) {
    const auto id = admitted(core, "", tag++);
    EXPECT_TRUE(core.receive(id, b, kT0).close);
    core.disconnect(id);
  }
  // The store's total: 4 sets of 16 bytes under 1-byte keys pass 64 bytes.
  const auto id = admitted(core, "", tag);
  TcpStoreCore::Outcome last;
  for (const char* k : {"a", "b", "c", "d"})
    last = core.receive(id, request(op_set, k, std::vector<uint8_t>(16, 0)), kT0);
  EXPECT_TRUE(last.close);
  EXPECT_NE(last.reason.find("over the cap"), std::string::npos) << last.reason;
  EXPECT_LE(core.stats().stored_bytes, limits.max_stored_bytes);
}

TEST(TcpStoreCore, AGetsDeadlineSaturatesInsteadOfOverflowing) {
  // The largest timeout the wire can say, on a clock near its end: no
  // deadline at all, not one that wrapped into the past.
  {
    TcpStoreCore core("");
    const Deadline late = Deadline::max() - 1s;
    const auto a = admitted(core, "", 1);
    const auto b = admitted(core, "", 2);
    core.receive(a, request(op_get, "k", {}, UINT64_MAX), late);
    EXPECT_EQ(core.expire(late), Deadline::max());
    EXPECT_TRUE(core.take_output(a).empty());
    EXPECT_FALSE(core.wants_input(a));
    core.receive(b, request(op_set, "k", bytes("v")), late);
    const auto r = replies(core.take_output(a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, status_ok);
    EXPECT_EQ(r[0].payload, "v");
  }
  // A timeout of about 35 years is not cut short (to 30 days, as it once was).
  {
    TcpStoreCore core("");
    const auto a = admitted(core, "", 1);
    core.receive(a, request(op_get, "k", {}, uint64_t{1} << 40), kT0);
    EXPECT_EQ(core.expire(kT0 + 24h * 365), kT0 + std::chrono::milliseconds(int64_t{1} << 40));
    EXPECT_TRUE(core.take_output(a).empty());
    core.expire(kT0 + std::chrono::milliseconds(int64_t{1} << 40));
    const auto r = replies(core.take_output(a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, status_timeout);
  }
}

TEST(TcpStoreCore, CountersStayInsideInt64) {
  TcpStoreCore core("");
  const auto a = admitted(core, "", 1);
  const auto add = [&](const std::string& key, int64_t d) {
    std::vector<uint8_t> delta(8);
    put_u64(delta.data(), static_cast<uint64_t>(d));
    EXPECT_FALSE(core.receive(a, request(op_add, key, delta), kT0).close);
    const auto r = replies(core.take_output(a));
    EXPECT_EQ(r.size(), 1u);
    return r.at(0);
  };
  const auto set = [&](const std::string& key, const std::string& v) {
    core.receive(a, request(op_set, key, bytes(v)), kT0);
    core.take_output(a);
  };
  // Text past the int64 range is no counter.
  set("big", "9223372036854775808");
  auto r = add("big", 1);
  EXPECT_EQ(r.status, status_bad);
  EXPECT_NE(r.payload.find("not an integer"), std::string::npos) << r.payload;
  // The extremes are counters; a step past them is refused, the value kept.
  set("min", "-9223372036854775808");
  r = add("min", -1);
  EXPECT_EQ(r.status, status_bad);
  EXPECT_NE(r.payload.find("overflows 64 bits"), std::string::npos) << r.payload;
  r = add("min", 1);
  ASSERT_EQ(r.status, status_ok);
  EXPECT_EQ(static_cast<int64_t>(get_u64(reinterpret_cast<const uint8_t*>(r.payload.data()))),
            INT64_MIN + 1);
  EXPECT_EQ(add("max", INT64_MAX).status, status_ok);
  EXPECT_EQ(add("max", 1).status, status_bad);
  EXPECT_EQ(add("max", INT64_MIN).status, status_ok);  // -1
  core.receive(a, request(op_get, "max", {}), kT0);
  const auto got = replies(core.take_output(a));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "-1");
  EXPECT_TRUE(core.wants_input(a));  // a refused add does not close the client
}

// A client that reads its replies but always leaves a byte of them unread:
// what it has read is released, so that the core holds at most about twice
// the cap for it, however many replies it asks for.
TEST(TcpStoreCore, ASlowReaderHoldsAtMostTwiceTheReplyCap) {
  TcpStoreLimits limits;
  limits.max_value_bytes = 1000;
  limits.max_queued_reply_bytes = 1100;  // a reply and the byte left unread
  TcpStoreCore core("", limits);
  const auto writer = admitted(core, "", 1);
  const auto reader = admitted(core, "", 2);
  std::vector<uint8_t> value(1000);
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<uint8_t>(i * 7);
  core.receive(writer, request(op_set, "big", value), kT0);
  std::vector<uint8_t> got;
  for (int i = 0; i < 50; ++i) {
    ASSERT_FALSE(core.receive(reader, request(op_get, "big", {}), kT0).close);
    const auto out = core.output(reader);
    got.insert(got.end(), out.begin(), out.end() - 1);
    core.sent(reader, out.size() - 1);
    EXPECT_LE(core.held_bytes(reader), 2 * limits.max_queued_reply_bytes) << "after " << i + 1;
  }
  const auto rest = core.take_output(reader);
  got.insert(got.end(), rest.begin(), rest.end());
  const auto r = replies(got);
  ASSERT_EQ(r.size(), 50u);
  for (const auto& one : r) EXPECT_EQ(one.payload, std::string(value.begin(), value.end()));
}

TEST(TcpStoreCore, AbortAnswersEveryWaiterAndEveryLaterRequest) {
  TcpStoreCore core("");
  const auto a = admitted(core, "", 1);
  const auto b = admitted(core, "", 2);
  core.receive(b, request(op_get, "never", {}, 60000), kT0);
  core.receive(a, request(op_abort, "", bytes("rank 1: bad value")), kT0);
  const auto rb = replies(core.take_output(b));
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].status, status_aborted);
  EXPECT_EQ(rb[0].payload, "rank 1: bad value");
  EXPECT_EQ(core.stats().told_of_abort, 2u);  // the aborter and the waiter
  core.receive(a, request(op_abort, "", bytes("second")), kT0);
  core.receive(a, request(op_set, "k", bytes("v")), kT0);
  const auto ra = replies(core.take_output(a));
  ASSERT_EQ(ra.size(), 3u);
  EXPECT_EQ(ra[0].status, status_ok);
  EXPECT_EQ(ra[1].status, status_ok);
  EXPECT_EQ(ra[2].status, status_aborted);
  EXPECT_EQ(ra[2].payload, "rank 1: bad value");
  // A client that arrives later is told at its first request, and counted once.
  const auto late = admitted(core, "", 3);
  core.receive(late, request(op_get, "k", {}), kT0);
  core.receive(late, request(op_get, "k", {}), kT0);
  EXPECT_EQ(replies(core.take_output(late)).size(), 2u);
  EXPECT_EQ(core.stats().told_of_abort, 3u);
}

}  // namespace
}  // namespace chorus
