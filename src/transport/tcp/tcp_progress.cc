// The tcp transport's progress loop: progress happens only inside poll() and
// wait_some() (and a look at the sockets in begin_call), through one epoll
// set (level triggered) over every socket, the listener and a wake-up
// eventfd; a bounded spin precedes blocking, and a blocked wait asks the
// peers now and then which call they are in.
#include "transport/tcp/tcp_transport_impl.h"

#include "core/check.h"
#include "core/log.h"
#include "net/socket.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace chorus::tcp {

void TcpTransport::poll(std::vector<RequestId>& done) {
  progress(0);
  take(done);
}

void TcpTransport::begin_call(const CallStamp& stamp) {
  current_ = stamp;
  if (!stamp.point_to_point()) collectives_ = stamp.seq;
  // A message of this call number parked here before the call began, with
  // another stamp: the peer is in another call, though this rank may never
  // post a receive from it.
  for (const Peer& p : peers_)
    for (const Stream* st : p.streams) check_parked(*st);
  // One look at the sockets (an epoll_wait that does not block): an abort
  // frame from any peer fails this call at its start.
  progress(0);
  if (failure_) raise_failure();
}

void TcpTransport::wait_some(std::vector<RequestId>& done, Deadline deadline) {
  progress(0);
  if (take(done)) return;
  // Bounded spin: cheaper than an epoll sleep and wake-up for the next
  // message of a pipeline; the yield hands the core to any other runnable
  // thread, so an oversubscribed host does not lose its CPU to spinning.
  const auto spin_end = std::min(deadline, Clock::now() + options_.spin);
  while (Clock::now() < spin_end) {
    std::this_thread::yield();
    progress(0);
    if (take(done) || interrupted()) return;
  }
  // Blocked: now and then ask the peers which call they are in, so that
  // one in this rank's collective call with another stamp is found even
  // when no message of the two calls ever meets (status answers are
  // compared as they arrive, in control_frame).
  auto next_query = Clock::now() + kStatusQueryAfter;
  while (true) {
    progress(poll_timeout_ms(std::min(deadline, next_query)));
    if (take(done) || interrupted()) return;
    const auto now = Clock::now();
    if (now >= deadline) return;
    if (now >= next_query && !current_.point_to_point() && current_.kind != 0) {
      query_status();
      next_query = now + kStatusQueryPeriod;
    }
  }
}

void TcpTransport::interrupt() {
  interrupted_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

bool TcpTransport::interrupted() {
  return interrupted_.load(std::memory_order_relaxed) &&
         interrupted_.exchange(false, std::memory_order_acquire);
}

bool TcpTransport::take(std::vector<RequestId>& done) {
  if (aborted_) fail(ErrorCode::aborted, where(), "transport was aborted");
  if (completed_.empty()) {
    if (failure_) raise_failure();
    return false;
  }
  done.insert(done.end(), completed_.begin(), completed_.end());
  completed_.clear();
  return true;
}

void TcpTransport::update_events(Stream& s) {
  uint32_t want = 0;
  if (!s.closed) {
    // A parked stream is not read, but it still listens (once) for the
    // peer closing its side, so that the death of a peer whose chunk waits
    // here is noticed at once.
    if (!s.parked)
      want |= EPOLLIN | EPOLLRDHUP;
    else if (!s.rdhup)
      want |= EPOLLRDHUP;
    if (!s.out.empty()) want |= EPOLLOUT;
  }
  if (want == s.events || s.closed) {
    s.events = want;
    return;
  }
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &s;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, s.fd.get(), &ev) != 0)
    fail(ErrorCode::system, where(), "epoll_ctl: ", errno_text(errno));
  s.events = want;
}

void TcpTransport::progress(int timeout_ms) {
  epoll_event events[64];
  int n;
  do {
    n = ::epoll_wait(epoll_.get(), events, 64, timeout_ms);
  } while (n < 0 && errno == EINTR);
  if (n < 0) fail(ErrorCode::system, where(), "epoll_wait: ", errno_text(errno));
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == nullptr) {
      refuse_late_connections();
      continue;
    }
    if (events[i].data.ptr == &wake_) {
      uint64_t count;
      [[maybe_unused]] ssize_t got = ::read(wake_.get(), &count, sizeof count);
      continue;
    }
    Stream& s = *static_cast<Stream*>(events[i].data.ptr);
    if (s.closed) continue;
    if (events[i].events & EPOLLOUT) write_stream(s);
    if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      if (s.parked) {
        parked_hangup(s, events[i].events);
      } else {
        read_stream(s);
      }
    }
  }
}

void TcpTransport::refuse_late_connections() {
  while (true) {
    Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) return;
    fd.reset();
    log_message(options_.log_level, LogLevel::warn, rank_,
                "tcp: refused a connection after set-up (the mesh is complete)");
  }
}

}  // namespace chorus::tcp
