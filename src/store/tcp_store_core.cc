#include "store/tcp_store_core.h"

#include "core/check.h"
#include "net/socket.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace chorus {

using namespace store_wire;

namespace {

constexpr std::string_view kClientLabel = "chorus store client proof v2";
constexpr std::string_view kServerLabel = "chorus store server proof v2";
// Buffers that held a large message give their memory back once empty.
constexpr size_t kShrinkAbove = size_t{1} << 20;

Mac proof(std::string_view label, std::string_view secret, const Nonce& server,
          const Nonce& client) {
  std::vector<uint8_t> msg(label.begin(), label.end());
  msg.insert(msg.end(), server.begin(), server.end());
  msg.insert(msg.end(), client.begin(), client.end());
  return hmac_sha256(secret, msg);
}

// A value as it may appear in a message: at most 64 bytes, printable ASCII
// kept, the rest as \xNN.
std::string quoted(std::span<const uint8_t> v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "'";
  for (size_t i = 0; i < v.size() && i < 64; ++i) {
    const uint8_t b = v[i];
    if (b >= 0x20 && b < 0x7f && b != '\'' && b != '\\') {
      s += static_cast<char>(b);
    } else {
      s += "\\x";
      s += kHex[b >> 4];
      s += kHex[b & 15];
    }
  }
  if (v.size() > 64) s += "...";
  return s + "'";
}

// A counter as add() keeps it: optional '-' and decimal digits (empty = 0).
bool parse_counter(const std::vector<uint8_t>& v, int64_t& out) {
  out = 0;
  if (v.empty()) return true;
  const char* b = reinterpret_cast<const char*>(v.data());
  const auto [end, ec] = std::from_chars(b, b + v.size(), out);
  return ec == std::errc() && end == b + v.size();
}

}  // namespace

std::vector<uint8_t> store_wire::encode_request(uint8_t op, std::string_view key,
                                                std::span<const uint8_t> value,
                                                uint64_t timeout_ms) {
  std::vector<uint8_t> r(kRequestHeaderBytes + key.size() + value.size());
  put_u32(r.data(), kRequestMagic);
  r[4] = op;
  put_u32(r.data() + 5, static_cast<uint32_t>(key.size()));
  put_u64(r.data() + 9, value.size());
  put_u64(r.data() + 17, timeout_ms);
  std::copy(key.begin(), key.end(), r.begin() + kRequestHeaderBytes);
  std::copy(value.begin(), value.end(),
            r.begin() + static_cast<std::ptrdiff_t>(kRequestHeaderBytes + key.size()));
  return r;
}

Mac store_wire::client_proof(std::string_view secret, const Nonce& server, const Nonce& client) {
  return proof(kClientLabel, secret, server, client);
}

Mac store_wire::server_proof(std::string_view secret, const Nonce& server, const Nonce& client) {
  return proof(kServerLabel, secret, server, client);
}

TcpStoreCore::TcpStoreCore(std::string secret, TcpStoreLimits limits)
    : secret_(std::move(secret)), limits_(limits) {}

TcpStoreCore::ClientId TcpStoreCore::connect(const Nonce& nonce, Deadline auth_deadline) {
  const ClientId id = next_id_++;
  Client& c = clients_[id];
  c.nonce = nonce;
  c.auth_deadline = auth_deadline;
  uint8_t hello[kServerHelloBytes];
  put_u32(hello, kServerHelloMagic);
  put_u32(hello + 4, kProtocolVersion);
  put_u32(hello + 8, secret_.empty() ? 0 : kFlagSecretRequired);
  std::memcpy(hello + 12, nonce.data(), kNonceBytes);
  c.out.assign(hello, hello + kServerHelloBytes);
  peak_queued_ = std::max(peak_queued_, c.out.size());
  return id;
}

TcpStoreCore::Outcome TcpStoreCore::receive(ClientId id, std::span<const uint8_t> bytes,
                                            Deadline now) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return {true, "no such client"};
  Client& c = it->second;
  if (!c.closing) {
    c.in.insert(c.in.end(), bytes.begin(), bytes.end());
    handle(id, c, now);
    run_ready(now);
  }
  return {c.closing, c.close_reason};
}

