// Communicator::shrink: the agreement over the recovery links and the new
// communicator's set-up (recovery/shrink.h says the steps).
#include "recovery/shrink.h"

#include "core/check.h"
#include "core/first_seen.h"
#include "engine/call_site.h"
#include "engine/communicator_impl.h"
#include "groups/derive.h"
#include "net/socket.h"
#include "transport/forwarding_transport.h"
#include "transport/recovery_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chorus::detail {
namespace {

constexpr uint32_t kMagic = 0x4b525343;  // "CSRK"
enum MessageType : uint32_t { kHello = 1, kVote = 2, kDecision = 3 };

// Every message: this header, then `bytes` of body.
struct Header {
  uint32_t magic = kMagic;
  uint32_t type = 0;
  uint64_t token = 0;  // the communicator's (RecoveryDirectory::token)
  int32_t from = -1;
  uint32_t attempt = 0;
  uint32_t bytes = 0;
  uint32_t reserved = 0;
};

// A decision's body: the set-up point, then `count` old ranks.
struct DecisionHead {
  Invitation invitation;
  int32_t count = 0;
  int32_t reserved = 0;
};

struct Decision {
  Invitation invitation;
  std::vector<int> members;  // old ranks, ascending
};

// A message larger than this is no agreement message.
constexpr uint32_t kMaxBody = sizeof(DecisionHead) + 4 * 1'048'576;
// How long one small message may take once its first byte is readable, or
// once it is written.
constexpr auto kMessageBound = std::chrono::seconds(1);

class Agreement {
 public:
  Agreement(CommunicatorImpl& comm, RecoveryLink& link, uint32_t attempt,
            std::chrono::milliseconds timeout)
      : comm_(comm),
        link_(link),
        me_(link.rank()),
        size_(comm.size()),
        attempt_(attempt),
        timeout_(timeout),
        where_{comm.rank(), "shrink"},
        peers_(static_cast<size_t>(size_)) {}

  // Steps 2 to 4: the decision this rank takes part in. `point` receives the
  // set-up point where this rank coordinates.
  Decision run(SetupPoint& point) {
    for (int c = 0; c < size_; ++c) {
      if (c == me_) return coordinate(point);
      if (peer(c).failed) continue;
      if (!connect_to(c) || !send(c, kVote, nullptr, 0)) continue;
      const Deadline until = deadline_after(timeout_);
      pump(until, [&] { return any_decision() || peer(c).failed; });
      if (auto d = any_decision()) return *d;
      if (!peer(c).failed)
        mark_failed(c, str_cat("did not answer within ", timeout_.count(), " ms"), true);
    }
    fail(ErrorCode::internal, where_, "no coordinator");  // the loop reaches this rank
  }

 private:
  struct Peer {
    Fd out;  // this rank's messages to the peer
    Fd in;   // the peer's messages to this rank
    bool failed = false;
    bool silent = false;  // failed for not answering (alive, maybe)
    bool voted = false;
    std::string why;
    std::optional<Decision> decision;
  };
  Peer& peer(int r) { return peers_[static_cast<size_t>(r)]; }

  void mark_failed(int r, std::string why, bool silent = false) {
    Peer& p = peer(r);
    if (p.failed) return;
    p.failed = true;
    p.silent = silent;
    p.why = std::move(why);
    p.out.reset();
    p.in.reset();
  }

  // The decision of any rank that names this one.
  std::optional<Decision> any_decision() {
    for (Peer& p : peers_)
      if (p.decision) return p.decision;
    return std::nullopt;
  }

