// Set-up of the tcp transport's connections: listening, the address and token
// exchange through the Store, connecting, accepting, and the handshake.
#include "transport/tcp/tcp_setup.h"

#include "core/check.h"
#include "core/log.h"
#include "net/socket.h"
#include "transport/tcp/tcp_wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <memory>
#include <vector>

namespace chorus::tcp {

namespace {

std::vector<uint8_t> to_bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

// Peer p's record "host id\naddress\nport" from the store, as an endpoint;
// Error(mismatch) naming the key when it is malformed.
Endpoint parse_address(const std::vector<uint8_t>& record, int p, const std::string& where) {
  const std::string text(record.begin(), record.end());
  const size_t nl1 = text.find('\n');
  const size_t nl2 = nl1 == std::string::npos ? nl1 : text.find('\n', nl1 + 1);
  uint16_t port = 0;
  bool ok = nl2 != std::string::npos && nl2 > nl1 + 1;
  if (ok) {
    const char* b = text.data() + nl2 + 1;
    const char* e = text.data() + text.size();
    const auto [end, ec] = std::from_chars(b, e, port);
    ok = ec == std::errc() && end == e && port != 0;
  }
  if (!ok) {
    std::string shown;
    for (size_t i = 0; i < text.size() && i < 64; ++i)
      shown += text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    fail(ErrorCode::mismatch, where, "store key 'tcp/addr/", p, "' holds '", shown,
         "', not an address record (host id, address, port)");
  }
  return resolve(text.substr(nl1 + 1, nl2 - nl1 - 1), port, str_cat(where, "peer ", p));
}

// A connection whose handshake is not complete yet.
struct Pending {
  Fd fd;
  int peer = -1;  // expected peer for outgoing, -1 for accepted
  uint32_t stream = 0;
  uint8_t buf[kHandshakeBytes];
  size_t got = 0;
};

}  // namespace

bool connects_to(const TcpOptions& options, int peer) {
  return options.peers.empty() || options.peers[static_cast<size_t>(peer)];
}

Fd connect_mesh(Store& store, int rank, int size, const TcpOptions& options,
                const StreamReady& ready) {
  const std::string where = str_cat("rank ", rank, ": tcp: ");
  const Deadline deadline = options.deadline;
  // Store errors name the key; say also which rank waited and for whom.
  const auto get = [&](const std::string& key, const std::string& what) {
    try {
      return store.get(key, deadline);
    } catch (const Error& e) {
      fail(e.code(), where, "set-up: waiting for ", what, ": ", e.what());
    }
  };
  // Listen on exactly the address this rank publishes, not on every
  // interface: a data port is reachable where the job says it is, no wider.
  const std::string address = options.address.empty() ? "127.0.0.1" : options.address;
  const std::string hint =
      str_cat(" (", address, "; CHORUS_TCP_ADDR must be an address of this host)");
  Fd listen = listen_on(resolve(address, 0, str_cat(where, "published address", hint)),
                        str_cat(where, "listening on its published address", hint));
  const uint16_t port = local_port(listen.get());
  store.set(str_cat("tcp/addr/", rank),
            to_bytes(str_cat(options.host_id, "\n", address, "\n", port)));
  Token token{};
  if (rank == 0) {
    token = random_token();
    store.set("tcp/token", std::vector<uint8_t>(token.begin(), token.end()));
  } else {
    const auto t = get("tcp/token", "the job token from rank 0");
    if (t.size() != kTokenBytes)
      fail(ErrorCode::mismatch, where, "store key 'tcp/token' holds ", t.size(),
           " bytes, not a job token of ", kTokenBytes);
    std::copy(t.begin(), t.end(), token.begin());
  }
  // Every value this rank needs from the store, read and checked before any
  // connection is waited for.
  std::vector<Endpoint> endpoints(static_cast<size_t>(rank));
  for (int p = 0; p < rank; ++p)
    if (connects_to(options, p))
      endpoints[static_cast<size_t>(p)] =
          parse_address(get(str_cat("tcp/addr/", p), str_cat("the address of peer ", p)), p, where);
  // A store barrier: a rank that found a bad value has aborted the store by
  // now (bootstrap does), and every rank learns it here, instead of waiting
  // for connections that will not come.
  if (store.add("tcp/checked", 1) == size) store.set("tcp/go", {1});
  get("tcp/go", "every rank to check its set-up data");
  const auto nstreams = static_cast<uint32_t>(options.streams);
  // established[p][i]: stream i to peer p is up (empty for peers left out).
  std::vector<std::vector<bool>> established(static_cast<size_t>(size));
  size_t expected = 0;  // streams still to establish
  for (int p = 0; p < size; ++p) {
    if (p == rank || !connects_to(options, p)) continue;
    established[static_cast<size_t>(p)].assign(nstreams, false);
    expected += nstreams;
  }
  Handshake mine;
  mine.token = token;
  mine.rank = static_cast<uint32_t>(rank);
  mine.size = static_cast<uint32_t>(size);

  std::vector<std::unique_ptr<Pending>> pending;
  // Outgoing: to every lower peer. Connects complete through the peer's
  // listen backlog even before it accepts, so this cannot deadlock.
  for (int p = 0; p < rank; ++p) {
    if (!connects_to(options, p)) continue;
    const Endpoint& ep = endpoints[static_cast<size_t>(p)];
    for (uint32_t st = 0; st < nstreams; ++st) {
      auto pd = std::make_unique<Pending>();
      pd->fd = connect_with_retry(ep, deadline, str_cat(where, "connect to peer ", p));
      pd->peer = p;
      pd->stream = st;
      Handshake h = mine;
      h.stream = st;
      const auto bytes = h.encode();
      std::string error;
      if (!write_all(pd->fd.get(), bytes.data(), bytes.size(), deadline, where, error))
        fail(ErrorCode::peer_failure, where, "handshake with peer ", p, " failed: ", error);
      set_nonblocking(pd->fd.get());
      pending.push_back(std::move(pd));
    }
  }

  std::vector<pollfd> fds;
  while (expected > 0) {
    fds.clear();
    fds.push_back({listen.get(), POLLIN, 0});
    for (auto& pd : pending) fds.push_back({pd->fd.get(), POLLIN, 0});
    const int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(deadline));
    if (rc < 0 && errno != EINTR) fail(ErrorCode::system, where, "poll: ", errno_text(errno));
    if (rc == 0 && Clock::now() >= deadline) {
      std::string missing;
      for (int p = 0; p < size; ++p)
        for (bool up : established[static_cast<size_t>(p)])
          if (!up) {
            missing += str_cat(missing.empty() ? "" : ", ", p);
            break;
          }
      fail(ErrorCode::timeout, where, "set-up timed out; no connection from peer(s) ", missing);
    }
    if (fds[0].revents & POLLIN) {
      while (true) {
        Fd fd(::accept4(listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd.valid()) break;
        auto pd = std::make_unique<Pending>();
        pd->fd = std::move(fd);
        pending.push_back(std::move(pd));
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Pending& pd = *pending[i - 1];
      const ssize_t n =
          ::recv(pd.fd.get(), pd.buf + pd.got, kHandshakeBytes - pd.got, MSG_DONTWAIT);
      std::string reject;
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        reject = "closed before completing the handshake";
      } else if (n > 0) {
        pd.got += static_cast<size_t>(n);
      }
      if (reject.empty() && pd.got == kHandshakeBytes) {
        const Handshake h = Handshake::decode(pd.buf);
        const bool outgoing = pd.peer >= 0;
        const int from = static_cast<int>(h.rank);
        reject = handshake_problem(h, token, static_cast<uint32_t>(size));
        if (reject.empty()) {
          if (outgoing && (from != pd.peer || h.stream != pd.stream))
            reject = str_cat("answered as rank ", from, " stream ", h.stream, ", expected rank ",
                             pd.peer, " stream ", pd.stream);
          else if (!outgoing &&
                   (from <= rank || from >= size || !connects_to(options, from) ||
                    h.stream >= nstreams || established[static_cast<size_t>(from)][h.stream]))
            reject = str_cat("unexpected rank ", from, " stream ", h.stream);
        }
        if (reject.empty()) {
          if (!outgoing) {
            Handshake reply = mine;
            reply.stream = h.stream;
            const auto bytes = reply.encode();
            std::string error;
            if (!write_all(pd.fd.get(), bytes.data(), bytes.size(), deadline, where, error))
              reject = str_cat("handshake reply failed: ", error);
          }
          if (reject.empty()) {
            established[static_cast<size_t>(from)][h.stream] = true;
            ready(std::move(pd.fd), from, h.stream);
            --expected;
          }
        }
        if (reject.empty()) pd.got = kHandshakeBytes + 1;  // marks it taken
      }
      if (!reject.empty()) {
        // Our own connection to a published address must succeed; a stray
        // incoming one is refused and the set-up goes on.
        if (pd.peer >= 0)
          fail(ErrorCode::mismatch, where, "connection to peer ", pd.peer, ": ", reject);
        log_message(options.log_level, LogLevel::warn, rank, "tcp: refused a connection: ", reject);
        pd.got = kHandshakeBytes + 1;
      }
    }
    std::erase_if(pending, [](const auto& pd) { return pd->got > kHandshakeBytes; });
  }
  // Stragglers (e.g. a refused connection still open) are dropped here; the
  // listener stays open so that later connections are refused, not left
  // hanging in the backlog.
  return listen;
}

}  // namespace chorus::tcp