void TcpStoreCore::run_ready(Deadline now) {
  // Clients that a set or an expiry released from a get may have requests
  // buffered behind it; handle them here, one after another, not recursively.
  while (!ready_.empty()) {
    const ClientId id = ready_.back();
    ready_.pop_back();
    auto it = clients_.find(id);
    if (it != clients_.end() && !it->second.closing && !it->second.waiting_key)
      handle(id, it->second, now);
  }
}

size_t TcpStoreCore::max_request_bytes() const {
  return kRequestHeaderBytes + limits_.max_key_bytes + limits_.max_value_bytes;
}

void TcpStoreCore::handle(ClientId id, Client& c, Deadline now) {
  size_t pos = 0;
  while (!c.closing && !c.waiting_key) {
    const size_t avail = c.in.size() - pos;
    const uint8_t* p = c.in.data() + pos;
    if (!c.admitted) {
      if (avail < kClientHelloBytes) break;
      pos += kClientHelloBytes;
      handle_hello(id, c, p);
      continue;
    }
    if (avail < kRequestHeaderBytes) break;
    const uint32_t magic = get_u32(p);
    const uint8_t op = p[4];
    const size_t key_len = get_u32(p + 5);
    const uint64_t value_len = get_u64(p + 9);
    const uint64_t timeout_ms = get_u64(p + 17);
    std::string bad;
    if (magic != kRequestMagic)
      bad = "a request with a bad magic number";
    else if (op < op_set || op > op_abort)
      bad = str_cat("unknown op ", int{op});
    else if (key_len > limits_.max_key_bytes)
      bad = str_cat("a key of ", key_len, " bytes, over the cap of ", limits_.max_key_bytes);
    else if (value_len > limits_.max_value_bytes)
      bad = str_cat("a value of ", value_len, " bytes, over the cap of ", limits_.max_value_bytes);
    else if (op == op_get && value_len != 0)
      bad = "a get with a value";
    else if (op == op_add && value_len != 8)
      bad = "an add whose delta is not 8 bytes";
    else if (op == op_abort && value_len > kMaxAbortReasonBytes)
      bad = str_cat("an abort reason over ", kMaxAbortReasonBytes, " bytes");
    if (!bad.empty()) {
      close(id, c, str_cat("sent ", bad), false);
      break;
    }
    const size_t total = kRequestHeaderBytes + key_len + static_cast<size_t>(value_len);
    if (avail < total) break;
    std::string key(reinterpret_cast<const char*>(p + kRequestHeaderBytes), key_len);
    const std::span<const uint8_t> value(p + kRequestHeaderBytes + key_len,
                                         static_cast<size_t>(value_len));
    pos += total;
    handle_request(id, c, op, std::move(key), value, timeout_ms, now);
  }
  if (c.closing) return;  // close() released the buffers
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  if (c.in.empty() && c.in.capacity() > kShrinkAbove) std::vector<uint8_t>().swap(c.in);
  // Unhandled input beyond one whole request: requests sent behind a get that
  // waits. A client that follows the protocol never does this.
  if (c.in.size() > max_request_bytes())
    close(id, c,
          str_cat("sent ", c.in.size(), " bytes the server cannot handle yet (over the cap of ",
                  max_request_bytes(), ")"),
          false);
}

void TcpStoreCore::handle_hello(ClientId id, Client& c, const uint8_t* h) {
  const uint32_t magic = get_u32(h);
  const uint32_t version = get_u32(h + 4);
  if (magic != kClientHelloMagic) {
    close(id, c, "is not a chorus store client (bad hello)", false);
    return;
  }
  if (version != kProtocolVersion) {
    respond_text(id, c, status_refused,
                 str_cat("protocol version ", version, ", the server speaks ", kProtocolVersion));
    close(id, c, str_cat("refused a client of protocol version ", version), true);
    return;
  }
  Nonce client_nonce{};
  Mac presented{};
  std::memcpy(client_nonce.data(), h + 8, kNonceBytes);
  std::memcpy(presented.data(), h + 8 + kNonceBytes, kMacBytes);
  if (secret_.empty()) {
    c.admitted = true;
    ++admitted_count_;
    respond(id, c, status_ok, {});
    return;
  }
  if (!equal_in_constant_time(presented, client_proof(secret_, c.nonce, client_nonce))) {
    respond_text(id, c, status_refused, "wrong CHORUS_STORE_SECRET");
    close(id, c, "refused a client: wrong CHORUS_STORE_SECRET", true);
    return;
  }
  c.admitted = true;
  ++admitted_count_;
  respond(id, c, status_ok, server_proof(secret_, c.nonce, client_nonce));
}

