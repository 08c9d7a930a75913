// RankExchange: the small exchanges among a transport's ranks that run outside
// any collective call, where there is no executor yet (the calibration's
// probes and their agreement, the calibration cache's text, host identities):
// a send or receive with one peer, a pair's simultaneous exchange, and
// allgather, elementwise maximum, broadcast from rank 0 and barrier over all
// ranks, of a few bytes each.
//
// Written once over the Transport so that the stamp every message carries
// (the zero stamp unless given: transport traffic outside calls) and the
// deadline every wait ends at are handled in one place: a wait that passes
// the deadline is Error(timeout) naming the rank, what the exchange is for
// and the peer it waited for,
//   "rank 2: calibration: timeout waiting for peer 0".
// Peer failures surface as the transport raises them (Transport::wait_some).
//
// Message order is the transport's FIFO per ordered pair: the collectives
// below send a fixed sequence of messages between each pair, so that any mix
// of them, called in the same order on every rank, matches up.
#pragma once

#include "core/call_stamp.h"
#include "core/deadline.h"
#include "transport/transport.h"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class RankExchange {
 public:
  // Exchanges over `transport` that end at `deadline`; `what` names them in a
  // timeout's message; every message carries `stamp`.
  RankExchange(Transport& transport, Deadline deadline, std::string_view what = "calibration",
               const CallStamp& stamp = {});

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  Transport& transport() const { return transport_; }
  Deadline deadline() const { return deadline_; }

  // Whether the deadline has passed.
  bool expired() const { return Clock::now() >= deadline_; }
  // Throws Error(timeout): "rank R: <what>: timeout waiting for <waiting_for>".
  [[noreturn]] void timed_out(std::string_view waiting_for) const;

  // Posts a send or a receive of `bytes` to or from `peer`; never blocks.
  RequestId post_send(int peer, const void* data, size_t bytes);
  RequestId post_recv(int peer, void* data, size_t bytes);
  // Waits until every request in `ids` has completed; `peer` is the one they
  // exchange with, for the timeout's message (-1: several).
  void wait(std::vector<RequestId> ids, int peer = -1);

  // One message to or from `peer`, waited for.
  void send(int peer, const void* data, size_t bytes);
  void recv(int peer, void* data, size_t bytes);
  // Both ends of a pair at once: `out` to `peer` and `bytes` from it into
  // `in`, the receive posted first; returns once both have completed.
  void send_recv(int peer, const void* out, void* in, size_t bytes);

  // The collectives: every rank calls them, in the same order.
  // Every rank's `bytes` at `mine` reach every rank: all[r * bytes ...] holds
  // rank r's (this rank's included). Each rank sends to and receives from
  // every other at once.
  void allgather(const void* mine, void* all, size_t bytes);
  // Every rank's `values` (the same length on all) become their elementwise
  // maximum over the ranks: gathered at rank 0 (peer by peer, in rank
  // order), then sent back.
  void agree_max(std::span<double> values);
  // Rank 0's `bytes` at `data` reach every rank (the same `bytes` on all).
  void broadcast(void* data, size_t bytes);
  // Rank 0's text reaches every rank, replacing theirs: its length, then
  // (when not empty) its bytes.
  void broadcast(std::string& text);
  // Returns once every rank has arrived (an agree_max of one value).
  void barrier();

 private:
  Transport& transport_;
  Deadline deadline_;
  std::string what_;
  CallStamp stamp_;
};

// RankExchange(transport, deadline).agree_max(values): every rank's `values`
// become their elementwise maximum over the ranks.
void agree_max(Transport& transport, std::span<double> values, Deadline deadline);

// RankExchange(transport, deadline).broadcast(text): rank 0's `text` reaches
// every rank (replacing theirs).
void broadcast_text(Transport& transport, std::string& text, Deadline deadline);

}  // namespace chorus
