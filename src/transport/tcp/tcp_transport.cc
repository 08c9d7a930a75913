// The tcp transport's data path: the Transport implementation over the
// connected sockets (isend/irecv, progress through epoll, poll/wait_some,
// abort and the closing goodbye). tcp_setup.cc makes the connections and
// tcp_wire.cc the bytes of the frame headers.
#include "transport/tcp/tcp_transport.h"

#include "core/check.h"
#include "core/log.h"
#include "core/reduce_kernels.h"
#include "net/socket.h"
#include "transport/tcp/tcp_setup.h"
#include "transport/tcp/tcp_wire.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_map>

namespace chorus {

namespace {

using tcp::FrameHeader;
using tcp::kHeaderBytes;
using tcp::kMaxAbortReason;
using tcp::frame_abort;
using tcp::frame_bye;
using tcp::frame_data;

// Striping unit when a peer has several streams; a multiple of every element
// size, so that a reducing receive always gets whole elements per chunk.
constexpr size_t kChunkBytes = size_t{256} << 10;
// Staging slice of a reducing receive: large enough to amortize the reduce
// call, small enough to stay in cache.
constexpr size_t kStagingBytes = size_t{64} << 10;
// Bytes read from one stream per progress pass before the others get a turn.
constexpr size_t kReadBudget = size_t{4} << 20;
// A wait blocked this long asks the peers which call they are in, and again
// every period while it stays blocked (wait_some).
constexpr auto kStatusQueryAfter = std::chrono::milliseconds(20);
constexpr auto kStatusQueryPeriod = std::chrono::milliseconds(500);
// How long a closing transport tries to hand its goodbye frames to the kernel.
constexpr auto kByeGrace = std::chrono::milliseconds(200);

struct RecvReq {
  RequestId id = 0;
  uint8_t* dst = nullptr;
  size_t bytes = 0;
  CallStamp stamp;
  std::optional<Reducer> reducer;
  size_t received = 0;
  bool complete = false;
};

// One chunk queued on a stream: its header, then its payload.
struct OutChunk {
  RequestId send = 0;  // 0 for control frames (abort, bye)
  uint8_t header[kHeaderBytes];
  const uint8_t* data = nullptr;
  size_t len = 0;
  size_t written = 0;  // of kHeaderBytes + len
};

struct Stream {
  Fd fd;
  int peer = -1;
  bool control = false;  // the peer's control connection: no data frames
  uint32_t events = 0;  // as registered with epoll
  bool closed = false;  // EOF seen or socket given up
  bool bye = false;     // the peer said goodbye on this stream
  bool rdhup = false;   // the peer shut its side while this stream was parked
  // --- send side
  std::deque<OutChunk> out;
  // --- receive side
  uint8_t header[kHeaderBytes];
  size_t header_got = 0;
  bool parked = false;      // header read, its receive not posted yet
  bool in_payload = false;  // reading the payload of `frame`
  FrameHeader frame;
  RecvReq* target = nullptr;
  size_t got = 0;       // payload bytes of this chunk read so far
  size_t applied = 0;   // payload bytes already reduced into the destination
  size_t staged = 0;    // bytes in staging not yet reduced
  std::vector<uint8_t> staging;
  std::string abort_reason;
};

struct Peer {
  std::vector<Stream*> streams;  // data
  Stream* control = nullptr;     // abort and status frames, never parked
  bool connected = false;  // part of this transport's mesh
  uint64_t send_seq = 0;
  size_t next_stream = 0;
  uint64_t recv_base = 0;      // seq of recvs.front()
  std::deque<RecvReq> recvs;   // posted, in seq order; completed ones leave from the front
  size_t sends_in_flight = 0;
  size_t streams_closed = 0;
  CallStamp last_heard;  // the call of the last data frame from the peer
  // Its answer to the last status query.
  bool answered = false;
  uint32_t answered_collectives = 0;
  CallStamp answered_call;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, int size, const TcpOptions& options)
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

