// The shm transport's liveness and failures: the call each rank publishes in
// its segment (a sequence lock), the stall report read from it, aborts
// (a flag and reason in the aborting rank's segment), and peers that exited
// (pidfd) or closed their transport.
#include "transport/shm/shm_transport_impl.h"

#include "core/check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace chorus::shm {
namespace {

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

void ShmTransport::check_peer(int peer) {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.header == nullptr) return;
  check_not_aborted(p);
  const bool closed = p.header->closed.load(std::memory_order_acquire) != 0;
  if (closed || process_exited(p.pidfd, p.pid))
    fail(ErrorCode::peer_failure, "rank ", rank_, ": shm: peer ", peer, " (pid ", p.pid, ") ",
         closed ? "closed its transport" : "exited", call_of(p),
         " while this rank waits for its signal");
}

void ShmTransport::begin_call(const CallStamp& stamp) {
  current_ = stamp;
  if (own_ == nullptr) return;
  const uint32_t v = own_->call_version.load(std::memory_order_relaxed);
  own_->call_version.store(v + 1, std::memory_order_relaxed);
  store_stamp(own_->call, stamp);  // release: after the odd version
  if (!stamp.point_to_point()) own_->collectives.store(stamp.seq, std::memory_order_release);
  own_->call_version.store(v + 2, std::memory_order_release);
  // A peer that aborted fails this call now, even one this call would not
  // exchange a message with. It flagged this rank's own header first.
  if (own_->peer_aborted.load(std::memory_order_acquire) != 0)
    for (const Peer& p : peers_)
      if (p.header != nullptr) check_not_aborted(p);
}

void ShmTransport::abort(ErrorCode cause, const std::string& reason) {
  if (own_ == nullptr) return;
  const size_t n = std::min(reason.size(), kReasonBytes - 1);
  std::memcpy(own_->reason, reason.data(), n);
  own_->reason[n] = '\0';
  // 1 + the cause's code, so that 0 stays "not aborted".
  own_->aborted.store(1 + static_cast<uint32_t>(cause), std::memory_order_release);
  for (const Peer& p : peers_)
    if (p.header != nullptr) p.header->peer_aborted.store(1, std::memory_order_release);
  ring_everyone();
}

std::vector<PeerProgress> ShmTransport::peer_progress(Deadline) {
  std::vector<PeerProgress> out;
  const int64_t now = steady_ns();
  for (const Peer& p : peers_) {
    if (p.header == nullptr) continue;
    PeerProgress pp;
    pp.rank = p.rank;
    read_call(p, pp.last, pp.collectives_entered);
    const double silent =
        static_cast<double>(now - p.header->alive_ns.load(std::memory_order_relaxed)) * 1e-9;
    if (p.header->closed.load(std::memory_order_acquire) != 0) {
      pp.note = "closed its transport";
    } else if (process_exited(p.pidfd, p.pid)) {
      pp.note = str_cat("exited (pid ", p.pid, ")");
    } else if (silent > 2 * std::chrono::duration<double>(kLivenessPeriod).count()) {
      // A rank inside a call polls at least every kLivenessPeriod; one that
      // does not is stopped, or busy outside chorus.
      pp.note = str_cat("has not polled for ", fixed1(silent), " s (pid ", p.pid, ")");
    } else {
      pp.responsive = true;
    }
    out.push_back(std::move(pp));
  }
  return out;
}

void ShmTransport::bad_peer(int peer, const char* what) const {
  fail(ErrorCode::invalid_argument, "rank ", rank_, ": shm ", what, ": bad peer ", peer,
       " (group of ", size_, ")");
}

void ShmTransport::raise_peer_aborted(const Peer& p, uint32_t flag) const {
  std::string reason(p.header->reason, strnlen(p.header->reason, kReasonBytes));
  const auto cause = flag - 1 <= static_cast<uint32_t>(ErrorCode::internal)
                         ? static_cast<ErrorCode>(flag - 1)
                         : ErrorCode::peer_failure;
  throw PeerAborted(
      peer_code(cause),
      str_cat("rank ", rank_, ": shm: peer ", p.rank, " ", peer_verb(cause), ": ", reason), reason);
}

void ShmTransport::check_peers(std::vector<RequestId>& done) {
  for (const Peer& p : peers_) {
    if (p.header == nullptr) continue;
    // A refused message first: the peer aborts right after refusing it,
    // and the mismatch is the better report.
    check_send_error(p);
    check_not_aborted(p);
    CallStamp theirs;
    uint32_t collectives = 0;
    if (read_call(p, theirs, collectives) && calls_disagree(current_, theirs))
      throw StampMismatch(rank_, p.rank, current_, theirs);
    check_unread_message(p);
  }
  // Probing liveness costs a system call per peer: at most once a period.
  const auto now = Clock::now();
  const bool probe = now - last_liveness_probe_ >= kLivenessPeriod / 2;
  if (probe) last_liveness_probe_ = now;
  std::vector<int> gone;
  for (const Peer& p : peers_) {
    if (p.header == nullptr || (p.sends.empty() && p.recvs.empty())) continue;
    if (p.header->closed.load(std::memory_order_acquire) != 0 ||
        (probe && process_exited(p.pidfd, p.pid)))
      gone.push_back(p.rank);
  }
  if (gone.empty()) return;
  // What a peer published before it left is visible now; use it first.
  const size_t before = done.size();
  progress(done);
  if (done.size() > before) return;
  for (int g : gone) {
    const Peer& p = peers_[static_cast<size_t>(g)];
    if (p.sends.empty() && p.recvs.empty()) continue;
    fail(ErrorCode::peer_failure, "rank ", rank_, ": shm: peer ", g, " (pid ", p.pid, ") ",
         p.header->closed.load(std::memory_order_acquire) != 0 ? "closed its transport" : "exited",
         call_of(p), " while this rank still has ", p.sends.size(), " send(s) and ", p.recvs.size(),
         " receive(s) pending with it");
  }
}

bool ShmTransport::read_call(const Peer& p, CallStamp& stamp, uint32_t& collectives) {
  const SegmentHeader& h = *p.header;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint32_t v = h.call_version.load(std::memory_order_acquire);
    if (v % 2 != 0) continue;
    stamp = load_stamp(h.call);  // acquire: before the second look
    collectives = h.collectives.load(std::memory_order_acquire);
    if (h.call_version.load(std::memory_order_relaxed) == v) return true;
  }
  stamp = {};
  collectives = 0;
  return false;
}

std::string ShmTransport::call_of(const Peer& p) {
  CallStamp stamp;
  uint32_t collectives = 0;
  read_call(p, stamp, collectives);
  if (stamp.kind == 0) return {};
  return str_cat(" (", stamp.point_to_point() ? "in its point-to-point message " : "in call ",
                 stamp.seq, ": ", describe(stamp, ""), ")");
}

}  // namespace chorus::shm
