#include "tune/rank_exchange.h"

#include "core/check.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace chorus {

RankExchange::RankExchange(Transport& transport, Deadline deadline, std::string_view what,
                           const CallStamp& stamp)
    : transport_(transport), deadline_(deadline), what_(what), stamp_(stamp) {}

void RankExchange::timed_out(std::string_view waiting_for) const {
  fail(ErrorCode::timeout, "rank ", rank(), ": ", what_, ": timeout waiting for ", waiting_for);
}

RequestId RankExchange::post_send(int peer, const void* data, size_t bytes) {
  return transport_.isend(peer, data, bytes, stamp_);
}

RequestId RankExchange::post_recv(int peer, void* data, size_t bytes) {
  return transport_.irecv(peer, data, bytes, nullptr, stamp_);
}

void RankExchange::wait(std::vector<RequestId> ids, int peer) {
  std::vector<RequestId> done;
  while (!ids.empty()) {
    done.clear();
    transport_.wait_some(done, deadline_);
    for (RequestId d : done) std::erase(ids, d);
    if (!ids.empty() && done.empty() && expired())
      timed_out(peer < 0 ? std::string("its peers") : str_cat("peer ", peer));
  }
}

void RankExchange::send(int peer, const void* data, size_t bytes) {
  wait({post_send(peer, data, bytes)}, peer);
}

void RankExchange::recv(int peer, void* data, size_t bytes) {
  wait({post_recv(peer, data, bytes)}, peer);
}

void RankExchange::send_recv(int peer, const void* out, void* in, size_t bytes) {
  const RequestId r = post_recv(peer, in, bytes);
  wait({post_send(peer, out, bytes), r}, peer);
}

void RankExchange::allgather(const void* mine, void* all, size_t bytes) {
  auto* slots = static_cast<std::byte*>(all);
  std::copy_n(static_cast<const std::byte*>(mine), bytes,
              slots + static_cast<size_t>(rank()) * bytes);
  std::vector<RequestId> ids;
  for (int q = 0; q < size(); ++q) {
    if (q == rank()) continue;
    ids.push_back(post_recv(q, slots + static_cast<size_t>(q) * bytes, bytes));
    ids.push_back(post_send(q, mine, bytes));
  }
  wait(std::move(ids));
}

void RankExchange::agree_max(std::span<double> values) {
  const size_t bytes = values.size_bytes();
  if (size() == 1 || bytes == 0) return;
  if (rank() != 0) {
    send(0, values.data(), bytes);
    recv(0, values.data(), bytes);
    return;
  }
  std::vector<double> theirs(values.size());
  for (int peer = 1; peer < size(); ++peer) {
    recv(peer, theirs.data(), bytes);
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::max(values[i], theirs[i]);
  }
  std::vector<RequestId> sends;
  for (int peer = 1; peer < size(); ++peer) sends.push_back(post_send(peer, values.data(), bytes));
  wait(std::move(sends));
}

void RankExchange::broadcast(void* data, size_t bytes) {
  if (size() == 1) return;
  if (rank() != 0) {
    recv(0, data, bytes);
    return;
  }
  std::vector<RequestId> sends;
  for (int peer = 1; peer < size(); ++peer) sends.push_back(post_send(peer, data, bytes));
  wait(std::move(sends));
}

void RankExchange::broadcast(std::string& text) {
  if (size() == 1) return;
  uint64_t length = text.size();
  broadcast(&length, sizeof length);
  if (rank() != 0) text.assign(length, '\0');
  if (length > 0) broadcast(text.data(), length);
}

void RankExchange::barrier() {
  double x = 0;
  agree_max(std::span<double>(&x, 1));
}

void agree_max(Transport& transport, std::span<double> values, Deadline deadline) {
  RankExchange(transport, deadline).agree_max(values);
}

void broadcast_text(Transport& transport, std::string& text, Deadline deadline) {
  RankExchange(transport, deadline).broadcast(text);
}

}  // namespace chorus
