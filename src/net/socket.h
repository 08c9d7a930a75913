// Helpers over POSIX TCP sockets, shared by the tcp transport and the TcpStore:
// name resolution, listening, connecting with a deadline, and blocking
// reads/writes bounded by a deadline (for bootstrap traffic; the transport's
// data path is non-blocking). Sockets are owned by core/fd.h's Fd.
#pragma once

#include "core/deadline.h"
#include "core/fd.h"

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace chorus {

// An IPv4 endpoint.
struct Endpoint {
  sockaddr_in addr{};
  std::string describe() const;  // "127.0.0.1:2950"
};

// Resolves host (name or dotted quad) and port; throws Error(invalid_argument)
// naming `what` when the name does not resolve.
Endpoint resolve(const std::string& host, uint16_t port, const std::string& what);

// Splits "host:port"; throws Error(invalid_argument) naming `what`.
std::pair<std::string, uint16_t> split_host_port(const std::string& text, const std::string& what);

// A listening socket bound to `ep` (port 0 picks a free one), non-blocking.
Fd listen_on(const Endpoint& ep, const std::string& what);
// Port a bound socket listens on.
uint16_t local_port(int fd);
// Local IPv4 address that routes towards `ep` (no packet is sent).
std::string local_address_towards(const Endpoint& ep);

// Connects a blocking socket, retrying refused connections every few
// milliseconds until `deadline` (the listener may not be up yet). Throws
// Error(timeout) naming `what` when the deadline passes.
Fd connect_with_retry(const Endpoint& ep, Deadline deadline, const std::string& what);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Blocking transfers bounded by a deadline. They return false on EOF or a
// connection error (with `error` set to a description), throw Error(timeout)
// naming `what` when the deadline passes.
bool write_all(int fd, const void* data, size_t bytes, Deadline deadline, const std::string& what,
               std::string& error);
bool read_all(int fd, void* data, size_t bytes, Deadline deadline, const std::string& what,
              std::string& error);

// strerror(err) with the number: "Connection refused (errno 111)".
std::string errno_text(int err);

// Milliseconds from now to `deadline`, clamped to [0, INT_MAX] for poll().
int poll_timeout_ms(Deadline deadline);

// Fixed-width little-endian encoding of integers for wire headers.
void put_u32(uint8_t* p, uint32_t v);
void put_u64(uint8_t* p, uint64_t v);
uint32_t get_u32(const uint8_t* p);
uint64_t get_u64(const uint8_t* p);

}  // namespace chorus
