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
//   - Every message carries the CallStamp of the call that sent it, and the
//     receive it meets names the stamp of its own call. A receive that meets
//     a message with another stamp throws StampMismatch before any byte of it
//     lands (core/call_stamp.h).
//   - begin_call() runs at the start of every call: it publishes which call
//     this rank is in (for the stall reports of peers that wait for it) and
//     throws the failure of any peer that has aborted, so that a rank learns
//     of a failure at its next call at the latest, even from a peer it does
//     not exchange messages with.
//   - A rank that waits without progress compares its call with the calls
//     its peers published, and throws StampMismatch when one is in the same
//     collective call with another stamp (calls_disagree).
#pragma once

#include "core/call_stamp.h"
#include "core/deadline.h"
#include "core/stream_copy.h"
#include "core/transport_kind.h"

#include <chorus/error.h>
#include <chorus/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class RecoveryLink;  // transport/recovery_link.h

// Applies dst[i] = local[i] (+) in[i] for `count` elements of one dtype and op.
// local may equal dst. Never the avg division: that is a final pass.
struct Reducer {
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  const void* local = nullptr;
};

using RequestId = uint64_t;

// A message met a receive of another call. Thrown by the receiving transport;
// the communicator words it with the algorithms' names (api/).
class StampMismatch : public Error {
 public:
  StampMismatch(int receiver, int sender, const CallStamp& expected, const CallStamp& sent);
  int rank;          // the receiving rank
  int peer;          // the sender
  CallStamp mine;    // the receive's call
  CallStamp theirs;  // the message's call
};

// A peer aborted or failed and told this rank why. `origin` is the peer's own
// reason, unchanged: a rank that passes the failure on passes `origin`, so
// that every rank names the rank where it began, not the neighbour that
// brought the news.
class PeerAborted : public Error {
 public:
  PeerAborted(ErrorCode code, const std::string& message, std::string origin_reason)
      : Error(code, message), origin(std::move(origin_reason)) {}
  std::string origin;
};

// Whether two ranks' current calls show that they disagree: both in
// collective call k, with different stamps. (A waiting rank compares its own
// call with what its peers published: calls that send nothing the other
// side receives -- two roots of one broadcast, two algorithms whose first
// steps pair different ranks -- would otherwise only deadlock.)
inline bool calls_disagree(const CallStamp& mine, const CallStamp& theirs) {
  return mine.kind != 0 && theirs.kind != 0 && !mine.point_to_point() && !theirs.point_to_point() &&
         mine.seq == theirs.seq && mine != theirs;
}

// What this rank can tell of a peer when a call stalls (stall reports).
struct PeerProgress {
  int rank = -1;
  // The peer showed a sign of life just now (it answered, or it is polling
  // its transport).
  bool responsive = false;
  uint32_t collectives_entered = 0;  // the number of its last collective call
  CallStamp last;                    // its last call (seq 0: none yet)
  std::string note;                  // "exited", "silent for 4.8 s", ...
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Which transport this is (core/transport_kind.h).
  virtual TransportKind kind() const = 0;
  // Its short name, for messages and logs: "inproc", "shm", "tcp", "shm+tcp".
  std::string_view name() const { return to_string(kind()); }
  // Whether every rank runs on this host and can map the others' memory
  // (transport/window.h): what one-sided Programs need. shm and inproc do.
  virtual bool shares_memory() const { return false; }
  // Whether this rank shares cores with other ranks of the communicator
  // (more local ranks than the cores they may use): a waiting rank then
  // hands its core over at once, since the rank it waits for may need it.
  virtual bool shares_cores() const { return false; }
  // The address this rank's peers reach it at over tcp (what it published);
  // "" where it has no tcp link. A communicator derived from this one
  // (groups/derive.cc) meets its first rank there.
  virtual std::string address() const { return {}; }
  // Throws peer_failure (or the peer's abort) when `peer` can no longer take
  // part: it exited, closed its transport or aborted. A one-sided wait, which
  // no message completes, asks this now and then. A system call at most.
  virtual void check_peer(int peer) { (void)peer; }

  // `stamp`: the call the message belongs to (the zero stamp outside calls).
  virtual RequestId isend(int peer, const void* data, size_t bytes,
                          const CallStamp& stamp = {}) = 0;
  // reducer == nullptr: plain receive into dst. The Reducer is copied: it need
  // not outlive the call (its `local` buffer must, like dst). The message
  // must carry `stamp`. `store`: how the message's bytes are written into dst
  // where this transport writes them itself (core/stream_copy.h); a kernel
  // that writes dst (tcp's recv) writes it as it does.
  virtual RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer,
                          const CallStamp& stamp = {}, WriteMode store = WriteMode::cached) = 0;

  // The stamp of the next message from `peer` when it has arrived and no
  // receive from `peer` is posted (the message the next receive from `peer`
  // meets); nullopt otherwise. Makes no progress itself: a message shows
  // once poll() or wait_some() has seen it arrive. What a receive from any
  // rank (Communicator::recv_any) looks at.
  virtual std::optional<CallStamp> waiting_message(int peer) = 0;

  // This rank enters the call `stamp`. Throws the failure of a peer that
  // aborted. Cheap: no system call on shm.
  virtual void begin_call(const CallStamp& stamp) = 0;

  // Where every peer is, for a stall report; may take until `deadline` to
  // ask the peers.
  virtual std::vector<PeerProgress> peer_progress(Deadline deadline) = 0;

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

  // Each rank's host (host_of[r], numbered from 0 in order of first rank),
  // as whoever made the transport found it from the ranks' own host
  // identities (the bootstrap, run_ranks, a split); empty where it did not
  // say, which counts as one host. The communicator's calls carry it
  // (CollectiveSpec::host_of) without another exchange.
  const std::vector<int>& host_layout() const { return host_layout_; }
  void set_host_layout(std::vector<int> host_of) { host_layout_ = std::move(host_of); }

  // Where this rank listens for Communicator::shrink's agreement, and where
  // its peers do (transport/recovery_link.h); null where whoever made the
  // transport gave it none (then shrink is refused).
  const std::shared_ptr<RecoveryLink>& recovery_link() const { return recovery_link_; }
  void set_recovery_link(std::shared_ptr<RecoveryLink> link) { recovery_link_ = std::move(link); }

 private:
  std::vector<int> host_layout_;
  std::shared_ptr<RecoveryLink> recovery_link_;
};

// What a peer raises when a rank aborted for `cause`: the cause itself where
// it is a verdict on the whole job (aborted, revoked, mismatch), peer_failure
// otherwise.
inline ErrorCode peer_code(ErrorCode cause) {
  return cause == ErrorCode::aborted || cause == ErrorCode::revoked || cause == ErrorCode::mismatch
             ? cause
             : ErrorCode::peer_failure;
}

// "aborted", "revoked" or "failed", as a peer's message says what the rank did.
inline std::string_view peer_verb(ErrorCode cause) {
  if (cause == ErrorCode::aborted) return "aborted";
  if (cause == ErrorCode::revoked) return "revoked";
  return "failed";
}

}  // namespace chorus
