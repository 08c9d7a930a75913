// The fingerprint of one call, carried by every message the call sends.
//
// A receive compares the stamp of the message that arrives with the stamp of
// its own call before a byte of the message lands. Ranks that disagree on a
// call -- another count, collective, algorithm, dtype, op or root, or a call
// one rank skipped -- therefore raise ErrorCode::mismatch on the first message
// between them, instead of reducing one call's data into another's buffers.
//
//   collective call k on the communicator:  {seq k, collective, algorithm,
//                                            dtype, op, count, root}
//   point-to-point:                          {seq = the message's number on
//                                            its ordered pair, point_to_point,
//                                            dtype, count, tag}
//
// 24 bytes, trivially copyable: the shm slot header and the tcp frame header
// carry it as is. Transport-level traffic outside any call (calibration,
// set-up) uses the zero stamp.
#pragma once

#include "core/collective.h"

#include <chorus/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace chorus {

struct CallStamp {
  // Elements: the call's count argument (allgather: per rank; reduce_scatter:
  // per rank's block).
  uint64_t count = 0;
  // Collectives: the call's number on the communicator, from 1. Point to
  // point: the message's number among those this rank sends to (receives
  // from) that peer, from 1.
  uint32_t seq = 0;
  // broadcast/reduce: the root; point to point: the tag; otherwise 0.
  int32_t root = 0;
  uint8_t kind = 0;       // 0: no call; Collective + 1; kPointToPoint
  uint8_t algorithm = 0;  // 1 + the algorithm's row in the registry; 0: none
  uint8_t type = 0;       // DataType
  uint8_t op = 0;         // ReduceOp (collectives that reduce; else 0)
  // 0 for a call of its own; for a part of a deterministic reduction
  // (engine/deterministic.cc), part_of(collective, k): its collective and the
  // part's number, so that no part meets a user's call of the same shape.
  uint32_t part = 0;

  static constexpr uint8_t kPointToPoint = 0xff;

  bool operator==(const CallStamp&) const = default;
  bool point_to_point() const { return kind == kPointToPoint; }
};
static_assert(sizeof(CallStamp) == 24 && std::is_trivially_copyable_v<CallStamp>);

// The stamp of collective call `seq`; `op` is part of it where the collective
// reduces, `root` where it is rooted.
CallStamp collective_stamp(uint32_t seq, Collective collective, uint8_t algorithm, DataType type,
                           ReduceOp op, uint64_t count, int root);
// CallStamp::part of part k (1, 2, ...) of a deterministic `collective`.
constexpr uint32_t part_of(Collective collective, uint32_t k) {
  return (static_cast<uint32_t>(collective) + 1) << 8 | k;
}

// The stamp of point-to-point message `seq` on its ordered pair.
CallStamp point_to_point_stamp(uint32_t seq, DataType type, uint64_t count, int tag);

// The call in words, without its number: "allreduce(ring, float32 sum,
// count 1000)", "broadcast(binomial, float32, count 1000, root 1)",
// "allgather(ring, float32, count 8; part 1 of a deterministic allreduce)",
// "point-to-point(int32, count 8, tag 0)". `algorithm` is the name of the
// stamp's algorithm ("" when the stamp names none).
std::string describe(const CallStamp& stamp, std::string_view algorithm);

// Both sides of a mismatch, each with its number, the sender first:
//   "rank 1 called broadcast(binomial, float32, count 1000, root 1) as call
//    17; rank 0 called broadcast(binomial, float32, count 1000, root 0) as
//    call 17"
// (a point-to-point side reads "rank 0 sent point-to-point(...) as its
// message 3 to rank 1", "rank 1 posted point-to-point(...) as its message 3
// from rank 0").
std::string describe_mismatch(int sender, const CallStamp& sent, std::string_view sent_algorithm,
                              int receiver, const CallStamp& expected,
                              std::string_view expected_algorithm);

}  // namespace chorus
