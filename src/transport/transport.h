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

#include <chorus/error.h>
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

  // Marks this rank failed, for `reason`, whose ErrorCode is `cause`: peers
  // waiting on it raise peer_code(cause) naming this rank and the reason.
  // Called on the thread that uses the transport, when a call fails locally or
  // the communicator is aborted, so that the others fail fast.
  virtual void abort(ErrorCode cause, const std::string& reason) = 0;

  // Thread-safe: a wait_some() in progress on another thread returns soon,
  // with or without completions, so that its caller can look at why (an
  // abort requested from another thread). A later wait_some() returns at
  // once, once.
  virtual void interrupt() = 0;
};

// What a peer raises when a rank aborted for `cause`: the cause itself where
// it is a verdict on the whole job (aborted, mismatch), peer_failure otherwise.
inline ErrorCode peer_code(ErrorCode cause) {
  return cause == ErrorCode::aborted || cause == ErrorCode::mismatch ? cause
                                                                     : ErrorCode::peer_failure;
}

// "aborted" or "failed", as a peer's message says what the rank did.
inline std::string_view peer_verb(ErrorCode cause) {
  return cause == ErrorCode::aborted ? "aborted" : "failed";
}

}  // namespace chorus
