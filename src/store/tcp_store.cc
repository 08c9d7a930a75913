#include "store/tcp_store.h"

#include "core/check.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

namespace chorus {

namespace {

constexpr uint32_t kStoreMagic = 0x53524843;  // "CHRS"
constexpr size_t kRequestHeader = 4 + 1 + 4 + 8 + 8;
constexpr size_t kResponseHeader = 1 + 8;
constexpr size_t kMaxKey = 4096;
constexpr size_t kMaxValue = size_t{64} << 20;
// The client waits this much beyond a get's own timeout for the server's
// "timeout" answer before it gives up on the server itself.
constexpr auto kResponseGrace = std::chrono::seconds(5);

enum StoreOp : uint8_t { op_set = 1, op_get = 2, op_add = 3 };
enum StoreStatus : uint8_t { status_ok = 0, status_timeout = 1, status_bad = 2 };

int64_t parse_counter(const std::vector<uint8_t>& v, bool& ok) {
  ok = true;
  if (v.empty()) return 0;
  const std::string text(v.begin(), v.end());
  char* end = nullptr;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  ok = *end == '\0';
  return x;
}

}  // namespace

// --- server -------------------------------------------------------------------

struct TcpStoreServer::State {
  struct Conn {
    Fd fd;
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_sent = 0;
    std::optional<std::string> waiting_key;  // a get blocked on this key
    Deadline waiting_until{};
  };
  std::map<std::string, std::vector<uint8_t>> data;
  std::map<int, Conn> conns;  // by fd

  static void respond(Conn& c, uint8_t status, const std::vector<uint8_t>& payload) {
    uint8_t h[kResponseHeader];
    h[0] = status;
    put_u64(h + 1, payload.size());
    c.out.insert(c.out.end(), h, h + kResponseHeader);
    c.out.insert(c.out.end(), payload.begin(), payload.end());
  }

  // Handles complete requests buffered on c; false closes the connection.
  bool handle(Conn& c) {
    while (!c.waiting_key && c.in.size() >= kRequestHeader) {
      const uint8_t* h = c.in.data();
      const uint32_t magic = get_u32(h);
      const uint8_t op = h[4];
      const size_t key_len = get_u32(h + 5);
      const uint64_t value_len = get_u64(h + 9);
      const uint64_t timeout_ms = get_u64(h + 17);
      if (magic != kStoreMagic || op < op_set || op > op_add || key_len > kMaxKey ||
          value_len > kMaxValue)
        return false;
      const size_t total = kRequestHeader + key_len + static_cast<size_t>(value_len);
      if (c.in.size() < total) return true;
      std::string key(reinterpret_cast<const char*>(h + kRequestHeader), key_len);
      std::vector<uint8_t> value(h + kRequestHeader + key_len, h + total);
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(total));
      if (op == op_set) {
        data[key] = std::move(value);
        respond(c, status_ok, {});
        wake_waiters(key);
      } else if (op == op_get) {
        auto it = data.find(key);
        if (it != data.end()) {
          respond(c, status_ok, it->second);
        } else {
          c.waiting_key = std::move(key);
          c.waiting_until = Clock::now() + std::chrono::milliseconds(timeout_ms);
        }
      } else {
        if (value.size() != 8) return false;
        bool ok = true;
        int64_t v = parse_counter(data[key], ok);
        if (!ok) {
          respond(c, status_bad, {});
          continue;
        }
        v += static_cast<int64_t>(get_u64(value.data()));
        const std::string text = std::to_string(v);
        data[key].assign(text.begin(), text.end());
        std::vector<uint8_t> reply(8);
        put_u64(reply.data(), static_cast<uint64_t>(v));
        respond(c, status_ok, reply);
        wake_waiters(key);
      }
    }
    return true;
  }

  void wake_waiters(const std::string& key) {
    for (auto& [fd, c] : conns) {
      if (c.waiting_key && *c.waiting_key == key) {
        respond(c, status_ok, data[key]);
        c.waiting_key.reset();
      }
    }
  }

  // Answers expired gets; returns the nearest pending deadline.
  std::optional<Deadline> expire(Deadline now) {
    std::optional<Deadline> next;
    for (auto& [fd, c] : conns) {
      if (!c.waiting_key) continue;
      if (c.waiting_until <= now) {
        respond(c, status_timeout, {});
        c.waiting_key.reset();
      } else if (!next || c.waiting_until < *next) {
        next = c.waiting_until;
      }
    }
    return next;
  }
};

