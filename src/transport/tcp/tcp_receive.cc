// The tcp transport's receive side: receives matched FIFO per peer by
// message number, frames read straight into their destination (or through a
// staging slice and reduced into it), streams parked in the kernel while
// their message has no receive, and the ends of streams (EOF, errors,
// broken frames).
#include "transport/tcp/tcp_transport_impl.h"

#include "core/check.h"
#include "core/reduce_kernels.h"
#include "net/socket.h"

#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::tcp {

RequestId TcpTransport::irecv(int peer, void* dst, size_t bytes, const Reducer* reducer,
                              const CallStamp& stamp, WriteMode store) {
  Peer& p = usable_peer(peer, "receive from");
  const RequestId id = next_id_++;
  RecvReq& r = p.recvs.emplace_back();
  r.id = id;
  r.dst = static_cast<uint8_t*>(dst);
  r.bytes = bytes;
  r.stamp = stamp;
  if (reducer) r.reducer = *reducer;
  r.store = store;
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

Peer& TcpTransport::usable_peer(int peer, const char* what) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !peers_[static_cast<size_t>(peer)].connected)
    fail(ErrorCode::internal, where(), "cannot ", what, " peer ", peer, " (not connected)");
  if (aborted_) fail(ErrorCode::aborted, where(), "transport was aborted");
  if (failure_) raise_failure();
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.streams_closed == p.streams.size() + 1)
    fail(ErrorCode::peer_failure, where(), "peer ", peer, " has closed its communicator; cannot ",
         what, " it");
  return p;
}

void TcpTransport::read_stream(Stream& s) {
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
      if (s.got == s.frame.len) abort_frame_done(s);
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
                    static_cast<const uint8_t*>(red.local) + at, s.staging.data(), whole / es,
                    s.target->store);
        s.applied += whole;
        s.staged -= whole;
        if (s.staged > 0) std::memmove(s.staging.data(), s.staging.data() + whole, s.staged);
      }
    }
    if (s.got == s.frame.len) finish_chunk(s);
  }
}

void TcpTransport::header_done(Stream& s) {
  s.frame = FrameHeader::decode(s.header);
  const FrameHeader& h = s.frame;
  if (const std::string problem = frame_problem(h); !problem.empty()) {
    protocol_error(s, problem);
    return;
  }
  if (h.kind != frame_data) {
    control_frame(s);
    return;
  }
  if (s.control) {
    protocol_error(s, "sent a data frame on its control connection");
    return;
  }
  start_chunk(s);
  if (s.parked) update_events(s);
}

void TcpTransport::start_chunk(Stream& s) {
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
    record_failure(std::make_exception_ptr(StampMismatch(rank_, s.peer, r.stamp, h.stamp)), false);
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
  if (const std::string problem = chunk_problem(h, es); !problem.empty()) {
    protocol_error(s, str_cat("sent a ", problem));
    return;
  }
  s.target = &r;
  s.in_payload = true;
  s.got = s.applied = s.staged = 0;
  if (h.len == 0) finish_chunk(s);
}

void TcpTransport::finish_chunk(Stream& s) {
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

std::optional<CallStamp> TcpTransport::waiting_message(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_) return std::nullopt;
  const Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.recvs.empty()) return std::nullopt;
  // A chunk of the next message, parked: its first chunk carries the stamp
  // as every chunk does.
  for (const Stream* s : p.streams)
    if (s->parked && !s->closed && s->frame.seq == p.recv_base) return s->frame.stamp;
  return std::nullopt;
}

void TcpTransport::check_parked(const Stream& s) {
  if (!s.parked || s.closed || s.frame.offset != 0 || !calls_disagree(current_, s.frame.stamp))
    return;
  record_failure(std::make_exception_ptr(StampMismatch(rank_, s.peer, current_, s.frame.stamp)),
                 false);
}

void TcpTransport::parked_hangup(Stream& s, uint32_t events) {
  if (events & (EPOLLHUP | EPOLLERR)) {
    stream_error(s, "connection reset");
    return;
  }
  s.rdhup = true;
  int queued = 0;
  if (::ioctl(s.fd.get(), FIONREAD, &queued) != 0 || static_cast<uint64_t>(queued) <= s.frame.len) {
    peer_failed(s.peer, ErrorCode::peer_failure,
                "closed its connection without a goodbye (the process died or was killed?)");
    close_stream(s);
    return;
  }
  update_events(s);
}

void TcpTransport::stream_eof(Stream& s) {
  if (s.header_got > 0 || s.in_payload)
    peer_failed(s.peer, ErrorCode::peer_failure,
                "closed its connection in the middle of a message (the process died?)");
  else if (!s.bye)
    peer_failed(s.peer, ErrorCode::peer_failure,
                "closed its connection without a goodbye (the process died or was killed?)");
  close_stream(s);
}

void TcpTransport::stream_error(Stream& s, const std::string& what) {
  peer_failed(s.peer, ErrorCode::peer_failure, str_cat("lost its connection: ", what));
  close_stream(s);
}

void TcpTransport::protocol_error(Stream& s, const std::string& what) {
  peer_failed(s.peer, ErrorCode::mismatch, str_cat("broke the frame protocol: ", what));
  close_stream(s);
}

void TcpTransport::close_stream(Stream& s) {
  if (s.closed) return;
  s.closed = true;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
  Peer& p = peers_[static_cast<size_t>(s.peer)];
  ++p.streams_closed;
  if (p.streams_closed == p.streams.size() + 1 && (p.sends_in_flight > 0 || !p.recvs.empty()))
    peer_failed(s.peer, ErrorCode::peer_failure,
                "closed its communicator while this rank still waits for a message with it");
}

}  // namespace chorus::tcp
