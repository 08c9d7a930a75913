// The tcp transport's construction and closing: the epoll set and wake-up
// eventfd, the connections tcp_setup.cc establishes registered as streams,
// and the goodbye (or the abort that carries a failed rank's reason) when the
// transport closes. tcp_transport_impl.h lists the files of the other parts.
#include "transport/tcp/tcp_transport_impl.h"

#include "core/check.h"
#include "net/socket.h"
#include "transport/tcp/tcp_setup.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <thread>

namespace chorus::tcp {

TcpTransport::TcpTransport(int rank, int size, const TcpOptions& options)
    : rank_(rank),
      size_(size),
      options_(options),
      peers_(static_cast<size_t>(size)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_.valid()) fail(ErrorCode::system, where(), "epoll_create1: ", errno_text(errno));
  if (!wake_.valid()) fail(ErrorCode::system, where(), "eventfd: ", errno_text(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &wake_;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0)
    fail(ErrorCode::system, where(), "epoll_ctl: ", errno_text(errno));
  if (options_.streams < 1) fail(ErrorCode::invalid_argument, where(), "streams must be >= 1");
}

TcpTransport::~TcpTransport() {
  close_all();
}

void TcpTransport::connect(Store& store) {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !connects_to(options_, p)) continue;
    peers_[static_cast<size_t>(p)].connected = true;
    peers_[static_cast<size_t>(p)].streams.assign(options_.streams, nullptr);
  }
  // The data streams and, last, the control stream of every peer.
  TcpOptions mesh = options_;
  mesh.streams = options_.streams + 1;
  listen_ = connect_mesh(store, rank_, size_, mesh, [this](Fd fd, int peer, uint32_t stream) {
    add_stream(std::move(fd), peer, stream);
  });
  // The mesh is complete: the listener now only refuses late connections.
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev) != 0)
    fail(ErrorCode::system, where(), "epoll_ctl: ", errno_text(errno));
}

void TcpTransport::add_stream(Fd fd, int peer, uint32_t index) {
  auto s = std::make_unique<Stream>();
  s->fd = std::move(fd);
  s->peer = peer;
  set_nonblocking(s->fd.get());
  set_nodelay(s->fd.get());
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = s.get();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, s->fd.get(), &ev) != 0)
    fail(ErrorCode::system, where(), "epoll_ctl: ", errno_text(errno));
  s->events = ev.events;
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (index == options_.streams) {
    s->control = true;
    p.control = s.get();
  } else {
    p.streams[index] = s.get();
  }
  streams_.push_back(std::move(s));
}

void TcpTransport::close_all() {
  // A rank that failed tells its peers why rather than saying goodbye, so
  // that they report the cause, not the closed connection.
  if (failure_ && !aborted_) abort(failure_code_, failure_text_);
  if (!aborted_) {
    // Goodbye on every stream whose output is idle, so that peers can tell
    // a finished rank from a dead one.
    uint8_t h[kHeaderBytes];
    FrameHeader fh;
    fh.kind = frame_bye;
    fh.encode(h);
    const Deadline until = Clock::now() + kByeGrace;
    std::string error;
    for (auto& s : streams_) {
      if (s->closed || !s->out.empty()) continue;
      try {
        write_all(s->fd.get(), h, kHeaderBytes, until, "bye", error);
      } catch (const Error&) {
        // A peer that does not take one header in kByeGrace will see an EOF
        // without goodbye; nothing more can be done from a destructor.
      }
    }
  }
  // Drain what peers sent (their own goodbyes): closing a socket with unread
  // data makes the kernel reset the connection instead of closing it, and
  // a reset may drop what the peer has not read yet -- after an abort, the
  // abort frame. So an aborted transport also waits (at most kByeGrace)
  // for each peer to close its control connection, which a peer does once
  // it has read the abort frame and failed in turn.
  uint8_t sink[4096];
  const Deadline until = Clock::now() + kByeGrace;
  while (true) {
    bool waiting = false;
    for (auto& s : streams_) {
      if (s->closed) continue;
      ssize_t n;
      while ((n = ::recv(s->fd.get(), sink, sizeof sink, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        s->closed = true;  // only this loop looks at it now
      else if (aborted_ && s->control)
        waiting = true;
    }
    if (!waiting || Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  streams_.clear();
}

}  // namespace chorus::tcp

namespace chorus {

std::unique_ptr<Transport> make_tcp_transport(Store& store, int rank, int size,
                                              const TcpOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::invalid_argument, "tcp transport: rank ", rank, " outside [0, ", size, ")");
  if (!options.peers.empty() && options.peers.size() != static_cast<size_t>(size))
    fail(ErrorCode::invalid_argument, "tcp transport: peers mask has ", options.peers.size(),
         " entries for ", size, " ranks");
  auto t = std::make_unique<tcp::TcpTransport>(rank, size, options);
  t->connect(store);
  return t;
}

}  // namespace chorus
