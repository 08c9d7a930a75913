// The TcpStore server's side of the protocol, without sockets, clock or
// randomness: bytes received from a client go in, reply bytes (for it and for
// clients whose gets it wakes) and the decision to close a client come out.
// TcpStoreServer (tcp_store.h) drives it from its poll loop; a fuzzer or a
// test drives it directly:
//
//   TcpStoreCore core("secret");                    // "" = open store
//   const auto id = core.connect(nonce, now + 10s); // queues the server hello
//   core.take_output(id);                           // the 44-byte hello
//   auto r = core.receive(id, bytes, now);          // client hello, requests
//   std::vector<uint8_t> reply = core.take_output(id);
//   if (r.close) core.disconnect(id);               // refused, malformed, over a cap
//
// The wire format is in tcp_store.h. Caps (TcpStoreLimits) bound what one
// client can make the server hold: its key, its value, the unread request
// bytes it has sent, the reply bytes queued for it, and the store's total; a
// client over one is closed and the others go on.
#pragma once

#include "core/deadline.h"
#include "store/store_auth.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

namespace store_wire {

inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr uint32_t kServerHelloMagic = 0x48534843;  // "CHSH"
inline constexpr uint32_t kClientHelloMagic = 0x43534843;  // "CHSC"
inline constexpr uint32_t kRequestMagic = 0x53524843;      // "CHRS"
// server hello: magic u32 | version u32 | flags u32 | server nonce
inline constexpr size_t kServerHelloBytes = 4 + 4 + 4 + kNonceBytes;
// client hello: magic u32 | version u32 | client nonce | proof
inline constexpr size_t kClientHelloBytes = 4 + 4 + kNonceBytes + kMacBytes;
// request: magic u32 | op u8 | key_len u32 | value_len u64 | timeout_ms u64
inline constexpr size_t kRequestHeaderBytes = 4 + 1 + 4 + 8 + 8;
// response: status u8 | len u64
inline constexpr size_t kResponseHeaderBytes = 1 + 8;
inline constexpr uint32_t kFlagSecretRequired = 1;

enum Op : uint8_t { op_set = 1, op_get = 2, op_add = 3, op_abort = 4 };
enum Status : uint8_t {
  status_ok = 0,
  status_timeout = 1,  // a get's key was not set within its timeout
  status_bad = 2,      // payload: why (e.g. add on a value that is not an integer)
  status_aborted = 3,  // payload: the reason a rank aborted the store with
  status_refused = 4,  // payload: why the client was not admitted; then closed
};

// The proofs: HMAC-SHA256(secret, label | server nonce | client nonce), with a
// different label per direction so that one side's proof is never the other's.
Mac client_proof(std::string_view secret, const Nonce& server, const Nonce& client);
Mac server_proof(std::string_view secret, const Nonce& server, const Nonce& client);

// At most this many bytes of an abort reason are kept.
inline constexpr size_t kMaxAbortReasonBytes = 4096;

// One request as the client sends it: the header, then the key and the value.
std::vector<uint8_t> encode_request(uint8_t op, std::string_view key,
                                    std::span<const uint8_t> value, uint64_t timeout_ms);

}  // namespace store_wire

// What one client may make the server hold. Each cap has its reason.
struct TcpStoreLimits {
  // chorus's own keys are short paths ("chorus/comm3/net/tcp/addr/1023"); 4 KiB
  // leaves room for any user prefix.
  size_t max_key_bytes = 4096;
  // chorus's values are host ids, addresses, tokens: bytes. 64 MiB bounds one
  // message while leaving the Store API room for larger blobs.
  size_t max_value_bytes = size_t{64} << 20;
  // A client that follows the protocol has one request in flight, so it never
  // has more than one reply queued; one reply of the largest value is allowed.
  // A client that pipelines requests without reading the replies is closed
  // here, instead of making the server copy the value once per request.
  size_t max_queued_reply_bytes = (size_t{64} << 20) + store_wire::kResponseHeaderBytes;
  // Everything stored (keys and values). A job stores kilobytes per rank;
  // 1 GiB is far above any job and far below the host's memory.
  size_t max_stored_bytes = size_t{1} << 30;
};

class TcpStoreCore {
 public:
  using ClientId = uint64_t;

  // Whether a client must be closed after what it just sent (any reply
  // already queued, e.g. a refusal, is still sent first), and why.
  struct Outcome {
    bool close = false;
    std::string reason;
  };

