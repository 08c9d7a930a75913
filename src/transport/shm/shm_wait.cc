// How an shm rank waits: progress passes over every peer; a spin (without
// yielding when the rank has a core of its own, else yielding after a few
// microseconds); then sleeps on its futex doorbell, at most kLivenessPeriod
// each, which peers ring only when it said it sleeps.
#include "transport/shm/shm_transport_impl.h"

#include "core/check.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace chorus::shm {

void ShmTransport::wait_some(std::vector<RequestId>& done, Deadline deadline) {
  const size_t before = done.size();
  if (own_ == nullptr) {
    // A group of one has no peer, so nothing can ever complete.
    std::this_thread::sleep_until(deadline);
    return;
  }
  // Liveness for stall reports: a clock read costs as much as a whole
  // small message, so a wait that completes at once stamps it only every
  // kAliveStride-th time; one that spins stamps it below.
  if (++waits_ % kAliveStride == 0) own_->alive_ns.store(steady_ns(), std::memory_order_relaxed);
  progress(done);
  if (done.size() > before || interrupted()) return;

  // Spin phase: cheap polls. A rank on a core of its own spins there for
  // the whole budget. Otherwise only the first few microseconds spin on
  // the core (and not at all with more ranks than CPUs); after that every
  // poll yields, because the peer we wait for may need this very core --
  // on a busy host it often does, and a pure spin would then cost the
  // whole budget plus a futex wake-up per message.
  if (!oversubscribed_) {
    // A reply is often a fraction of a microsecond away: poll before
    // paying for the first clock read.
    for (int i = 0; i < kPollsPerClockRead; ++i) {
      cpu_relax();
      progress(done);
      if (done.size() > before) return;
    }
  }
  const auto start = Clock::now();
  own_->alive_ns.store(to_ns(start), std::memory_order_relaxed);
  const auto spin_end = start + spin_;
  if (!oversubscribed_) {
    // A rank bound to a core no other rank may use spins its whole budget
    // on that core: yielding would only hand it to unrelated processes,
    // and getting it back from one can take a scheduler tick.
    const auto pause_end =
        dedicated_core_ ? spin_end : start + std::min<Clock::duration>(spin_, kPausePhase);
    for (auto now = start; now < pause_end; now = Clock::now()) {
      for (int i = 0; i < kPollsPerClockRead; ++i) {
        cpu_relax();
        progress(done);
        if (done.size() > before) return;
      }
      if (interrupted()) return;
    }
  }
  for (auto now = Clock::now(); now < spin_end; now = Clock::now()) {
    ::sched_yield();
    progress(done);
    if (done.size() > before || interrupted()) return;
  }

  Doorbell& bell = own_->bell;
  while (true) {
    check_peers(done);
    if (done.size() > before) return;
    const auto now = Clock::now();
    if (now >= deadline) return;
    // seq_cst, like the index stores of the peers and their load of
    // `sleeping`: see ring_touched().
    bell.sleeping.store(1, std::memory_order_seq_cst);
    const uint32_t seen = bell.seq.load(std::memory_order_seq_cst);
    progress(done);
    if (done.size() > before) {
      bell.sleeping.store(0, std::memory_order_relaxed);
      return;
    }
    const auto nap = std::min<Clock::duration>(deadline - now, kLivenessPeriod);
    futex_wait(bell.seq, seen, std::chrono::duration_cast<std::chrono::nanoseconds>(nap));
    bell.sleeping.store(0, std::memory_order_relaxed);
    own_->alive_ns.store(steady_ns(), std::memory_order_relaxed);
    progress(done);
    if (done.size() > before || interrupted()) return;
  }
}

void ShmTransport::interrupt() {
  interrupted_.store(true, std::memory_order_release);
  if (own_ == nullptr) return;
  own_->bell.seq.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(own_->bell.seq);
}

}  // namespace chorus::shm