void TcpStoreCore::handle_request(ClientId id, Client& c, uint8_t op, std::string key,
                                  std::span<const uint8_t> value, uint64_t timeout_ms,
                                  Deadline now) {
  if (aborted_ && op != op_abort) {
    tell_aborted(id, c);
    return;
  }
  switch (op) {
    case op_set: {
      if (!reserve(id, c, key, value.size())) return;
      data_[key].assign(value.begin(), value.end());
      respond(id, c, status_ok, {});
      wake_waiters(key);
      return;
    }
    case op_get: {
      auto it = data_.find(key);
      if (it != data_.end()) {
        respond(id, c, status_ok, it->second);
        return;
      }
      c.waiting_key = std::move(key);
      // Saturating: a timeout too long for the clock (CHORUS_TIMEOUT=inf
      // sends about 2^63 ns) waits without a deadline.
      const auto ms = std::min<uint64_t>(timeout_ms, std::chrono::milliseconds::max().count());
      c.waiting_until = deadline_after(std::chrono::milliseconds(static_cast<int64_t>(ms)), now);
      return;
    }
    case op_add: {
      int64_t v = 0;
      auto it = data_.find(key);
      if (it != data_.end() && !parse_counter(it->second, v)) {
        respond_text(id, c, status_bad,
                     str_cat("add on key '", key, "', which holds ", quoted(it->second),
                             ", not an integer"));
        return;
      }
      const auto delta = static_cast<int64_t>(get_u64(value.data()));
      if (__builtin_add_overflow(v, delta, &v)) {
        respond_text(id, c, status_bad,
                     str_cat("add of ", delta, " on key '", key, "' overflows 64 bits"));
        return;
      }
      const std::string text = std::to_string(v);
      if (!reserve(id, c, key, text.size())) return;
      data_[key].assign(text.begin(), text.end());
      uint8_t reply[8];
      put_u64(reply, static_cast<uint64_t>(v));
      respond(id, c, status_ok, reply);
      wake_waiters(key);
      return;
    }
    case op_abort: {
      if (!aborted_) {
        aborted_ = std::string(value.begin(), value.end());
        for (auto& [other_id, other] : clients_) {
          if (other.closing || !other.waiting_key) continue;
          other.waiting_key.reset();
          tell_aborted(other_id, other);
          ready_.push_back(other_id);
        }
      }
      if (!c.told_of_abort) {
        c.told_of_abort = true;
        ++told_count_;
      }
      respond(id, c, status_ok, {});
      return;
    }
    default:
      return;  // validated by handle()
  }
}

bool TcpStoreCore::reserve(ClientId id, Client& c, const std::string& key, size_t value_bytes) {
  auto it = data_.find(key);
  const size_t before = it == data_.end() ? 0 : key.size() + it->second.size();
  const size_t after = stored_bytes_ - before + key.size() + value_bytes;
  if (after > limits_.max_stored_bytes) {
    close(id, c,
          str_cat("would make the store hold ", after, " bytes (key '", key, "'), over the cap of ",
                  limits_.max_stored_bytes),
          false);
    return false;
  }
  stored_bytes_ = after;
  return true;
}

void TcpStoreCore::respond(ClientId id, Client& c, uint8_t status,
                           std::span<const uint8_t> payload) {
  if (c.closing) return;
  const size_t bytes = kResponseHeaderBytes + payload.size();
  if (queued(c) + bytes > limits_.max_queued_reply_bytes) {
    close(
        id, c,
        str_cat("did not read its replies: ", queued(c) + bytes,
                " bytes would be queued for it, over the cap of ", limits_.max_queued_reply_bytes),
        false);
    return;
  }
  // Release what was sent: all of it, or the sent bytes once they are as
  // many as the queued ones (moving those costs no more than sending them
  // did). A client that keeps reading all but the last bytes of its replies
  // thus holds at most twice the cap, not every reply it was ever sent.
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  } else if (c.out_sent >= queued(c)) {
    c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_sent));
    c.out_sent = 0;
  }
  uint8_t h[kResponseHeaderBytes];
  h[0] = status;
  put_u64(h + 1, payload.size());
  c.out.insert(c.out.end(), h, h + kResponseHeaderBytes);
  c.out.insert(c.out.end(), payload.begin(), payload.end());
  peak_queued_ = std::max(peak_queued_, queued(c));
}

