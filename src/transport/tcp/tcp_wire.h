// The tcp transport's wire format: the handshake that opens every connection
// and the 64-byte header in front of every frame; their byte layout, encoding,
// decoding and validation. All integers are little-endian.
//
// Handshake (both ends send one; 36 bytes):
//   magic u32 "CHRH" | version u32 | token 16 B | rank u32 | size u32 | stream u32
// Frame header (64 bytes), then `len` payload bytes:
//   magic u32 "CHRF" | kind u16 | reserved u16 | seq u64 | total u64 | offset u64 | len u64
//   | stamp: count u64 | seq u32 | root i32 | kind u8 | algorithm u8 | type u8 | op u8
//            | part u32
// kind data carries bytes [offset, offset+len) of message `seq` of `total`
// bytes, sent by the call `stamp` (core/call_stamp.h); kind abort carries the
// failed peer's reason (at most kMaxAbortReason bytes) and, in seq, the
// ErrorCode of its cause; kind bye has no payload; kind status_query asks the
// peer where it is, and kind status answers: its last call in `stamp`, the
// number of its last collective call in seq. tcp_transport.h says how they
// are used.
#pragma once

#include "core/call_stamp.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::tcp {

inline constexpr uint32_t kFrameMagic = 0x46524843;      // "CHRF"
inline constexpr uint32_t kHandshakeMagic = 0x48524843;  // "CHRH"
inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr size_t kTokenBytes = 16;
inline constexpr size_t kHandshakeBytes = 4 + 4 + kTokenBytes + 4 + 4 + 4;
inline constexpr size_t kHeaderBytes = 64;
inline constexpr size_t kMaxAbortReason = 4096;

enum FrameKind : uint16_t {
  frame_data = 1,
  frame_abort = 2,
  frame_bye = 3,
  frame_status_query = 4,
  frame_status = 5,
};

// The job token: rank 0 draws it, every connection proves it knows it.
using Token = std::array<uint8_t, kTokenBytes>;
Token random_token();

struct Handshake {
  uint32_t magic = kHandshakeMagic;
  uint32_t version = kProtocolVersion;
  Token token{};
  uint32_t rank = 0;
  uint32_t size = 0;
  uint32_t stream = 0;

  std::array<uint8_t, kHandshakeBytes> encode() const;
  static Handshake decode(const uint8_t* b);
};

// Why a received handshake belongs to no connection of this job ("" when it
// may): bad magic or version, another job's token, another world size. Which
// rank and stream it may come from is the set-up's business.
std::string handshake_problem(const Handshake& h, const Token& token, uint32_t size);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t kind = frame_data;
  uint64_t seq = 0;
  uint64_t total = 0;
  uint64_t offset = 0;
  uint64_t len = 0;
  CallStamp stamp;

  void encode(uint8_t* b) const;  // writes kHeaderBytes
  static FrameHeader decode(const uint8_t* b);
};

// Why a received header cannot start a frame ("" when it can): bad magic, an
// unknown kind, an abort reason longer than kMaxAbortReason.
std::string frame_problem(const FrameHeader& h);

// Why a data chunk is malformed for a receive of elements of `elem_size`
// bytes ("" when it is not): [offset, offset+len) must lie inside the
// message, on element boundaries.
std::string chunk_problem(const FrameHeader& h, size_t elem_size);

}  // namespace chorus::tcp