TcpStoreServer::TcpStoreServer(const Endpoint& ep)
    : listen_(listen_on(ep, "TcpStore server")),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      port_(local_port(listen_.get())),
      state_(std::make_unique<State>()) {
  if (!wake_.valid()) fail(ErrorCode::system, "TcpStore server: eventfd: ", std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

TcpStoreServer::~TcpStoreServer() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

void TcpStoreServer::run() {
  State& s = *state_;
  std::vector<pollfd> fds;
  while (true) {
    // Requests handled between polls may have finished new gets; expire first
    // so that the poll timeout is the nearest remaining deadline.
    const auto next = s.expire(Clock::now());
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listen_.get(), POLLIN, 0});
    for (auto& [fd, c] : s.conns) {
      short ev = c.waiting_key ? 0 : POLLIN;
      if (c.out_sent < c.out.size()) ev |= POLLOUT;
      fds.push_back({fd, ev, 0});
    }
    const int timeout = next ? poll_timeout_ms(*next) : -1;
    const int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return;  // nothing sensible left to do; clients see the closed sockets
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) {
      while (true) {
        Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd.valid()) break;
        set_nodelay(fd.get());
        const int key = fd.get();
        s.conns[key].fd = std::move(fd);
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = s.conns.find(fds[i].fd);
      if (it == s.conns.end()) continue;
      State::Conn& c = it->second;
      bool alive = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t buf[65536];
        while (alive) {
          const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
          if (n > 0) {
            c.in.insert(c.in.end(), buf, buf + n);
            continue;
          }
          if (n < 0 && errno == EINTR) continue;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          alive = false;  // EOF or error: the client is gone
        }
        if (alive) alive = s.handle(c);
      }
      if (alive && c.out_sent < c.out.size()) {
        while (c.out_sent < c.out.size()) {
          const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                                   MSG_NOSIGNAL);
          if (n > 0) {
            c.out_sent += static_cast<size_t>(n);
            continue;
          }
          if (n < 0 && errno == EINTR) continue;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          alive = false;
          break;
        }
        if (c.out_sent == c.out.size()) {
          c.out.clear();
          c.out_sent = 0;
        }
      }
      if (!alive) s.conns.erase(it);
    }
  }
}

// --- client -------------------------------------------------------------------

TcpStore::TcpStore(const Endpoint& server, Deadline connect_deadline)
    : where_(str_cat("TcpStore ", server.describe())),
      fd_(connect_with_retry(server, connect_deadline, where_)) {}

std::vector<uint8_t> TcpStore::request(uint8_t op, const std::string& key, const void* value,
                                       size_t value_bytes, Deadline deadline) {
  if (key.size() > kMaxKey)
    fail(ErrorCode::invalid_argument, where_, ": key of ", key.size(), " bytes exceeds ", kMaxKey);
  if (value_bytes > kMaxValue)
    fail(ErrorCode::invalid_argument, where_, ": value of ", value_bytes, " bytes exceeds ",
         kMaxValue);
  std::lock_guard lock(mu_);
  if (!fd_.valid()) fail(ErrorCode::peer_failure, where_, ": connection to the server was lost");
  const auto now = Clock::now();
  const auto timeout_ms = deadline > now
      ? std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count()
      : 0;
  std::vector<uint8_t> msg(kRequestHeader + key.size() + value_bytes);
  put_u32(msg.data(), kStoreMagic);
  msg[4] = op;
  put_u32(msg.data() + 5, static_cast<uint32_t>(key.size()));
  put_u64(msg.data() + 9, value_bytes);
  put_u64(msg.data() + 17, static_cast<uint64_t>(timeout_ms));
  std::memcpy(msg.data() + kRequestHeader, key.data(), key.size());
  if (value_bytes > 0) std::memcpy(msg.data() + kRequestHeader + key.size(), value, value_bytes);
  const Deadline io_deadline = std::max(deadline, now) + kResponseGrace;
  std::string error;
  uint8_t h[kResponseHeader];
  bool ok = write_all(fd_.get(), msg.data(), msg.size(), io_deadline, where_, error) &&
            read_all(fd_.get(), h, sizeof h, io_deadline, where_, error);
  std::vector<uint8_t> payload;
  if (ok) {
    const uint64_t len = get_u64(h + 1);
    if (len > kMaxValue) fail(ErrorCode::mismatch, where_, ": malformed response");
    payload.resize(len);
    ok = read_all(fd_.get(), payload.data(), len, io_deadline, where_, error);
  }
  if (!ok) {
    fd_.reset();
    fail(ErrorCode::peer_failure, where_, ": the store server went away (", error,
         ") during a request for key '", key, "'");
  }
  if (h[0] == status_timeout)
    fail(ErrorCode::timeout, where_, ": timeout waiting for key '", key, "'");
  if (h[0] != status_ok)
    fail(ErrorCode::invalid_argument, where_, ": the server refused the request on key '", key,
         "' (add on a non-integer value?)");
  return payload;
}

void TcpStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  request(op_set, key, value.data(), value.size(), Clock::now());
}

std::vector<uint8_t> TcpStore::get(const std::string& key, Deadline deadline) {
  return request(op_get, key, nullptr, 0, deadline);
}

void TcpStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  for (const auto& k : keys) get(k, deadline);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  uint8_t d[8];
  put_u64(d, static_cast<uint64_t>(delta));
  const auto reply = request(op_add, key, d, sizeof d, Clock::now());
  if (reply.size() != 8) fail(ErrorCode::mismatch, where_, ": malformed add response");
  return static_cast<int64_t>(get_u64(reply.data()));
}

}  // namespace chorus