void TcpStoreCore::respond_text(ClientId id, Client& c, uint8_t status, const std::string& text) {
  respond(id, c, status,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

void TcpStoreCore::tell_aborted(ClientId id, Client& c) {
  respond_text(id, c, status_aborted, *aborted_);
  if (!c.told_of_abort) {
    c.told_of_abort = true;
    ++told_count_;
  }
}

void TcpStoreCore::close(ClientId id, Client& c, std::string reason, bool keep_output) {
  if (c.closing) return;
  c.closing = true;
  c.close_reason = reason;
  c.waiting_key.reset();
  std::vector<uint8_t>().swap(c.in);
  if (!keep_output) {
    std::vector<uint8_t>().swap(c.out);
    c.out_sent = 0;
  }
  closed_.emplace_back(id, std::move(reason));
  ++closed_count_;
}

void TcpStoreCore::wake_waiters(const std::string& key) {
  const std::vector<uint8_t>& value = data_[key];
  for (auto& [id, c] : clients_) {
    if (c.closing || !c.waiting_key || *c.waiting_key != key) continue;
    c.waiting_key.reset();
    respond(id, c, status_ok, value);
    ready_.push_back(id);
  }
}

std::span<const uint8_t> TcpStoreCore::output(ClientId id) const {
  auto it = clients_.find(id);
  if (it == clients_.end()) return {};
  const Client& c = it->second;
  return std::span<const uint8_t>(c.out).subspan(c.out_sent);
}

void TcpStoreCore::sent(ClientId id, size_t bytes) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  Client& c = it->second;
  c.out_sent += std::min(bytes, queued(c));
  if (c.out_sent == c.out.size()) {
    c.out_sent = 0;
    if (c.out.capacity() > kShrinkAbove)
      std::vector<uint8_t>().swap(c.out);
    else
      c.out.clear();
  }
}

std::vector<uint8_t> TcpStoreCore::take_output(ClientId id) {
  const auto out = output(id);
  std::vector<uint8_t> copy(out.begin(), out.end());
  sent(id, copy.size());
  return copy;
}

bool TcpStoreCore::wants_input(ClientId id) const {
  auto it = clients_.find(id);
  return it != clients_.end() && !it->second.closing && !it->second.waiting_key;
}

std::vector<std::pair<TcpStoreCore::ClientId, std::string>> TcpStoreCore::take_closed() {
  return std::exchange(closed_, {});
}

void TcpStoreCore::disconnect(ClientId id) {
  clients_.erase(id);
}

std::optional<Deadline> TcpStoreCore::expire(Deadline now) {
  std::optional<Deadline> next;
  const auto nearer = [&](Deadline d) {
    if (!next || d < *next) next = d;
  };
  for (auto& [id, c] : clients_) {
    if (c.closing) continue;
    if (!c.admitted) {
      if (c.auth_deadline <= now)
        close(id, c, "did not complete its hello in time", false);
      else
        nearer(c.auth_deadline);
      continue;
    }
    if (!c.waiting_key) continue;
    if (c.waiting_until <= now) {
      c.waiting_key.reset();
      respond(id, c, status_timeout, {});
      ready_.push_back(id);
    } else {
      nearer(c.waiting_until);
    }
  }
  run_ready(now);
  // Handling released gets may have started new ones.
  for (const auto& [id, c] : clients_)
    if (!c.closing && c.waiting_key) nearer(c.waiting_until);
  return next;
}

TcpStoreCore::Stats TcpStoreCore::stats() const {
  Stats s;
  s.clients = clients_.size();
  s.closed = closed_count_;
  s.admitted = admitted_count_;
  s.told_of_abort = told_count_;
  s.peak_client_queued_bytes = peak_queued_;
  s.stored_bytes = stored_bytes_;
  for (const auto& [id, c] : clients_) {
    s.queued_bytes += queued(c);
    s.buffered_request_bytes += c.in.size();
  }
  return s;
}

size_t TcpStoreCore::queued_bytes(ClientId id) const {
  auto it = clients_.find(id);
  return it == clients_.end() ? 0 : queued(it->second);
}

size_t TcpStoreCore::held_bytes(ClientId id) const {
  auto it = clients_.find(id);
  return it == clients_.end() ? 0 : it->second.in.size() + it->second.out.size();
}

}  // namespace chorus
