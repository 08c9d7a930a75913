#include "store/tcp_store.h"

#include "core/check.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace chorus {

using namespace store_wire;

namespace {

// The client waits this much beyond a get's own timeout for the server's
// "timeout" answer before it gives up on the server itself.
constexpr auto kResponseGrace = std::chrono::seconds(5);
// A client has this long from its connect to complete its hello: the real
// ones answer at once; this only frees the slots of connections that never do.
constexpr auto kAdmissionTime = std::chrono::seconds(30);
// When accept() fails for want of descriptors, the listener rests this long
// (instead of poll() reporting it ready in a busy loop).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Bytes read from one client per poll round, so that one fast sender cannot
// starve the others.
constexpr size_t kReadChunk = 65536;
constexpr int kChunksPerRound = 16;
// On shutdown, queued replies (an abort's reason, typically) get this long to
// leave.
constexpr auto kShutdownFlush = std::chrono::seconds(1);
// The largest payload a client accepts in an admission answer.
constexpr size_t kMaxAdmissionPayload = 4096;

std::string text_of(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

// Sends what is queued for `id` without blocking; false when the connection
// failed.
bool flush(TcpStoreCore& core, TcpStoreCore::ClientId id, int fd) {
  while (true) {
    const auto out = core.output(id);
    if (out.empty()) return true;
    const ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      core.sent(id, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace

// --- server -------------------------------------------------------------------

TcpStoreServer::TcpStoreServer(const Endpoint& ep, std::string secret, LogLevel log_level,
                               TcpStoreLimits limits)
    : endpoint_(ep),
      listen_(listen_on(ep, "TcpStore server")),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      port_(local_port(listen_.get())),
      log_level_(log_level),
      core_(std::move(secret), limits) {
  endpoint_.addr.sin_port = htons(port_);
  if (!wake_.valid()) fail(ErrorCode::system, "TcpStore server: eventfd: ", std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

TcpStoreServer::~TcpStoreServer() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

std::string TcpStoreServer::describe() const {
  return endpoint_.describe();
}

TcpStoreCore::Stats TcpStoreServer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool TcpStoreServer::wait_until_told(size_t clients, Deadline deadline) const {
  std::unique_lock lock(mu_);
  return changed_.wait_until(
      lock, deadline, [&] { return stats_.told_of_abort >= clients && stats_.clients == 0; });
}

void TcpStoreServer::publish(const TcpStoreCore::Stats& s) {
  {
    std::lock_guard lock(mu_);
    stats_ = s;
  }
  changed_.notify_all();
}

void TcpStoreServer::run() {
  const std::string where = str_cat("TcpStore server ", describe());
  std::map<TcpStoreCore::ClientId, Fd> socks;
  std::vector<pollfd> fds;
  std::vector<TcpStoreCore::ClientId> ids;  // ids[i] belongs to fds[i + 2]
  std::optional<Deadline> listen_paused_until;
  uint8_t buf[kReadChunk];
  const auto drop = [&](TcpStoreCore::ClientId id) {
    core_.disconnect(id);
    socks.erase(id);
  };
  // Closes the clients the core gave up on, after one try to send what it
  // left queued for them (a refusal's reason).
  const auto close_refused = [&] {
    auto closed = core_.take_closed();
    if (closed.empty()) return;
    publish(core_.stats());  // the count is visible before the sockets close
    for (auto& [id, reason] : closed) {
      auto it = socks.find(id);
      if (it != socks.end()) flush(core_, id, it->second.get());
      log_message(log_level_, LogLevel::warn, 0, where, ": closed a client: it ", reason);
      drop(id);
    }
  };
  while (true) {
    // Requests handled between polls may have started new gets; expire first
    // so that the poll timeout is the nearest remaining deadline.
    auto next = core_.expire(Clock::now());
    close_refused();
    // Replies that one client's set queued for others leave at once.
    std::vector<TcpStoreCore::ClientId> failed;
    for (auto& [id, fd] : socks)
      if (!flush(core_, id, fd.get())) failed.push_back(id);
    for (const auto id : failed) drop(id);
    publish(core_.stats());

    fds.clear();
    ids.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    const bool listening = !listen_paused_until || Clock::now() >= *listen_paused_until;
    if (listening) listen_paused_until.reset();
    fds.push_back({listening ? listen_.get() : -1, POLLIN, 0});
    if (!listening && (!next || *listen_paused_until < *next)) next = listen_paused_until;
    for (auto& [id, fd] : socks) {
      short ev = POLLRDHUP;
      if (core_.wants_input(id)) ev |= POLLIN;
      if (!core_.output(id).empty()) ev |= POLLOUT;
      fds.push_back({fd.get(), ev, 0});
      ids.push_back(id);
    }
    const int rc = ::poll(fds.data(), fds.size(), next ? poll_timeout_ms(*next) : -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return;  // nothing sensible left to do; clients see the closed sockets
    }
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      while (true) {
        Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd.valid()) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            log_message(log_level_, LogLevel::warn, 0, where, ": accept: ", errno_text(errno),
                        "; not accepting for ", kAcceptPause.count(), " ms");
            listen_paused_until = Clock::now() + kAcceptPause;
          }
          break;
        }
        set_nodelay(fd.get());
        const auto id = core_.connect(random_nonce(), Clock::now() + kAdmissionTime);
        if (flush(core_, id, fd.get()))
          socks.emplace(id, std::move(fd));
        else
          core_.disconnect(id);
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const auto id = ids[i - 2];
      auto it = socks.find(id);
      if (it == socks.end()) continue;
      const int fd = it->second.get();
      bool alive = true;
      // A client that waits on a get is not read (the kernel holds what it
      // sends), unless its connection reports a hang-up: then read to see it.
      const bool hangup = fds[i].revents & (POLLHUP | POLLERR | POLLRDHUP);
      for (int chunk = 0;
           alive && chunk < kChunksPerRound && (core_.wants_input(id) || (hangup && chunk == 0));
           ++chunk) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          const auto outcome = core_.receive(
              id, std::span<const uint8_t>(buf, static_cast<size_t>(n)), Clock::now());
          // A refusal is flushed below: the count is visible before it arrives.
          if (outcome.close) publish(core_.stats());
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        alive = false;  // EOF or error: the client is gone
      }
      if (alive) alive = flush(core_, id, fd);
      if (!alive) drop(id);
    }
  }
  // Stopping: give queued replies a moment to leave.
  const Deadline until = Clock::now() + kShutdownFlush;
  close_refused();
  while (Clock::now() < until) {
    fds.clear();
    ids.clear();
    for (auto& [id, fd] : socks) {
      if (core_.output(id).empty()) continue;
      fds.push_back({fd.get(), POLLOUT, 0});
      ids.push_back(id);
    }
    if (fds.empty()) break;
    if (::poll(fds.data(), fds.size(), poll_timeout_ms(until)) <= 0) break;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents && !flush(core_, ids[i], fds[i].fd)) drop(ids[i]);
  }
}

// --- client -------------------------------------------------------------------

TcpStore::TcpStore(const Endpoint& server, Deadline connect_deadline, const std::string& secret)
    : address_(server.describe()),
      where_(str_cat("TcpStore ", address_)),
      fd_(connect_with_retry(server, connect_deadline, where_)) {
  admit(secret, connect_deadline);
}

void TcpStore::admit(const std::string& secret, Deadline deadline) {
  const std::string store = str_cat("store at ", address_);
  std::string error;
  uint8_t hello[kServerHelloBytes];
  if (!read_all(fd_.get(), hello, sizeof hello, deadline, where_, error))
    fail(ErrorCode::peer_failure, store, " closed the connection before its hello (", error,
         "): not a chorus TcpStore of this version?");
  if (get_u32(hello) != kServerHelloMagic)
    fail(ErrorCode::mismatch, store, " is not a chorus TcpStore (unexpected greeting)");
  const uint32_t version = get_u32(hello + 4);
  if (version != kProtocolVersion)
    fail(ErrorCode::mismatch, store, " speaks store protocol version ", version,
         ", this process version ", kProtocolVersion, " (mixed chorus versions?)");
  const bool required = (get_u32(hello + 8) & kFlagSecretRequired) != 0;
  if (required && secret.empty())
    fail(ErrorCode::mismatch, store,
         " refused this client: the store requires CHORUS_STORE_SECRET and this process has none");
  if (!required && !secret.empty())
    fail(ErrorCode::mismatch, store,
         " has no secret but this process has CHORUS_STORE_SECRET: give every rank the same "
         "secret (rank 0 hosts the store)");
  Nonce server_nonce{};
  std::memcpy(server_nonce.data(), hello + 12, kNonceBytes);
  const Nonce client_nonce = random_nonce();
  const Mac proof = required ? client_proof(secret, server_nonce, client_nonce) : Mac{};
  uint8_t mine[kClientHelloBytes];
  put_u32(mine, kClientHelloMagic);
  put_u32(mine + 4, kProtocolVersion);
  std::memcpy(mine + 8, client_nonce.data(), kNonceBytes);
  std::memcpy(mine + 8 + kNonceBytes, proof.data(), kMacBytes);
  uint8_t h[kResponseHeaderBytes];
  std::vector<uint8_t> payload;
  bool ok = write_all(fd_.get(), mine, sizeof mine, deadline, where_, error) &&
            read_all(fd_.get(), h, sizeof h, deadline, where_, error);
  if (ok) {
    const uint64_t len = get_u64(h + 1);
    if (len > kMaxAdmissionPayload)
      fail(ErrorCode::mismatch, store, ": malformed answer to this client's hello");
    payload.resize(len);
    ok = read_all(fd_.get(), payload.data(), len, deadline, where_, error);
  }
  if (!ok)
    fail(ErrorCode::peer_failure, store, " closed the connection during admission (", error, ")");
  if (h[0] == status_refused)
    fail(ErrorCode::mismatch, store, " refused this client: ", text_of(payload));
  if (h[0] != status_ok)
    fail(ErrorCode::mismatch, store, ": unexpected status ", int{h[0]}, " in answer to the hello");
  if (required) {
    Mac presented{};
    if (payload.size() == kMacBytes) std::memcpy(presented.data(), payload.data(), kMacBytes);
    if (payload.size() != kMacBytes ||
        !equal_in_constant_time(presented, server_proof(secret, server_nonce, client_nonce)))
      fail(ErrorCode::mismatch, store,
           " did not prove that it holds CHORUS_STORE_SECRET: not this job's store?");
  }
}

std::vector<uint8_t> TcpStore::request(uint8_t op, const std::string& key, const void* value,
                                       size_t value_bytes, Deadline deadline) {
  const TcpStoreLimits limits;
  if (key.size() > limits.max_key_bytes)
    fail(ErrorCode::invalid_argument, where_, ": key of ", key.size(), " bytes exceeds ",
         limits.max_key_bytes);
  if (value_bytes > limits.max_value_bytes)
    fail(ErrorCode::invalid_argument, where_, ": value of ", value_bytes, " bytes exceeds ",
         limits.max_value_bytes);
  std::lock_guard lock(mu_);
  if (!fd_.valid()) fail(ErrorCode::peer_failure, where_, ": connection to the server was lost");
  const auto now = Clock::now();
  const auto timeout_ms =
      deadline > now ? std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count() : 0;
  const std::vector<uint8_t> msg =
      encode_request(op, key, {static_cast<const uint8_t*>(value), value_bytes},
                     static_cast<uint64_t>(timeout_ms));
  // Saturating: a get without a deadline (Deadline::max()) has none here either.
  const Deadline io_deadline = deadline_after(kResponseGrace, std::max(deadline, now));
  std::string error;
  uint8_t h[kResponseHeaderBytes];
  bool ok = write_all(fd_.get(), msg.data(), msg.size(), io_deadline, where_, error) &&
            read_all(fd_.get(), h, sizeof h, io_deadline, where_, error);
  std::vector<uint8_t> payload;
  if (ok) {
    const uint64_t len = get_u64(h + 1);
    if (len > limits.max_value_bytes) fail(ErrorCode::mismatch, where_, ": malformed response");
    payload.resize(len);
    ok = read_all(fd_.get(), payload.data(), len, io_deadline, where_, error);
  }
  if (!ok) {
    fd_.reset();
    fail(ErrorCode::peer_failure, where_, ": the store server went away (", error,
         ") during a request for key '", key, "'");
  }
  switch (h[0]) {
    case status_ok:
      return payload;
    case status_timeout:
      fail(ErrorCode::timeout, where_, ": timeout waiting for key '", key, "'");
    case status_bad:
      fail(ErrorCode::invalid_argument, where_, ": ", text_of(payload));
    case status_aborted:
      fail(ErrorCode::peer_failure, where_, ": the store was aborted: ", text_of(payload));
    default:
      fail(ErrorCode::mismatch, where_, ": unexpected status ", int{h[0]}, " for key '", key, "'");
  }
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

void TcpStore::abort(const std::string& reason) {
  const std::string r = reason.substr(0, kMaxAbortReasonBytes);
  request(op_abort, "", r.data(), r.size(), Clock::now());
}

}  // namespace chorus