  // Connects this rank's link to `r`; false (and `r` failed) where it is
  // gone: refused, reset, or no place known.
  bool connect_to(int r) {
    Peer& p = peer(r);
    if (p.out.valid()) return true;
    // Ranks that are threads of one process enter their places as their
    // communicators are made: one may not have yet.
    std::optional<Endpoint> place = link_.directory().get(r);
    for (const Deadline until = deadline_after(timeout_); !place && Clock::now() < until;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      place = link_.directory().get(r);
    }
    if (!place) {
      mark_failed(r, str_cat("did not make its communicator within ", timeout_.count(), " ms"),
                  true);
      return false;
    }
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) fail(ErrorCode::system, where_, "socket: ", errno_text(errno));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&place->addr), sizeof place->addr) !=
            0 &&
        errno != EINPROGRESS) {
      mark_failed(r, str_cat("has left (", errno_text(errno), ")"));
      return false;
    }
    pollfd pfd{fd.get(), POLLOUT, 0};
    const int ready = ::poll(&pfd, 1, poll_timeout_ms(deadline_after(timeout_)));
    int err = 0;
    socklen_t len = sizeof err;
    if (ready <= 0) {
      mark_failed(r, str_cat("could not be reached within ", timeout_.count(), " ms"), true);
      return false;
    }
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      mark_failed(r, str_cat("has left (", errno_text(err), ")"));
      return false;
    }
    set_nodelay(fd.get());
    p.out = std::move(fd);
    return send(r, kHello, nullptr, 0);
  }

  bool send(int r, MessageType type, const void* body, uint32_t bytes) {
    Peer& p = peer(r);
    if (!p.out.valid()) return false;
    Header h;
    h.type = type;
    h.token = link_.directory().token();
    h.from = me_;
    h.attempt = attempt_;
    h.bytes = bytes;
    std::vector<std::byte> message(sizeof h + bytes);
    std::memcpy(message.data(), &h, sizeof h);
    if (bytes > 0) std::memcpy(message.data() + sizeof h, body, bytes);
    std::string error;
    try {
      if (write_all(p.out.get(), message.data(), message.size(), Clock::now() + kMessageBound,
                    "shrink", error))
        return true;
    } catch (const Error& e) {
      error = e.what();
    }
    mark_failed(r, str_cat("has left (", error, ")"));
    return false;
  }

  // Reads one message from `fd`; nullopt on EOF, an error or a message that
  // is not this agreement's.
  std::optional<std::pair<Header, std::vector<std::byte>>> read_message(int fd) {
    Header h;
    std::string error;
    try {
      const Deadline until = Clock::now() + kMessageBound;
      if (!read_all(fd, &h, sizeof h, until, "shrink", error)) return std::nullopt;
      if (h.magic != kMagic || h.token != link_.directory().token() || h.from < 0 ||
          h.from >= size_ || h.from == me_ || h.bytes > kMaxBody)
        return std::nullopt;
      std::vector<std::byte> body(h.bytes);
      if (h.bytes > 0 && !read_all(fd, body.data(), body.size(), until, "shrink", error))
        return std::nullopt;
      return std::make_pair(h, std::move(body));
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  void take(int from, const Header& h, const std::vector<std::byte>& body) {
    if (h.attempt != attempt_) return;
    Peer& p = peer(from);
    if (h.type == kVote) p.voted = true;
    if (h.type == kDecision && body.size() >= sizeof(DecisionHead)) {
      DecisionHead head;
      std::memcpy(&head, body.data(), sizeof head);
      if (head.count < 1 ||
          body.size() != sizeof head + static_cast<size_t>(head.count) * sizeof(int32_t))
        return;
      Decision d;
      d.invitation = head.invitation;
      d.members.resize(static_cast<size_t>(head.count));
      for (size_t i = 0; i < d.members.size(); ++i) {
        int32_t m = 0;
        std::memcpy(&m, body.data() + sizeof head + i * sizeof m, sizeof m);
        d.members[i] = m;
      }
      if (std::find(d.members.begin(), d.members.end(), me_) != d.members.end())
        p.decision = std::move(d);
    }
  }

  // Accepts connections and reads messages until `done()` or `until`.
  void pump(Deadline until, const std::function<bool()>& done) {
    std::vector<pollfd> fds;
    // What each pollfd is: -1 the listener, -2 - i the i-th unnamed
    // connection, else 2 * rank (its in) or 2 * rank + 1 (its out).
    std::vector<int> what;
    while (!done() && Clock::now() < until) {
      fds.clear();
      what.clear();
      fds.push_back({link_.listener(), POLLIN, 0});
      what.push_back(-1);
      for (size_t i = 0; i < unnamed_.size(); ++i) {
        fds.push_back({unnamed_[i].get(), POLLIN, 0});
        what.push_back(-2 - static_cast<int>(i));
      }
      for (int r = 0; r < size_; ++r) {
        Peer& p = peer(r);
        if (p.in.valid()) {
          fds.push_back({p.in.get(), POLLIN, 0});
          what.push_back(2 * r);
        }
        if (p.out.valid()) {
          fds.push_back({p.out.get(), POLLIN, 0});
          what.push_back(2 * r + 1);
        }
      }
      const int n = ::poll(fds.data(), fds.size(), std::min(poll_timeout_ms(until), 100));
      if (n < 0 && errno != EINTR) fail(ErrorCode::system, where_, "poll: ", errno_text(errno));
      if (n <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const int w = what[i];
        if (w == -1) {
          accept_all();
        } else if (w <= -2) {
          const size_t u = static_cast<size_t>(-2 - w);
          if (u < unnamed_.size() && unnamed_[u].get() == fds[i].fd) name(unnamed_[u]);
        } else if (w % 2 == 0) {
          const int r = w / 2;
          if (peer(r).in.get() == fds[i].fd) read_in(r, true);
        } else if (peer(w / 2).out.get() == fds[i].fd) {
          // It may accept, name and close connections: the rest of this
          // round's descriptors may no longer be what they were.
          out_closed(w / 2);
          break;
        }
      }
      std::erase_if(unnamed_, [](const Fd& fd) { return !fd.valid(); });
    }
  }

  // An accepted connection's first message says who it is from.
  void name(Fd& fd) {
    auto m = read_message(fd.get());
    if (!m || m->first.type != kHello || m->first.attempt != attempt_ ||
        peer(m->first.from).failed) {
      fd.reset();
      return;
    }
    peer(m->first.from).in = std::move(fd);
  }

  // Reads `r`'s messages: one (`one`), or all that have arrived.
  void read_in(int r, bool one) {
    Peer& p = peer(r);
    while (p.in.valid()) {
      if (!one) {
        pollfd pfd{p.in.get(), POLLIN, 0};
        if (::poll(&pfd, 1, 0) <= 0) return;
      }
      auto m = read_message(p.in.get());
      if (!m || m->first.from != r) {
        mark_failed(r, "closed its link (it exited or left)");
        return;
      }
      take(r, m->first, m->second);
      if (one) return;
    }
  }

  // Nothing is ever sent back on this rank's own connection to `r`: it is
  // readable once `r` has closed it. Whatever `r` sent before that counts
  // first: a coordinator sends its decision and then closes. So the
  // connections waiting in the listener and `r`'s own are read first, and
  // where `r` has a connection to this rank, its end decides.
  void out_closed(int r) {
    Peer& p = peer(r);
    char byte = 0;
    const ssize_t got = ::recv(p.out.get(), &byte, 1, MSG_DONTWAIT);
    if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
    p.out.reset();
    accept_all();
    for (Fd& fd : unnamed_) {
      pollfd pfd{fd.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 0) > 0) name(fd);
    }
    std::erase_if(unnamed_, [](const Fd& fd) { return !fd.valid(); });
    read_in(r, false);
    if (!p.in.valid()) mark_failed(r, "closed its link (it exited or left)");
  }

  void accept_all() {
    while (true) {
      Fd fd(::accept4(link_.listener(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) return;
      unnamed_.push_back(std::move(fd));
    }
  }

  Decision coordinate(SetupPoint& point) {
    for (int r = 0; r < size_; ++r)
      if (r != me_ && !peer(r).failed) connect_to(r);
    const Deadline until = deadline_after(timeout_ / 2);
    pump(until, [&] {
      for (int r = 0; r < size_; ++r)
        if (r != me_ && !peer(r).failed && !peer(r).voted) return false;
      return true;
    });
    Decision d;
    bool silent = false;
    for (int r = 0; r < size_; ++r) {
      if (r == me_) {
        d.members.push_back(r);
        continue;
      }
      Peer& p = peer(r);
      if (!p.failed && !p.voted)
        mark_failed(r, str_cat("did not call shrink within ", (timeout_ / 2).count(), " ms"), true);
      if (!p.failed) d.members.push_back(r);
      silent = silent || p.silent;
    }
    if (d.members.size() == 1 && silent)
      fail(ErrorCode::timeout, where_, "no other rank answered within ", timeout_.count(),
           " ms: ", failures(),
           "; this rank was left out of the shrink, or every other one failed");
    const int n = static_cast<int>(d.members.size());
    d.invitation = open_setup(comm_, n, point, link_.address());
    if (!d.invitation.opened.ok)
      fail(static_cast<ErrorCode>(d.invitation.opened.code),
           std::string(d.invitation.opened.message,
                       strnlen(d.invitation.opened.message, sizeof d.invitation.opened.message)));
    std::vector<std::byte> body(sizeof(DecisionHead) + static_cast<size_t>(n) * sizeof(int32_t));
    DecisionHead head;
    head.invitation = d.invitation;
    head.count = n;
    std::memcpy(body.data(), &head, sizeof head);
    for (size_t i = 0; i < d.members.size(); ++i) {
      const int32_t m = d.members[i];
      std::memcpy(body.data() + sizeof head + i * sizeof m, &m, sizeof m);
    }
    for (int m : d.members)
      if (m != me_) send(m, kDecision, body.data(), static_cast<uint32_t>(body.size()));
    return d;
  }

 public:
  // The failed ranks and why, for messages: "rank 3 has left (...), ...".
  std::string failures() {
    std::string out;
    for (int r = 0; r < size_; ++r) {
      if (!peer(r).failed) continue;
      out += str_cat(out.empty() ? "" : ", ", "rank ", r, " ", peer(r).why);
    }
    return out.empty() ? "none failed" : out;
  }

 private:
  CommunicatorImpl& comm_;
  RecoveryLink& link_;
  const int me_;
  const int size_;
  const uint32_t attempt_;
  const std::chrono::milliseconds timeout_;
  const CallSite where_;
  std::vector<Peer> peers_;
  std::vector<Fd> unnamed_;  // accepted, not yet said who they are
};

std::string join_ints(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += str_cat(out.empty() ? "" : ", ", x);
  return out;
}

}  // namespace

Communicator shrink(Communicator& comm, std::chrono::milliseconds timeout) {
  CommunicatorImpl& impl = impl_of(comm);
  const CallSite where{impl.rank(), "shrink"};
  if (timeout.count() < 0)
    fail(ErrorCode::invalid_argument, where, "negative timeout ", timeout.count(), " ms");
  if (timeout.count() == 0) timeout = impl.config().timeout;
  // The agreement's steps wait for a half of it at least.
  timeout = std::max(timeout, std::chrono::milliseconds(2));
  const std::shared_ptr<RecoveryLink> link = impl.revoke_for_recovery();
  const uint32_t attempt = link->next_attempt();
  Agreement agreement(impl, *link, attempt, timeout);
  SetupPoint point;
  const Decision decision = agreement.run(point);
  const auto self = std::find(decision.members.begin(), decision.members.end(), impl.rank());
  CHORUS_CHECK(self != decision.members.end());
  const int me = static_cast<int>(self - decision.members.begin());
  const int n = static_cast<int>(decision.members.size());
  // Each member claims its place in an in-process world; the last one takes
  // the world's entry out (the coordinator may return before the others
  // have joined).
  point.world = 0;
  std::unique_ptr<Transport> transport;
  try {
    transport = join_setup(decision.invitation, me, n, impl.config(), deadline_after(timeout));
  } catch (const Error& e) {
    fail(e.code(), where, "the survivors (old ranks ", join_ints(decision.members),
         ") could not set up their communicator: ", e.what(),
         "; shrink may be called again on this communicator");
  }
  if (point.server)
    transport = std::make_unique<KeepsServer>(std::move(transport), std::move(point.server));
  Config child = impl.config();
  child.derived = true;
  if (const auto& hosts = impl.host_of()) {
    std::vector<int> of_members;
    for (int m : decision.members) of_members.push_back((*hosts)[static_cast<size_t>(m)]);
    transport->set_host_layout(number_by_first_seen(std::span<const int>(of_members)));
  }
  return make_communicator(std::move(transport), std::move(child));
}

}  // namespace chorus::detail
