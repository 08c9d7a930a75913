// Transport: two-sided, asynchronous, point-to-point messaging between the ranks
// of one communicator. The executor is its only client.
//
// Contract shared by every implementation (inproc, shm, tcp):
//   - Messages between an ordered pair (a -> b) are matched in FIFO order: the
//     k-th isend from a to b delivers into the k-th irecv at b from a. The
//     executor posts sends to one peer, and receives from one peer, in program
//     order. Sizes of matched messages are equal; a difference is a `mismatch`
//     error.
//   - isend/irecv never block. Buffers stay untouched by the caller until the
//     request completes. An irecv may carry a Reducer: then the message is
//     combined into dst as it arrives (dst = local (+) incoming) instead of
//     being copied, so no staging copy is needed.
//   - wait_some() makes progress and reports completed requests. It blocks until
//     at least one request completes or the deadline passes (then it returns
//     with nothing); it throws Error(peer_failure) when a peer is lost or has
//     failed, naming that peer.
//   - Zero-byte messages are real messages (they order and synchronize).
#pragma once

#include "core/deadline.h"

#include <chorus/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus {

// Applies dst[i] = local[i] (+) in[i] for `count` elements of one dtype and op.
// local may equal dst. Never the avg division: that is a final pass.
struct Reducer {
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  const void* local = nullptr;
};

using RequestId = uint64_t;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Short name for messages and logs: "inproc", "shm", "tcp".
  virtual std::string_view name() const = 0;

  virtual RequestId isend(int peer, const void* data, size_t bytes) = 0;
  // reducer == nullptr: plain receive into dst. The Reducer is copied: it need
  // not outlive the call (its `local` buffer must, like dst).
  virtual RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer) = 0;

  // Appends completed request ids to `done`. Blocks until at least one request
  // completes or `deadline` passes.
  virtual void wait_some(std::vector<RequestId>& done, Deadline deadline) = 0;

  // Makes progress without blocking; appends completed ids to `done`.
  virtual void poll(std::vector<RequestId>& done) = 0;

  // Marks this rank failed: peers waiting on it raise peer_failure. Called when
  // a collective fails locally, so that the others fail fast.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace chorus