  ~TcpTransport() override { close_all(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  TransportKind kind() const override { return TransportKind::tcp; }

  void connect(Store& store);

  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    Peer& p = usable_peer(peer, "send to");
    const RequestId id = next_id_++;
    const size_t nstreams = p.streams.size();
    // One frame per message on a single stream; stripes of kChunkBytes over
    // several streams, so that each stream carries a share of a large message.
    const size_t chunk = nstreams == 1 || bytes <= kChunkBytes ? std::max<size_t>(bytes, 1) : kChunkBytes;
    const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
    const uint64_t seq = p.send_seq++;
    sends_left_[id] = nchunks;
    ++p.sends_in_flight;
    for (size_t c = 0; c < nchunks; ++c) {
      Stream& s = *p.streams[p.next_stream++ % nstreams];
      OutChunk& oc = s.out.emplace_back();
      oc.send = id;
      FrameHeader h;
      h.seq = seq;
      h.total = bytes;
      h.offset = c * chunk;
      h.len = std::min(chunk, bytes - std::min(bytes, c * chunk));
      h.stamp = stamp;
      h.encode(oc.header);
      oc.data = static_cast<const uint8_t*>(data) + h.offset;
      oc.len = h.len;
    }
    // Eager: hand what the kernel takes now; the rest goes out in progress().
    for (Stream* s : p.streams) write_stream(*s);
    return id;
  }

  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer,
                  const CallStamp& stamp) override {
    Peer& p = usable_peer(peer, "receive from");
    const RequestId id = next_id_++;
    RecvReq& r = p.recvs.emplace_back();
    r.id = id;
    r.dst = static_cast<uint8_t*>(dst);
    r.bytes = bytes;
    r.stamp = stamp;
    if (reducer) r.reducer = *reducer;
    // Streams parked on exactly this message can go on now.
    const uint64_t seq = p.recv_base + p.recvs.size() - 1;
    for (Stream* s : p.streams) {
      if (s->parked && s->frame.seq == seq) {
        s->parked = false;
        start_chunk(*s);
        update_events(*s);
        if (!s->in_payload) continue;
        read_stream(*s);
      }
    }
    return id;
  }

  void poll(std::vector<RequestId>& done) override {
    progress(0);
    take(done);
  }

  void begin_call(const CallStamp& stamp) override {
    current_ = stamp;
    if (!stamp.point_to_point()) collectives_ = stamp.seq;
    // A message of this call number parked here before the call began, with
    // another stamp: the peer is in another call, though this rank may never
    // post a receive from it.
    for (const Peer& p : peers_)
      for (const Stream* st : p.streams)
        check_parked(*st);
    // One look at the sockets (an epoll_wait that does not block): an abort
    // frame from any peer fails this call at its start.
    progress(0);
    if (failure_) raise_failure();
  }

  // A parked message (its header read, no receive posted for it) of this
  // rank's current collective call number with another stamp proves that
  // its sender is in another call: a broadcast rooted elsewhere sends to
  // ranks that receive from no one on that path.
  void check_parked(const Stream& s) {
    if (!s.parked || s.closed || s.frame.offset != 0 || !calls_disagree(current_, s.frame.stamp))
      return;
    record_failure(std::make_exception_ptr(StampMismatch(rank_, s.peer, current_, s.frame.stamp)),
                   false);
  }

