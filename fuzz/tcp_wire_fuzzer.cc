// Fuzz target: the tcp transport's wire format (src/transport/tcp/tcp_wire.h).
//
// Input: one byte whose low two bits choose the element size of a receive (1,
// 2, 4 or 8 bytes), then wire bytes, decoded both as a handshake (the first
// kHandshakeBytes) and as a frame header (the first kHeaderBytes), each from
// a copy of exactly that size, as the transport reads them. Checked beyond
// "no crash":
//   - encode(decode(b)) gives back b (the frame header's reserved bytes
//     aside), so decoding keeps every field;
//   - a handshake passes handshake_problem only with this job's magic,
//     version, token and size;
//   - a header passes frame_problem only with the frame magic, a known kind,
//     for an abort a reason of at most kMaxAbortReason bytes, and no payload
//     on the other control frames;
//   - a chunk that passes chunk_problem lies inside its message, on element
//     boundaries;
//   - the header's call stamp, whatever its bytes, can be described.
#include "transport/tcp/tcp_wire.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using namespace chorus::tcp;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "tcp_wire: %s\n", what);
  std::abort();
}

// The job the handshake is checked against (the seeds carry its token).
constexpr uint32_t kJobSize = 4;
constexpr Token kJobToken = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
                             0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f};

void check_handshake(const uint8_t* b) {
  const Handshake h = Handshake::decode(b);
  const auto again = h.encode();
  require(std::memcmp(again.data(), b, kHandshakeBytes) == 0, "handshake encode(decode(b)) != b");
  if (handshake_problem(h, kJobToken, kJobSize).empty())
    require(h.magic == kHandshakeMagic && h.version == kProtocolVersion && h.token == kJobToken &&
                h.size == kJobSize,
            "handshake_problem accepted a handshake of another job");
}

void check_frame(const uint8_t* b, size_t elem_size) {
  const FrameHeader h = FrameHeader::decode(b);
  uint8_t again[kHeaderBytes];
  h.encode(again);
  uint8_t expected[kHeaderBytes];
  std::memcpy(expected, b, kHeaderBytes);
  expected[6] = expected[7] = 0;  // reserved: written as zero, ignored when read
  require(std::memcmp(again, expected, kHeaderBytes) == 0, "header encode(decode(b)) != b");
  if (frame_problem(h).empty()) {
    require(h.magic == kFrameMagic, "frame_problem accepted a bad magic");
    require(h.kind == frame_data || h.kind == frame_abort || h.kind == frame_bye ||
                h.kind == frame_status_query || h.kind == frame_status,
            "frame_problem accepted an unknown kind");
    require(h.kind == frame_data || h.kind == frame_abort || h.len == 0,
            "frame_problem accepted a payload on a control frame");
    require(h.kind != frame_abort || h.len <= kMaxAbortReason,
            "frame_problem accepted an overlong abort reason");
  }
  // The stamp off the wire is named in mismatch errors: any bytes must give
  // words, not a crash.
  require(!chorus::describe(h.stamp, "").empty(), "describe() of a stamp gave nothing");
  if (chunk_problem(h, elem_size).empty())
    require(h.offset <= h.total && h.len <= h.total - h.offset && h.offset % elem_size == 0 &&
                h.len % elem_size == 0,
            "chunk_problem accepted a chunk outside its message or off element boundaries");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t elem_size = size_t{1} << (data[0] & 3);
  const std::vector<uint8_t> wire(data + 1, data + size);
  if (wire.size() >= kHandshakeBytes)
    check_handshake(std::vector<uint8_t>(wire.begin(), wire.begin() + kHandshakeBytes).data());
  if (wire.size() >= kHeaderBytes)
    check_frame(std::vector<uint8_t>(wire.begin(), wire.begin() + kHeaderBytes).data(), elem_size);
  return 0;
}
