// The tcp transport's control frames and failures: abort (sent over each
// peer's control connection, which is never parked), bye, status queries and
// their answers, the stall report built from them, and the recording of the
// first failure, where a reason a peer reported outranks one inferred from a
// closed connection.
#include "transport/tcp/tcp_transport_impl.h"

#include "core/check.h"
#include "core/log.h"
#include "net/socket.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace chorus::tcp {

void TcpTransport::abort(ErrorCode cause, const std::string& reason) {
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

void TcpTransport::control_frame(Stream& s) {
  const FrameHeader& h = s.frame;
  if (h.kind == frame_bye) {
    s.bye = true;
    s.header_got = 0;
    return;
  }
  if (h.kind == frame_status_query) {
    s.header_got = 0;
    FrameHeader answer;
    answer.kind = frame_status;
    answer.seq = collectives_;
    answer.stamp = current_;
    queue_control(s, answer);
    return;
  }
  if (h.kind == frame_status) {
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
  CHORUS_CHECK(h.kind == frame_abort);  // frame_problem admits no other kind
  // The reason follows as the payload (read_stream), unless there is none.
  s.abort_reason.assign(h.len, '\0');
  s.in_payload = true;
  s.got = 0;
  s.target = nullptr;
  if (h.len == 0) abort_frame_done(s);
}

void TcpTransport::abort_frame_done(Stream& s) {
  peer_reported(s.peer, abort_cause(s.frame), s.abort_reason);
  close_stream(s);
}

ErrorCode TcpTransport::abort_cause(const FrameHeader& h) {
  return h.seq <= static_cast<uint64_t>(ErrorCode::internal) ? static_cast<ErrorCode>(h.seq)
                                                             : ErrorCode::peer_failure;
}

std::vector<int> TcpTransport::query_status() {
  std::vector<int> asked;
  for (int q = 0; q < size_; ++q) {
    Peer& p = peers_[static_cast<size_t>(q)];
    if (!p.connected || p.control == nullptr || p.control->closed) continue;
    p.answered = false;
    FrameHeader h;
    h.kind = frame_status_query;
    queue_control(*p.control, h);
    asked.push_back(q);
  }
  return asked;
}

std::vector<PeerProgress> TcpTransport::peer_progress(Deadline deadline) {
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

void TcpTransport::peer_failed(int peer, ErrorCode code, const std::string& what) {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  const std::string heard =
      p.last_heard.kind == 0
          ? std::string()
          : str_cat(" (last heard from in ",
                    p.last_heard.point_to_point() ? "its point-to-point message " : "call ",
                    p.last_heard.seq, ": ", describe(p.last_heard, ""), ")");
  record_failure(
      std::make_exception_ptr(Error(code, str_cat(where(), "peer ", peer, heard, " ", what))),
      false);
}

void TcpTransport::peer_reported(int peer, ErrorCode cause, const std::string& reason) {
  record_failure(std::make_exception_ptr(PeerAborted(
                     peer_code(cause),
                     str_cat(where(), "peer ", peer, " ", peer_verb(cause), ": ", reason), reason)),
                 true);
}

void TcpTransport::record_failure(std::exception_ptr error, bool reported) {
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

void TcpTransport::raise_failure() {
  failure_raised_ = true;
  std::rethrow_exception(failure_);
}

}  // namespace chorus::tcp