  // Asks every connected peer where it is; a peer answers from its own
  // progress loop, that is, while it is inside a call.
  std::vector<PeerProgress> peer_progress(Deadline deadline) override {
    const std::vector<int> asked = query_status();
    auto all_answered = [&] {
      for (int q : asked)
        if (!peers_[static_cast<size_t>(q)].answered) return false;
      return true;
    };
    try {
      while (!all_answered() && Clock::now() < deadline) progress(poll_timeout_ms(deadline));
    } catch (const Error&) {
      // A report is made on the way to an error: what arrived so far is it.
    }
    std::vector<PeerProgress> out;
    for (int q = 0; q < size_; ++q) {
      const Peer& p = peers_[static_cast<size_t>(q)];
      if (!p.connected) continue;
      PeerProgress pp;
      pp.rank = q;
      pp.responsive = p.answered;
      if (p.answered) {
        pp.last = p.answered_call;
        pp.collectives_entered = p.answered_collectives;
      } else {
        pp.last = p.last_heard;
        pp.collectives_entered = p.last_heard.point_to_point() ? 0 : p.last_heard.seq;
        // A peer whose message of a later call waits here, parked, was
        // ahead when it sent it; that does not make it reachable now (it
        // may have returned to its own work, or its link may be down), so
        // it is reported as not answering, with what is known of it.
        const bool ahead = std::any_of(p.streams.begin(), p.streams.end(),
                                       [](const Stream* st) { return st->parked; });
        const bool closed = p.control == nullptr || p.control->closed;
        pp.note = closed ? "has closed its connections"
                         : "does not answer (stopped, or busy outside chorus)";
        if (ahead && !closed) pp.note += "; a message it sent for a later call waits here";
      }
      out.push_back(std::move(pp));
    }
    return out;
  }

