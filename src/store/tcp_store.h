// TcpStore: a Store served by one TcpStoreServer over TCP, for ranks that share
// no file system. Rank 0 of a job hosts the server (at MASTER_ADDR:MASTER_PORT
// or the CHORUS_STORE address); every rank, rank 0 included, is a client.
//
// Wire protocol (all integers little-endian), one request at a time per
// connection:
//   request:  magic u32 | op u8 | key_len u32 | value_len u64 | timeout_ms u64
//             | key bytes | value bytes
//   response: status u8 | len u64 | payload bytes
// ops: set (key, value) -> ok; get (key, timeout) -> ok + value once the key is
// set, or status timeout when it is not set within timeout_ms; add (key, 8-byte
// delta) -> ok + the new value as 8 bytes. A request that fails validation
// (bad magic, unknown op, key over 4 KiB, value over 64 MiB) closes the
// connection. Counters are kept as decimal text, as FileStore keeps them.
#pragma once

#include "core/fd.h"
#include "net/socket.h"
#include "store/store.h"

#include <mutex>
#include <thread>

namespace chorus {

// The server: one thread that multiplexes every client with poll(). Blocked
// gets wait on the server side, so that a client's get costs one round trip
// whenever the key is set. Destruction stops the thread and closes every
// connection (clients then see peer_failure).
class TcpStoreServer {
 public:
  // Listens on `ep` (port 0 picks a free port, see port()).
  explicit TcpStoreServer(const Endpoint& ep);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct State;
  void run();

  Fd listen_;
  Fd wake_;  // eventfd: written by the destructor to stop the thread
  uint16_t port_ = 0;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

// A client. Connects with retries until `connect_deadline` (the server may
// still be starting). Thread-safe: requests are serialized on one connection.
class TcpStore final : public Store {
 public:
  TcpStore(const Endpoint& server, Deadline connect_deadline);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  // Sends one request and returns the response payload; throws on timeout or
  // when the server is gone.
  std::vector<uint8_t> request(uint8_t op, const std::string& key, const void* value,
                               size_t value_bytes, Deadline deadline);

  std::string where_;
  std::mutex mu_;
  Fd fd_;
};

}  // namespace chorus
