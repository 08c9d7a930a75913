// The tcp transport's wire format on its own: byte layout, round trips, and
// the validation that every received handshake and frame header goes through.
#include "transport/tcp/tcp_wire.h"

#include <gtest/gtest.h>

#include <array>

namespace chorus::tcp {
namespace {

TEST(TcpWire, FrameHeaderLayoutIsLittleEndianAndRoundTrips) {
  FrameHeader h;
  h.kind = frame_abort;
  h.seq = 0x0102030405060708ULL;
  h.total = 1000;
  h.offset = 256;
  h.len = 7;
  std::array<uint8_t, kHeaderBytes> b{};
  b.fill(0xff);
  h.encode(b.data());
  EXPECT_EQ(b[0], 0x43);  // "CHRF", least significant byte first
  EXPECT_EQ(b[3], 0x46);
  EXPECT_EQ(b[4], frame_abort);
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6], 0);  // reserved
  EXPECT_EQ(b[7], 0);
  EXPECT_EQ(b[8], 0x08);
  EXPECT_EQ(b[15], 0x01);
  const FrameHeader d = FrameHeader::decode(b.data());
  EXPECT_EQ(d.magic, kFrameMagic);
  EXPECT_EQ(d.kind, frame_abort);
  EXPECT_EQ(d.seq, h.seq);
  EXPECT_EQ(d.total, 1000u);
  EXPECT_EQ(d.offset, 256u);
  EXPECT_EQ(d.len, 7u);
}

TEST(TcpWire, FrameProblemsAreNamed) {
  FrameHeader h;
  EXPECT_EQ(frame_problem(h), "");
  h.kind = frame_bye;
  EXPECT_EQ(frame_problem(h), "");
  h.kind = frame_abort;
  h.len = kMaxAbortReason;
  EXPECT_EQ(frame_problem(h), "");
  h.len = kMaxAbortReason + 1;
  EXPECT_EQ(frame_problem(h), "abort reason too long");
  h.kind = 9;
  EXPECT_EQ(frame_problem(h), "unknown frame kind 9");
  h.magic = kHandshakeMagic;
  EXPECT_EQ(frame_problem(h), "bad frame magic");
}

TEST(TcpWire, ChunksMustLieInsideTheMessageOnElementBoundaries) {
  FrameHeader h;
  h.total = 16;
  h.offset = 8;
  h.len = 8;
  EXPECT_EQ(chunk_problem(h, 4), "");
  h.len = 0;
  h.offset = 16;
  EXPECT_EQ(chunk_problem(h, 4), "");  // an empty chunk at the very end
  h.offset = 17;
  EXPECT_EQ(chunk_problem(h, 1), "malformed chunk [17, +0) of a 16 B message");
  h.offset = 8;
  h.len = 9;
  EXPECT_EQ(chunk_problem(h, 1), "malformed chunk [8, +9) of a 16 B message");
  h.offset = 2;
  h.len = 4;
  EXPECT_EQ(chunk_problem(h, 1), "");
  EXPECT_EQ(chunk_problem(h, 4), "malformed chunk [2, +4) of a 16 B message");
  h.offset = 4;
  h.len = 2;
  EXPECT_EQ(chunk_problem(h, 4), "malformed chunk [4, +2) of a 16 B message");
  h.offset = 8;
  h.len = ~uint64_t{0};  // offset + len would wrap
  EXPECT_NE(chunk_problem(h, 1), "");
}

TEST(TcpWire, HandshakeRoundTripsAndEachFieldIsChecked) {
  const Token token = random_token();
  EXPECT_NE(token, random_token());
  Handshake h;
  h.token = token;
  h.rank = 3;
  h.size = 5;
  h.stream = 2;
  const auto b = h.encode();
  const Handshake d = Handshake::decode(b.data());
  EXPECT_EQ(d.magic, kHandshakeMagic);
  EXPECT_EQ(d.version, kProtocolVersion);
  EXPECT_EQ(d.token, token);
  EXPECT_EQ(d.rank, 3u);
  EXPECT_EQ(d.size, 5u);
  EXPECT_EQ(d.stream, 2u);
  EXPECT_EQ(handshake_problem(d, token, 5), "");
  EXPECT_EQ(handshake_problem(d, token, 4), "world size 5 differs from 4");
  Token other = token;
  other[0] ^= 1;
  EXPECT_EQ(handshake_problem(d, other, 5), "wrong job token");
  Handshake bad = d;
  bad.version = kProtocolVersion + 1;
  EXPECT_EQ(handshake_problem(bad, token, 5), "not a chorus tcp handshake (bad magic or version)");
  bad = d;
  bad.magic = kFrameMagic;
  EXPECT_EQ(handshake_problem(bad, token, 5), "not a chorus tcp handshake (bad magic or version)");
}

}  // namespace
}  // namespace chorus::tcp
