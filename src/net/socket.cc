#include "net/socket.h"

#include "core/check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace chorus {

std::string errno_text(int err) {
  return str_cat(std::strerror(err), " (errno ", err, ")");
}

namespace {

// Waits until fd is ready for `events` or the deadline passes; false on timeout.
bool wait_ready(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) fail(ErrorCode::system, "poll: ", errno_text(errno));
  }
}

}  // namespace

std::string Endpoint::describe() const {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof buf);
  return str_cat(buf, ":", ntohs(addr.sin_port));
}

Endpoint resolve(const std::string& host, uint16_t port, const std::string& what) {
  Endpoint ep;
  ep.addr.sin_family = AF_INET;
  ep.addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &ep.addr.sin_addr) == 1) return ep;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    fail(ErrorCode::invalid_argument, what, ": cannot resolve host '", host,
         "': ", ::gai_strerror(rc));
  ep.addr.sin_addr = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return ep;
}

std::pair<std::string, uint16_t> split_host_port(const std::string& text, const std::string& what) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    fail(ErrorCode::invalid_argument, what, ": '", text, "' is not host:port");
  const std::string port_text = text.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    fail(ErrorCode::invalid_argument, what, ": port '", port_text, "' in '", text,
         "' is not a number from 0 to 65535");
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

Fd listen_on(const Endpoint& ep, const std::string& what) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) fail(ErrorCode::system, what, ": socket: ", errno_text(errno));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&ep.addr), sizeof ep.addr) != 0)
    fail(ErrorCode::system, what, ": cannot listen on ", ep.describe(), ": ", errno_text(errno));
  if (::listen(fd.get(), SOMAXCONN) != 0)
    fail(ErrorCode::system, what, ": listen on ", ep.describe(), ": ", errno_text(errno));
  set_nonblocking(fd.get());
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    fail(ErrorCode::system, "getsockname: ", errno_text(errno));
  return ntohs(a.sin_port);
}

std::string local_address_towards(const Endpoint& ep) {
  // A connected UDP socket picks the source address of the route without
  // sending anything.
  Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) fail(ErrorCode::system, "socket: ", errno_text(errno));
  Endpoint target = ep;
  if (target.addr.sin_port == 0) target.addr.sin_port = htons(9);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&target.addr), sizeof target.addr) != 0)
    return "127.0.0.1";
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return "127.0.0.1";
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return buf;
}

Fd connect_with_retry(const Endpoint& ep, Deadline deadline, const std::string& what) {
  auto backoff = std::chrono::milliseconds(2);
  std::string last = "no attempt";
  while (true) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) fail(ErrorCode::system, what, ": socket: ", errno_text(errno));
    // Non-blocking connect so that an unreachable host cannot outlast the deadline.
    set_nonblocking(fd.get());
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&ep.addr), sizeof ep.addr);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (!wait_ready(fd.get(), POLLOUT, deadline)) {
        last = "connect did not complete";
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      const int flags = ::fcntl(fd.get(), F_GETFL);
      ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      set_nodelay(fd.get());
      return fd;
    }
    if (err != ETIMEDOUT) last = errno_text(err);
    if (Clock::now() + backoff >= deadline)
      fail(ErrorCode::timeout, what, ": cannot connect to ", ep.describe(),
           " before the deadline (", last, ")");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    fail(ErrorCode::system, "fcntl(O_NONBLOCK): ", errno_text(errno));
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int poll_timeout_ms(Deadline deadline) {
  const auto now = Clock::now();
  if (deadline <= now) return 0;
  // Round up so that a wait never returns just before its deadline.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

bool write_all(int fd, const void* data, size_t bytes, Deadline deadline, const std::string& what,
               std::string& error) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLOUT, deadline)) fail(ErrorCode::timeout, what, ": send timed out");
      continue;
    }
    error = errno_text(errno);
    return false;
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes, Deadline deadline, const std::string& what,
              std::string& error) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      error = "connection closed by the other end";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, deadline)) fail(ErrorCode::timeout, what, ": receive timed out");
      continue;
    }
    error = errno_text(errno);
    return false;
  }
  return true;
}

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace chorus