  void wait_some(std::vector<RequestId>& done, Deadline deadline) override {
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
    // compared as they arrive, in header_done).
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

  void interrupt() override {
    interrupted_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  }

  void abort(ErrorCode cause, const std::string& reason) override {
    if (aborted_) return;
    aborted_ = true;
    // The abort frame goes over each peer's control connection, which the
    // peer always reads (a data connection may wait, parked, behind a
    // message the peer has not asked for). A status frame half written
    // there is finished first; if the peer does not take the few bytes in
    // kByeGrace, it will see the connection close without a goodbye.
    const std::string text = reason.substr(0, kMaxAbortReason);
    const Deadline until = Clock::now() + kByeGrace;
    for (Peer& p : peers_) {
      Stream* s = p.control;
      if (s == nullptr || s->closed) continue;
      std::string error;
      try {
        if (!s->out.empty() && s->out.front().written > 0) {
          OutChunk& c = s->out.front();
          write_all(s->fd.get(), c.header + c.written, kHeaderBytes - c.written, until, "status",
                    error);
        }
        std::vector<uint8_t> frame(kHeaderBytes + text.size());
        FrameHeader fh;
        fh.kind = frame_abort;
        fh.seq = static_cast<uint64_t>(cause);  // an abort frame's seq is its cause
        fh.total = fh.len = text.size();
        fh.encode(frame.data());
        std::memcpy(frame.data() + kHeaderBytes, text.data(), text.size());
        write_all(s->fd.get(), frame.data(), frame.size(), until, "abort", error);
      } catch (const Error&) {
        // The peer is gone or stuck; it learns of the end from the closed
        // connection.
      }
      s->out.clear();
      ::shutdown(s->fd.get(), SHUT_WR);
    }
  }

 private:
  std::string where() const { return str_cat("rank ", rank_, ": tcp: "); }

  // The cause an abort frame carries in its seq (peer_failure when unknown).
  static ErrorCode abort_cause(const FrameHeader& h) {
    return h.seq <= static_cast<uint64_t>(ErrorCode::internal) ? static_cast<ErrorCode>(h.seq)
                                                               : ErrorCode::peer_failure;
  }

  // Whether interrupt() was called since the last look (which clears it).
  bool interrupted() {
    return interrupted_.load(std::memory_order_relaxed) &&
           interrupted_.exchange(false, std::memory_order_acquire);
  }

  Peer& usable_peer(int peer, const char* what) {
    if (peer < 0 || peer >= size_ || peer == rank_ || !peers_[static_cast<size_t>(peer)].connected)
      fail(ErrorCode::internal, where(), "cannot ", what, " peer ", peer, " (not connected)");
    if (aborted_) fail(ErrorCode::aborted, where(), "transport was aborted");
    if (failure_) raise_failure();
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (p.streams_closed == p.streams.size() + 1)
      fail(ErrorCode::peer_failure, where(), "peer ", peer,
           " has closed its communicator; cannot ", what, " it");
    return p;
  }

  // Records the first failure; poll() and wait_some() raise it. A failure a
  // peer reported itself (an abort frame with its reason) is the cause; one
  // inferred from a closed connection is often its consequence (a third rank
  // learnt of the cause first and went away), so until the failure has been
  // raised, a reported one replaces an inferred one.
  void peer_failed(int peer, ErrorCode code, const std::string& what) {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    const std::string heard =
        p.last_heard.kind == 0
            ? std::string()
            : str_cat(" (last heard from in ",
                      p.last_heard.point_to_point() ? "its point-to-point message " : "call ",
                      p.last_heard.seq, ": ", describe(p.last_heard, ""), ")");
    record_failure(std::make_exception_ptr(Error(code, str_cat(where(), "peer ", peer, heard, " ", what))),
                   false);
  }
  // A peer's abort frame: its reason is the origin of the failure.
  void peer_reported(int peer, ErrorCode cause, const std::string& reason) {
    record_failure(std::make_exception_ptr(PeerAborted(
                       peer_code(cause),
                       str_cat(where(), "peer ", peer, " ", peer_verb(cause), ": ", reason), reason)),
                   true);
  }
  void record_failure(std::exception_ptr error, bool reported) {
    if (failure_ && (failure_raised_ || failure_reported_ || !reported)) return;
    failure_ = std::move(error);
    failure_reported_ = reported;
    try {
      std::rethrow_exception(failure_);
    } catch (const Error& e) {
      failure_code_ = e.code();
      failure_text_ = e.what();
    }
    log_message(options_.log_level, LogLevel::warn, rank_, failure_text_);
  }

  [[noreturn]] void raise_failure() {
    failure_raised_ = true;
    std::rethrow_exception(failure_);
  }

  // Sends a status query to every connected peer; returns whom it asked.
  std::vector<int> query_status() {
    std::vector<int> asked;
    for (int q = 0; q < size_; ++q) {
      Peer& p = peers_[static_cast<size_t>(q)];
      if (!p.connected || p.control == nullptr || p.control->closed) continue;
      p.answered = false;
      FrameHeader h;
      h.kind = tcp::frame_status_query;
      queue_control(*p.control, h);
      asked.push_back(q);
    }
    return asked;
  }

  // Queues a frame without payload on `s` (after what is queued there).
  void queue_control(Stream& s, const FrameHeader& h) {
    if (s.closed) return;
    OutChunk& oc = s.out.emplace_back();
    h.encode(oc.header);
    write_stream(s);
  }

  // Requests that completed before a failure was seen are delivered first:
  // a peer that sent its last message and then went away (a rank that
  // finished its part) must not fail a call it had already served. The
  // failure is raised at the next take() that has nothing to deliver, and
  // at the next isend, irecv or call.
  bool take(std::vector<RequestId>& done) {
    if (aborted_) fail(ErrorCode::aborted, where(), "transport was aborted");
    if (completed_.empty()) {
      if (failure_) raise_failure();
      return false;
    }
    done.insert(done.end(), completed_.begin(), completed_.end());
    completed_.clear();
    return true;
  }

  void update_events(Stream& s) {
    uint32_t want = 0;
    if (!s.closed) {
      // A parked stream is not read, but it still listens (once) for the
      // peer closing its side, so that the death of a peer whose chunk waits
      // here is noticed at once.
      if (!s.parked) want |= EPOLLIN | EPOLLRDHUP;
      else if (!s.rdhup) want |= EPOLLRDHUP;
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

  void progress(int timeout_ms) {
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

  // The peer closed its side while its next chunk waits unread in the kernel.
  // A peer that closed on purpose sent a goodbye after its data, so more than
  // the chunk's payload is queued; exactly the payload (or less) means it
  // died after (or while) sending it.
  void parked_hangup(Stream& s, uint32_t events) {
    if (events & (EPOLLHUP | EPOLLERR)) {
      stream_error(s, "connection reset");
      return;
    }
    s.rdhup = true;
    int queued = 0;
    if (::ioctl(s.fd.get(), FIONREAD, &queued) != 0 ||
        static_cast<uint64_t>(queued) <= s.frame.len) {
      peer_failed(s.peer, ErrorCode::peer_failure,
                  "closed its connection without a goodbye (the process died or was killed?)");
      close_stream(s);
      return;
    }
    update_events(s);
  }

  // After set-up the mesh is complete: any further connection is refused.
  void refuse_late_connections() {
    while (true) {
      Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) return;
      fd.reset();
      log_message(options_.log_level, LogLevel::warn, rank_,
                  "tcp: refused a connection after set-up (the mesh is complete)");
    }
  }

  void complete_send_chunk(RequestId id, int peer) {
    auto it = sends_left_.find(id);
    if (--it->second == 0) {
      sends_left_.erase(it);
      --peers_[static_cast<size_t>(peer)].sends_in_flight;
      completed_.push_back(id);
    }
  }

  void write_stream(Stream& s) {
    while (!s.out.empty() && !s.closed) {
      OutChunk& c = s.out.front();
      iovec iov[2];
      int cnt = 0;
      if (c.written < kHeaderBytes)
        iov[cnt++] = {c.header + c.written, kHeaderBytes - c.written};
      const size_t data_done = c.written > kHeaderBytes ? c.written - kHeaderBytes : 0;
      if (c.len > data_done)
        iov[cnt++] = {const_cast<uint8_t*>(c.data) + data_done, c.len - data_done};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(cnt);
      const ssize_t n = ::sendmsg(s.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        stream_error(s, errno_text(errno));
        return;
      }
      c.written += static_cast<size_t>(n);
      if (c.written == kHeaderBytes + c.len) {
        const RequestId id = c.send;
        s.out.pop_front();
        if (id != 0) complete_send_chunk(id, s.peer);
      }
    }
    update_events(s);
  }

  void stream_error(Stream& s, const std::string& what) {
    peer_failed(s.peer, ErrorCode::peer_failure, str_cat("lost its connection: ", what));
    close_stream(s);
  }

  void close_stream(Stream& s) {
    if (s.closed) return;
    s.closed = true;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
    Peer& p = peers_[static_cast<size_t>(s.peer)];
    ++p.streams_closed;
    if (p.streams_closed == p.streams.size() + 1 && (p.sends_in_flight > 0 || !p.recvs.empty()))
      peer_failed(s.peer, ErrorCode::peer_failure,
                  "closed its communicator while this rank still waits for a message with it");
  }

  // The header in s.frame is complete and its receive is posted (or not).
  // Validates the header against the receive and starts reading the payload.
  void start_chunk(Stream& s) {
    Peer& p = peers_[static_cast<size_t>(s.peer)];
    const FrameHeader& h = s.frame;
    if (h.seq < p.recv_base) {
      protocol_error(s, str_cat("sent a chunk of message ", h.seq, " which is already complete"));
      return;
    }
    const uint64_t index = h.seq - p.recv_base;
    if (h.offset == 0) p.last_heard = h.stamp;
    if (index >= p.recvs.size()) {
      s.parked = true;  // waits in the kernel for its irecv
      check_parked(s);
      return;
    }
    RecvReq& r = p.recvs[index];
    if (h.stamp != r.stamp) {
      // Refused before a byte of it is read.
      record_failure(std::make_exception_ptr(StampMismatch(rank_, s.peer, r.stamp, h.stamp)),
                     false);
      close_stream(s);
      return;
    }
    if (h.total != r.bytes) {
      peer_failed(s.peer, ErrorCode::mismatch,
                  str_cat("sends a message of ", h.total, " B where this rank expects ", r.bytes,
                          " B (message ", h.seq, " between them)"));
      close_stream(s);
      return;
    }
    const size_t es = r.reducer ? dtype_size(r.reducer->type) : 1;
    if (const std::string problem = tcp::chunk_problem(h, es); !problem.empty()) {
      protocol_error(s, str_cat("sent a ", problem));
      return;
    }
    s.target = &r;
    s.in_payload = true;
    s.got = s.applied = s.staged = 0;
    if (h.len == 0) finish_chunk(s);
  }

  void protocol_error(Stream& s, const std::string& what) {
    peer_failed(s.peer, ErrorCode::mismatch, str_cat("broke the frame protocol: ", what));
    close_stream(s);
  }

  void finish_chunk(Stream& s) {
    RecvReq& r = *s.target;
    r.received += s.frame.len;
    s.in_payload = false;
    s.header_got = 0;
    s.target = nullptr;
    if (r.received < r.bytes) return;
    r.complete = true;
    completed_.push_back(r.id);
    Peer& p = peers_[static_cast<size_t>(s.peer)];
    while (!p.recvs.empty() && p.recvs.front().complete) {
      p.recvs.pop_front();
      ++p.recv_base;
    }
  }

  // Handles the EOF of a stream at a frame boundary.
  void stream_eof(Stream& s) {
    if (s.header_got > 0 || s.in_payload)
      peer_failed(s.peer, ErrorCode::peer_failure,
                  "closed its connection in the middle of a message (the process died?)");
    else if (!s.bye)
      peer_failed(s.peer, ErrorCode::peer_failure,
                  "closed its connection without a goodbye (the process died or was killed?)");
    close_stream(s);
  }

  void read_stream(Stream& s) {
    size_t budget = kReadBudget;
    while (!s.closed && !s.parked && budget > 0) {
      void* into;
      size_t want;
      if (!s.in_payload) {
        into = s.header + s.header_got;
        want = kHeaderBytes - s.header_got;
      } else if (s.frame.kind == frame_abort) {
        into = s.abort_reason.data() + s.got;
        want = s.frame.len - s.got;
      } else if (!s.target->reducer) {
        into = s.target->dst + s.frame.offset + s.got;
        want = s.frame.len - s.got;
      } else {
        if (s.staging.empty()) s.staging.resize(kStagingBytes);
        into = s.staging.data() + s.staged;
        want = std::min(s.frame.len - s.got, kStagingBytes - s.staged);
      }
      want = std::min(want, budget);
      const ssize_t n = ::recv(s.fd.get(), into, want, MSG_DONTWAIT);
      if (n == 0) {
        stream_eof(s);
        return;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        stream_error(s, errno_text(errno));
        return;
      }
      const auto got = static_cast<size_t>(n);
      budget -= got;
      if (!s.in_payload) {
        s.header_got += got;
        if (s.header_got == kHeaderBytes) header_done(s);
        continue;
      }
      s.got += got;
      if (s.frame.kind == frame_abort) {
        if (s.got == s.frame.len) {
          peer_reported(s.peer, abort_cause(s.frame), s.abort_reason);
          close_stream(s);
        }
        continue;
      }
      if (s.target->reducer) {
        // Reduce every whole element staged so far; a partial element (the
        // kernel may split a read anywhere) waits at the front for its rest.
        const Reducer& red = *s.target->reducer;
        const size_t es = dtype_size(red.type);
        s.staged += got;
        const size_t whole = s.staged / es * es;
        if (whole > 0) {
          const size_t at = s.frame.offset + s.applied;
          reduce_into(red.type, red.op, s.target->dst + at,
                      static_cast<const uint8_t*>(red.local) + at, s.staging.data(), whole / es);
          s.applied += whole;
          s.staged -= whole;
          if (s.staged > 0) std::memmove(s.staging.data(), s.staging.data() + whole, s.staged);
        }
      }
      if (s.got == s.frame.len) finish_chunk(s);
    }
  }

  void header_done(Stream& s) {
    s.frame = FrameHeader::decode(s.header);
    const FrameHeader& h = s.frame;
    if (const std::string problem = tcp::frame_problem(h); !problem.empty()) {
      protocol_error(s, problem);
      return;
    }
    if (h.kind == frame_bye) {
      s.bye = true;
      s.header_got = 0;
      return;
    }
    if (h.kind == tcp::frame_status_query) {
      s.header_got = 0;
      FrameHeader answer;
      answer.kind = tcp::frame_status;
      answer.seq = collectives_;
      answer.stamp = current_;
      queue_control(s, answer);
      return;
    }
    if (h.kind == tcp::frame_status) {
      s.header_got = 0;
      Peer& p = peers_[static_cast<size_t>(s.peer)];
      p.answered = true;
      p.answered_collectives = static_cast<uint32_t>(h.seq);
      p.answered_call = h.stamp;
      if (calls_disagree(current_, h.stamp))
        record_failure(std::make_exception_ptr(StampMismatch(rank_, s.peer, current_, h.stamp)),
                       false);
      return;
    }
    if (s.control && h.kind == frame_data) {
      protocol_error(s, "sent a data frame on its control connection");
      return;
    }
    if (h.kind == frame_abort) {
      s.abort_reason.assign(h.len, '\0');
      s.in_payload = true;
      s.got = 0;
      s.target = nullptr;
      if (h.len == 0) {
        peer_reported(s.peer, abort_cause(h), "");
        close_stream(s);
      }
      return;
    }
    start_chunk(s);
    if (s.parked) update_events(s);
  }

  void close_all() {
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
          // A peer that does not take 40 bytes in kByeGrace will see an EOF
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

  // --- set-up --------------------------------------------------------------

  // Registers one connection that tcp::connect_mesh established.
  void add_stream(Fd fd, int peer, uint32_t index) {
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

  int rank_;
  int size_;
  TcpOptions options_;
  std::vector<Peer> peers_;
  Fd epoll_;
  Fd wake_;  // an eventfd in epoll_: interrupt() writes it
  std::atomic<bool> interrupted_{false};
  Fd listen_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unordered_map<RequestId, size_t> sends_left_;  // chunks not yet written
  std::vector<RequestId> completed_;
  std::exception_ptr failure_;
  ErrorCode failure_code_ = ErrorCode::internal;
  std::string failure_text_;
  bool failure_reported_ = false;  // failure_ came from the peer's abort frame
  bool failure_raised_ = false;    // failure_ has been thrown: it stays
  bool aborted_ = false;
  RequestId next_id_ = 1;
  CallStamp current_;          // the call this rank is in (status answers)
  uint32_t collectives_ = 0;   // the number of its last collective call
};

void TcpTransport::connect(Store& store) {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !tcp::connects_to(options_, p)) continue;
    peers_[static_cast<size_t>(p)].connected = true;
    peers_[static_cast<size_t>(p)].streams.assign(options_.streams, nullptr);
  }
  // The data streams and, last, the control stream of every peer.
  TcpOptions mesh = options_;
  mesh.streams = options_.streams + 1;
  listen_ = tcp::connect_mesh(store, rank_, size_, mesh,
                              [this](Fd fd, int peer, uint32_t stream) {
                                add_stream(std::move(fd), peer, stream);
                              });
  // The mesh is complete: the listener now only refuses late connections.
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev) != 0)
    fail(ErrorCode::system, where(), "epoll_ctl: ", errno_text(errno));
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Store& store, int rank, int size,
                                              const TcpOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::invalid_argument, "tcp transport: rank ", rank, " outside [0, ", size, ")");
  if (!options.peers.empty() && options.peers.size() != static_cast<size_t>(size))
    fail(ErrorCode::invalid_argument, "tcp transport: peers mask has ", options.peers.size(),
         " entries for ", size, " ranks");
  auto t = std::make_unique<TcpTransport>(rank, size, options);
  t->connect(store);
  return t;
}

}  // namespace chorus
