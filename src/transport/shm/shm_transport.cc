// The shm transport's construction and set-up: this rank's segment is
// created and initialized before anyone sees it, published through the
// Store, the peers' segments attached and checked, the names unlinked once
// every rank has attached (so that no segment outlives the group), and the
// ranks' CPU affinities compared to decide who may spin.
// shm_transport_impl.h describes the protocol and lists the other parts.
#include "transport/shm/shm_transport_impl.h"

#include "core/check.h"

#include <bit>
#include <chrono>
#include <new>
#include <sstream>

#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

namespace chorus::shm {

ShmTransport::ShmTransport(int rank, int size, const ShmOptions& options)
    : rank_(rank),
      size_(size),
      spin_(options.spin),
      cma_threshold_(options.cma_threshold),
      layout_{size, options.slots, options.slot_bytes},
      peers_(static_cast<size_t>(size)) {}

ShmTransport::~ShmTransport() {
  if (own_ != nullptr) {
    own_->closed.store(1, std::memory_order_release);
    ring_everyone();
  }
}

namespace {

// The calling thread's CPU affinity; every CPU when it cannot be read.
CpuMask current_cpus() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    for (auto& w : m.words) w = ~uint64_t{0};
    return m;
  }
  for (size_t c = 0; c < kCpuWords * 64 && c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) m.words[c / 64] |= uint64_t{1} << (c % 64);
  return m;
}

std::string segment_key(int rank) {
  return str_cat("shm/segment/", rank);
}
std::string attached_key(int rank) {
  return str_cat("shm/attached/", rank);
}

std::vector<uint8_t> to_bytes(const std::string& s) {
  return {s.begin(), s.end()};
}
std::string from_bytes(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

}  // namespace

void ShmTransport::connect(Store& store, Deadline deadline) {
  // 1. Create this rank's segment and initialize it before anyone sees it.
  const pid_t pid = ::getpid();
  const auto nonce = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
  const std::string name = str_cat("/chorus-", pid, "-", rank_, "-", std::hex, nonce);
  const size_t bytes = layout_.total_bytes();
  own_segment_ = Segment::create(name, bytes);
  std::byte* base = own_segment_.base();
  own_ = new (base) SegmentHeader();
  own_->magic = kMagic;
  own_->version = kLayoutVersion;
  own_->rank = rank_;
  own_->size = size_;
  own_->pid = pid;
  own_->slots = layout_.slots;
  own_->slot_bytes = layout_.slot_bytes;
  own_->total_bytes = bytes;
  own_->cpus = current_cpus();
  for (int s = 0; s < size_; ++s) new (base + layout_.fifo_control_offset(s)) FifoControl();

  // 2. Publish it; attach every peer's segment.
  std::ostringstream desc;
  desc << name << ' ' << pid << ' ' << layout_.slots << ' ' << layout_.slot_bytes << ' '
       << reinterpret_cast<uint64_t>(&cma_probe_);
  store.set(segment_key(rank_), to_bytes(desc.str()));

  bool cma_ok = true;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    std::istringstream in(from_bytes(store.get(segment_key(q), deadline)));
    std::string peer_name;
    long long peer_pid = 0;
    size_t slots = 0, slot_bytes = 0;
    uint64_t probe = 0;
    if (!(in >> peer_name >> peer_pid >> slots >> slot_bytes >> probe))
      fail(ErrorCode::mismatch, "rank ", rank_, ": shm set-up: malformed segment record of peer ",
           q);
    if (slots != layout_.slots || slot_bytes != layout_.slot_bytes)
      fail(ErrorCode::mismatch, "rank ", rank_, ": shm set-up: peer ", q, " uses ", slots,
           " slots of ", slot_bytes, " B, this rank ", layout_.slots, " slots of ",
           layout_.slot_bytes, " B");
    Peer& p = peers_[static_cast<size_t>(q)];
    p.rank = q;
    p.pid = static_cast<pid_t>(peer_pid);
    p.pidfd = open_pidfd(p.pid);
    p.segment = Segment::attach(peer_name, bytes);
    p.header = reinterpret_cast<SegmentHeader*>(p.segment.base());
    if (p.header->magic != kMagic || p.header->version != kLayoutVersion || p.header->rank != q ||
        p.header->size != size_)
      fail(ErrorCode::mismatch, "rank ", rank_, ": shm set-up: segment ", peer_name, " of peer ", q,
           " does not belong to this group (rank ", p.header->rank, " of ", p.header->size, ")");
    p.out = reinterpret_cast<FifoControl*>(p.segment.base() + layout_.fifo_control_offset(rank_));
    p.out_slots = p.segment.base() + layout_.slot_area_offset(q, rank_);
    p.in = reinterpret_cast<FifoControl*>(base + layout_.fifo_control_offset(q));
    p.in_slots = base + layout_.slot_area_offset(rank_, q);

    // Can this rank read the peer's memory in one copy? (EPERM under a strict
    // ptrace policy or in some containers; then everyone uses slots.)
    uint64_t value = 0;
    iovec local{&value, sizeof value};
    iovec remote{reinterpret_cast<void*>(probe), sizeof value};
    if (::process_vm_readv(p.pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof value) ||
        value != kMagic)
      cma_ok = false;
  }

  // 3. Everyone attached: the names can go, so that no segment outlives the
  // group even if a rank is killed from now on.
  store.set(attached_key(rank_), to_bytes(cma_ok ? "1" : "0"));
  bool all_cma = cma_ok;
  for (int q = 0; q < size_; ++q)
    if (q != rank_) all_cma &= from_bytes(store.get(attached_key(q), deadline)) == "1";
  own_segment_.unlink();
  cma_enabled_ = all_cma;

  // Who may spin: compare the affinities every rank published.
  CpuMask all = own_->cpus, others;
  for (const Peer& p : peers_) {
    if (p.header == nullptr) continue;
    for (size_t w = 0; w < kCpuWords; ++w) {
      all.words[w] |= p.header->cpus.words[w];
      others.words[w] |= p.header->cpus.words[w];
    }
  }
  int usable = 0, mine = 0;
  bool shared = false;
  for (size_t w = 0; w < kCpuWords; ++w) {
    usable += std::popcount(all.words[w]);
    mine += std::popcount(own_->cpus.words[w]);
    shared |= (own_->cpus.words[w] & others.words[w]) != 0;
  }
  oversubscribed_ = usable < size_;
  dedicated_core_ = !oversubscribed_ && mine == 1 && !shared;
}

}  // namespace chorus::shm

namespace chorus {

std::unique_ptr<Transport> make_shm_transport(Store& store, int rank, int size,
                                              const ShmOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::invalid_argument, "shm transport: rank ", rank, " of ", size,
         " is not a valid rank of the group");
  if (options.slots < 2)
    fail(ErrorCode::invalid_argument, "rank ", rank, ": shm transport: slots = ", options.slots,
         "; at least 2 are needed to pipeline a message");
  if (options.slot_bytes == 0 || options.slot_bytes % shm::kCacheLine != 0 ||
      options.slot_bytes > shm::kMaxSlotBytes)
    fail(ErrorCode::invalid_argument, "rank ", rank,
         ": shm transport: slot_bytes = ", options.slot_bytes, " must be a positive multiple of ",
         shm::kCacheLine, " up to ", shm::kMaxSlotBytes);
  if (options.spin.count() < 0)
    fail(ErrorCode::invalid_argument, "rank ", rank, ": shm transport: negative spin");
  auto t = std::make_unique<shm::ShmTransport>(rank, size, options);
  if (size > 1) t->connect(store, options.deadline);
  return t;
}

}  // namespace chorus
