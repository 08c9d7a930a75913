// The tcp transport's wire format: encoding, decoding and validation of the
// handshake and the frame header (layouts in tcp_wire.h).
#include "transport/tcp/tcp_wire.h"

#include "core/check.h"
#include "net/socket.h"

#include <cstring>
#include <random>

namespace chorus::tcp {

Token random_token() {
  std::random_device rd;
  Token t{};
  for (size_t i = 0; i < kTokenBytes; i += 4) {
    const uint32_t v = rd();
    std::memcpy(t.data() + i, &v, 4);
  }
  return t;
}

std::array<uint8_t, kHandshakeBytes> Handshake::encode() const {
  std::array<uint8_t, kHandshakeBytes> b{};
  put_u32(b.data(), magic);
  put_u32(b.data() + 4, version);
  std::memcpy(b.data() + 8, token.data(), kTokenBytes);
  put_u32(b.data() + 8 + kTokenBytes, rank);
  put_u32(b.data() + 12 + kTokenBytes, size);
  put_u32(b.data() + 16 + kTokenBytes, stream);
  return b;
}

Handshake Handshake::decode(const uint8_t* b) {
  Handshake h;
  h.magic = get_u32(b);
  h.version = get_u32(b + 4);
  std::memcpy(h.token.data(), b + 8, kTokenBytes);
  h.rank = get_u32(b + 8 + kTokenBytes);
  h.size = get_u32(b + 12 + kTokenBytes);
  h.stream = get_u32(b + 16 + kTokenBytes);
  return h;
}

std::string handshake_problem(const Handshake& h, const Token& token, uint32_t size) {
  if (h.magic != kHandshakeMagic || h.version != kProtocolVersion)
    return "not a chorus tcp handshake (bad magic or version)";
  if (h.token != token) return "wrong job token";
  if (h.size != size) return str_cat("world size ", h.size, " differs from ", size);
  return "";
}

void FrameHeader::encode(uint8_t* b) const {
  put_u32(b, magic);
  b[4] = static_cast<uint8_t>(kind);
  b[5] = static_cast<uint8_t>(kind >> 8);
  b[6] = b[7] = 0;
  put_u64(b + 8, seq);
  put_u64(b + 16, total);
  put_u64(b + 24, offset);
  put_u64(b + 32, len);
  put_u64(b + 40, stamp.count);
  put_u32(b + 48, stamp.seq);
  put_u32(b + 52, static_cast<uint32_t>(stamp.root));
  b[56] = stamp.kind;
  b[57] = stamp.algorithm;
  b[58] = stamp.type;
  b[59] = stamp.op;
  put_u32(b + 60, stamp.part);
}

FrameHeader FrameHeader::decode(const uint8_t* b) {
  FrameHeader h;
  h.magic = get_u32(b);
  h.kind = static_cast<uint16_t>(b[4] | (b[5] << 8));
  h.seq = get_u64(b + 8);
  h.total = get_u64(b + 16);
  h.offset = get_u64(b + 24);
  h.len = get_u64(b + 32);
  h.stamp.count = get_u64(b + 40);
  h.stamp.seq = get_u32(b + 48);
  h.stamp.root = static_cast<int32_t>(get_u32(b + 52));
  h.stamp.kind = b[56];
  h.stamp.algorithm = b[57];
  h.stamp.type = b[58];
  h.stamp.op = b[59];
  h.stamp.part = get_u32(b + 60);
  return h;
}

std::string frame_problem(const FrameHeader& h) {
  if (h.magic != kFrameMagic) return "bad frame magic";
  if (h.kind == frame_abort && h.len > kMaxAbortReason) return "abort reason too long";
  if (h.kind != frame_data && h.kind != frame_abort && h.kind != frame_bye &&
      h.kind != frame_status_query && h.kind != frame_status)
    return str_cat("unknown frame kind ", h.kind);
  if ((h.kind == frame_bye || h.kind == frame_status_query || h.kind == frame_status) && h.len != 0)
    return str_cat("a frame of kind ", h.kind, " with a payload of ", h.len, " B");
  return "";
}

std::string chunk_problem(const FrameHeader& h, size_t elem_size) {
  if (h.offset > h.total || h.len > h.total - h.offset || h.offset % elem_size != 0 ||
      h.len % elem_size != 0)
    return str_cat("malformed chunk [", h.offset, ", +", h.len, ") of a ", h.total, " B message");
  return "";
}

}  // namespace chorus::tcp