  // For tests and logs.
  struct Stats {
    size_t clients = 0;                   // connected and not yet disconnected
    size_t admitted = 0;                  // clients ever admitted
    size_t told_of_abort = 0;             // clients that sent the abort or were answered aborted
    size_t closed = 0;                    // clients closed by the server (any reason)
    size_t queued_bytes = 0;              // reply bytes queued over all clients
    size_t peak_client_queued_bytes = 0;  // the most ever queued for one client
    size_t buffered_request_bytes = 0;    // received, not yet handled, over all clients
    size_t stored_bytes = 0;              // keys and values held
  };

  // `secret` empty: an open store (a client still sends its hello, with an
  // all-zero proof).
  explicit TcpStoreCore(std::string secret, TcpStoreLimits limits = {});

  // A new connection. Queues the server hello carrying `nonce` (fresh random
  // bytes: the socket server draws them); the client must be admitted by
  // `auth_deadline` or expire() closes it.
  ClientId connect(const Nonce& nonce, Deadline auth_deadline);

  // Feeds bytes received from `id` (any split: partial messages wait for the
  // rest): first its hello (admitted, or refused with a status_refused reply),
  // then requests, each handled in order, until one blocks (a get of a key
  // not set yet) or the input runs out. `now` dates the gets' deadlines.
  // Replies are queued for `id` and, when a set wakes them, for other
  // clients. A malformed message or a cap exceeded closes the client (its
  // queued replies are dropped); unknown or closed ids are ignored.
  Outcome receive(ClientId id, std::span<const uint8_t> bytes, Deadline now);

  // Reply bytes queued for `id`, not yet sent; sent(id, n) removes the first
  // n of them; take_output() both.
  std::span<const uint8_t> output(ClientId id) const;
  void sent(ClientId id, size_t bytes);
  std::vector<uint8_t> take_output(ClientId id);

  // False while `id` waits on a get or is closing: the socket server then
  // leaves what it sends in the kernel.
  bool wants_input(ClientId id) const;

  // Clients the server decided to close since the last call (from receive()
  // of any client, or expire()), with the reason; each once.
  std::vector<std::pair<ClientId, std::string>> take_closed();

  // The connection is gone: forget the client.
  void disconnect(ClientId id);

  // Answers gets whose timeout passed (status_timeout) and closes clients not
  // admitted by their deadline; returns the nearest deadline still pending.
  std::optional<Deadline> expire(Deadline now);

  Stats stats() const;
  // Reply bytes queued for `id`, not yet sent.
  size_t queued_bytes(ClientId id) const;
  // What the core holds for `id`: its request bytes not yet handled, and its
  // reply buffer (queued bytes and sent ones not yet released). At most one
  // request (or hello) and twice max_queued_reply_bytes.
  size_t held_bytes(ClientId id) const;
  bool aborted() const { return aborted_.has_value(); }

 private:
  struct Client {
    Nonce nonce{};
    bool admitted = false;
    bool closing = false;
    bool told_of_abort = false;
    std::string close_reason;
    Deadline auth_deadline{};
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_sent = 0;
    std::optional<std::string> waiting_key;  // a get blocked on this key
    Deadline waiting_until{};
  };

  // Handles the complete messages buffered for c, in order.
  void handle(ClientId id, Client& c, Deadline now);
  void handle_hello(ClientId id, Client& c, const uint8_t* h);
  void handle_request(ClientId id, Client& c, uint8_t op, std::string key,
                      std::span<const uint8_t> value, uint64_t timeout_ms, Deadline now);
  // Handles the clients a set, an abort or an expiry released from a get.
  void run_ready(Deadline now);
  // Accounts for key = value_bytes in the store's total, or closes c when
  // that would pass the cap (false).
  bool reserve(ClientId id, Client& c, const std::string& key, size_t value_bytes);
  size_t max_request_bytes() const;
  void respond(ClientId id, Client& c, uint8_t status, std::span<const uint8_t> payload);
  void respond_text(ClientId id, Client& c, uint8_t status, const std::string& text);
  void close(ClientId id, Client& c, std::string reason, bool keep_output);
  // Answers c with the abort's reason (and counts it as told).
  void tell_aborted(ClientId id, Client& c);
  void wake_waiters(const std::string& key);
  size_t queued(const Client& c) const { return c.out.size() - c.out_sent; }

  std::string secret_;
  TcpStoreLimits limits_;
  std::map<std::string, std::vector<uint8_t>> data_;
  std::map<ClientId, Client> clients_;
  std::vector<std::pair<ClientId, std::string>> closed_;
  std::vector<ClientId> ready_;
  std::optional<std::string> aborted_;
  ClientId next_id_ = 1;
  size_t closed_count_ = 0;
  size_t admitted_count_ = 0;
  size_t told_count_ = 0;
  size_t peak_queued_ = 0;
  size_t stored_bytes_ = 0;
};

}  // namespace chorus
