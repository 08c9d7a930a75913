// TcpStore: a Store served by one TcpStoreServer over TCP, for ranks that share
// no file system. Rank 0 of a job hosts the server (at MASTER_ADDR:MASTER_PORT
// or the CHORUS_STORE address); every rank, rank 0 included, is a client.
//
// Wire protocol, version 2 (all integers little-endian; tcp_store_core.h
// holds the constants and the server's side of it):
//
// 1. Admission. On connect the server sends its hello
//      magic u32 "CHSH" | version u32 | flags u32 | server nonce 32 B
//    (flags bit 0: the server holds a secret and requires proof of it). The
//    client answers with its hello
//      magic u32 "CHSC" | version u32 | client nonce 32 B | proof 32 B
//    where proof = HMAC-SHA256(secret, "chorus store client proof v2" |
//    server nonce | client nonce), all zero for an open store. The server
//    answers like any request: status ok with its own proof
//    HMAC-SHA256(secret, "chorus store server proof v2" | server nonce |
//    client nonce) as payload (empty for an open store), or status refused
//    with the reason as text, and closes. The secret never crosses the wire;
//    the nonces make every proof single-use; proofs are compared in constant
//    time. Each side checks the other's proof, so a client also refuses a
//    server that does not hold the job's secret.
// 2. Requests, one at a time per connection:
//      request:  magic u32 "CHRS" | op u8 | key_len u32 | value_len u64 |
//                timeout_ms u64 | key bytes | value bytes
//      response: status u8 | len u64 | payload bytes
//    ops: set (key, value) -> ok; get (key, timeout) -> ok + value once the
//    key is set, or status timeout when it is not set within timeout_ms; add
//    (key, 8-byte delta) -> ok + the new value as 8 bytes, or status bad with
//    the reason when the key holds no integer; abort (reason as value) -> ok,
//    and from then on every set, get and add, those waiting included, is
//    answered status aborted with the first reason. Counters are kept as
//    decimal text, as FileStore keeps them.
//
// A client that breaks the protocol (bad magic, unknown op, a key or value
// over its cap, more unread replies queued than one largest reply) is closed
// and logged; the others go on. The caps are TcpStoreLimits.
//
// The secret proves who may use the store; it does not encrypt the traffic:
// it keeps out processes that can reach the port, not an observer of the
// network between the hosts.
#pragma once

#include "core/fd.h"
#include "core/log.h"
#include "net/socket.h"
#include "store/store.h"
#include "store/tcp_store_core.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace chorus {

// The server: one thread that multiplexes every client with poll() and feeds
// their bytes to a TcpStoreCore. Blocked gets wait on the server side, so that
// a client's get costs one round trip whenever the key is set. Destruction
// stops the thread, after sending what is queued (for at most a second), and
// closes every connection (clients then see peer_failure).
class TcpStoreServer {
 public:
  // Listens on `ep` (port 0 picks a free port, see port()). An empty `secret`
  // makes an open store: any process that reaches the port may use it.
  // Clients the server closes are logged at warn when `log_level` allows.
  explicit TcpStoreServer(const Endpoint& ep, std::string secret = "",
                          LogLevel log_level = LogLevel::warn, TcpStoreLimits limits = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }
  std::string describe() const;  // "127.0.0.1:29500"

  // The core's accounting as of the server's last loop iteration.
  TcpStoreCore::Stats stats() const;

  // Waits until at least `clients` clients have been told of the store's
  // abort (they sent it, or were answered with it) and none is still
  // connected, or `deadline`; true when so. The rank hosting the store uses it
  // after its start-up failed, so that every rank, a late one too, reads the
  // reason before the server goes away.
  bool wait_until_told(size_t clients, Deadline deadline) const;

 private:
  void run();
  void publish(const TcpStoreCore::Stats& s);

  Endpoint endpoint_;
  Fd listen_;
  Fd wake_;  // eventfd: written by the destructor to stop the thread
  uint16_t port_ = 0;
  LogLevel log_level_;
  TcpStoreCore core_;  // used by the server thread only
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  TcpStoreCore::Stats stats_;  // guarded by mu_
  std::thread thread_;
};

// A client. Connects with retries until `connect_deadline` (the server may
// still be starting), then proves `secret` (empty: expects an open store).
// Admission failures are immediate Error(mismatch)s naming the store, e.g.
// "store at 10.0.0.1:29500 refused this client: wrong CHORUS_STORE_SECRET".
// Thread-safe: requests are serialized on one connection.
class TcpStore final : public Store {
 public:
  TcpStore(const Endpoint& server, Deadline connect_deadline, const std::string& secret = "");

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void abort(const std::string& reason) override;

 private:
  void admit(const std::string& secret, Deadline deadline);
  // Sends one request and returns the response payload; throws on timeout or
  // when the server is gone.
  std::vector<uint8_t> request(uint8_t op, const std::string& key, const void* value,
                               size_t value_bytes, Deadline deadline);

  std::string address_;  // "host:port"
  std::string where_;    // "TcpStore host:port"
  std::mutex mu_;
  Fd fd_;
};

}  // namespace chorus
