#include "transport/window.h"

#include "core/check.h"
#include "core/fd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chorus {

namespace {

constexpr size_t kLine = 64;
// The smallest part a window maps: mmap wants a length above zero.
constexpr size_t kMinBytes = 64;

[[noreturn]] void fail_errno(const std::string& what, int err) {
  fail(ErrorCode::system, "shared window: ", what, ": ", std::strerror(err));
}

std::byte* map_fd(int fd, size_t bytes, const std::string& what) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail_errno(str_cat("mmap(", what, ", ", bytes, " B)"), errno);
  return static_cast<std::byte*>(p);
}

}  // namespace

std::shared_ptr<SharedWindow> SharedWindow::create(int rank, int nranks, size_t bytes,
                                                   const RecordExchange& exchange) {
  const size_t mapped = std::max(bytes, kMinBytes);
  std::shared_ptr<SharedWindow> w(new SharedWindow(rank, bytes));
  w->maps_.assign(static_cast<size_t>(nranks), nullptr);
  Fd own(::memfd_create("chorus-window", MFD_CLOEXEC));
  if (!own.valid()) fail_errno("memfd_create(chorus-window)", errno);
  if (::ftruncate(own.get(), static_cast<off_t>(mapped)) != 0)
    fail_errno(str_cat("ftruncate(chorus-window, ", mapped, " B)"), errno);
  // Unmaps whatever was mapped if a later step throws.
  struct Unmap {
    SharedWindow& w;
    size_t mapped;
    bool keep = false;
    ~Unmap() {
      if (keep) return;
      for (std::byte*& p : w.maps_)
        if (p != nullptr) ::munmap(p, mapped), p = nullptr;
    }
  } guard{*w, mapped};
  w->maps_[static_cast<size_t>(rank)] = map_fd(own.get(), mapped, "own window");
  WindowRecord mine;
  mine.pid = ::getpid();
  mine.fd = own.get();
  mine.bytes = bytes;
  const std::vector<WindowRecord> all = exchange(mine);
  CHORUS_CHECK(all.size() == static_cast<size_t>(nranks));
  for (int q = 0; q < nranks; ++q) {
    const WindowRecord& rec = all[static_cast<size_t>(q)];
    if (rec.bytes != bytes)
      fail(ErrorCode::mismatch, "rank ", rank, ": window of ", bytes, " B, but rank ", q,
           " asked for ", rec.bytes, " B in the same call");
    if (q == rank) continue;
    const std::string path = str_cat("/proc/", rec.pid, "/fd/", rec.fd);
    Fd peer(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!peer.valid())
      fail_errno(str_cat("rank ", rank, ": open(", path, ") for rank ", q, "'s window"), errno);
    w->maps_[static_cast<size_t>(q)] = map_fd(peer.get(), mapped, str_cat("rank ", q, "'s window"));
  }
  // Nobody closes its file before every rank has opened it.
  exchange(mine);
  guard.keep = true;
  return w;
}

SharedWindow::~SharedWindow() {
  const size_t mapped = std::max(bytes_, kMinBytes);
  for (std::byte* p : maps_)
    if (p != nullptr) ::munmap(p, mapped);
}

bool SharedWindow::contains(const void* p, size_t n) const {
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* lo = data();
  return b >= lo && n <= bytes_ && static_cast<size_t>(b - lo) <= bytes_ - n;
}

// The control window of one rank: its current call's record, then one line
// of flags per signalling rank. The record is a sequence lock: `seq` is 0
// while the owner rewrites it, else the call it is of, so that a peer that
// polls it while waiting never takes half of one call's stamp for another's.
struct WindowSet::Control {
  std::atomic<uint32_t> seq;  // the call the record is of; 0 while it changes
  std::atomic<uint32_t> in_window;
  std::atomic<uint32_t> out_window;
  uint32_t unused;
  std::atomic<uint64_t> in_offset;
  std::atomic<uint64_t> out_offset;
  std::atomic<uint64_t> stamp[3];  // the call's CallStamp
};
static_assert(sizeof(WindowSet::Control) <= kLine);

namespace {
size_t control_bytes(int nranks) {
  return kLine * (1 + static_cast<size_t>(nranks));
}
}  // namespace

WindowSet::WindowSet(int rank, int nranks, RecordExchange exchange)
    : rank_(rank), nranks_(nranks), exchange_(std::move(exchange)) {}

WindowSet::Control* WindowSet::control(int q) const {
  return reinterpret_cast<Control*>(control_->base(q));
}

void WindowSet::ensure_control() {
  if (control_) return;
  control_ = SharedWindow::create(rank_, nranks_, control_bytes(nranks_), exchange_);
  // Fresh memfd pages are zero: no call, no flag raised.
  new (control_->data()) Control{};
}

void WindowSet::ensure_staging(size_t staging_bytes) {
  CHORUS_CHECK(control_ != nullptr);
  if (staging_bytes > this->staging_bytes()) {
    // Grow to the next power of two, so that a sweep of sizes grows it a few
    // times only; the old window goes once no execution uses it.
    size_t b = 4096;
    while (b < staging_bytes) b *= 2;
    staging_.reset();
    staging_ = SharedWindow::create(rank_, nranks_, b, exchange_);
  }
}

std::shared_ptr<SharedWindow> WindowSet::create_user_window(size_t bytes) {
  auto w = SharedWindow::create(rank_, nranks_, bytes, exchange_);
  user_.push_back(w);
  return w;
}

bool WindowSet::find_user_window(const void* p, size_t n, SharedPlace& place) const {
  for (size_t i = 0; i < user_.size(); ++i) {
    const std::shared_ptr<SharedWindow> w = user_[i].lock();
    if (!w || !w->contains(p, n)) continue;
    place.window = static_cast<uint32_t>(i + 1);
    place.offset = static_cast<uint64_t>(static_cast<const std::byte*>(p) - w->data());
    return true;
  }
  return false;
}

void WindowSet::publish_stamp(const CallStamp& stamp) {
  CHORUS_CHECK(control_ != nullptr && stamp.seq != 0);
  Control* c = control(rank_);
  uint64_t words[3];
  std::memcpy(words, &stamp, sizeof words);
  // A reader that sees a word of this stamp (acquire, against these release
  // stores) then sees seq at 0 or later, so it never takes a mix of two.
  c->seq.store(0, std::memory_order_relaxed);
  for (int i = 0; i < 3; ++i) c->stamp[i].store(words[i], std::memory_order_release);
  // Places from an earlier call: nobody reads them before this call's
  // publish_places (peers read places only after a flag this call raises).
  c->seq.store(stamp.seq, std::memory_order_release);
}

void WindowSet::publish_places(uint32_t seq, SharedPlace input, SharedPlace output) {
  Control* c = control(rank_);
  CHORUS_CHECK(c->seq.load(std::memory_order_relaxed) == seq);
  c->in_window.store(input.window, std::memory_order_relaxed);
  c->in_offset.store(input.offset, std::memory_order_relaxed);
  c->out_window.store(output.window, std::memory_order_relaxed);
  c->out_offset.store(output.offset, std::memory_order_relaxed);
  // Peers read the places only after a flag this call raises (a release
  // store after these), so relaxed is enough here.
}

bool WindowSet::peer_stamp(int q, uint32_t seq, CallStamp& stamp) const {
  const Control* c = control(q);
  if (c->seq.load(std::memory_order_acquire) != seq) return false;
  uint64_t words[3];
  for (int i = 0; i < 3; ++i) words[i] = c->stamp[i].load(std::memory_order_acquire);
  // Unchanged since the first look: the words are all of call `seq`.
  if (c->seq.load(std::memory_order_relaxed) != seq) return false;
  std::memcpy(&stamp, words, sizeof words);
  return true;
}

const std::byte* WindowSet::peer_address(int q, uint32_t seq, BufferKind kind, size_t offset,
                                         size_t bytes) const {
  const SharedWindow* w = staging_.get();
  uint64_t base = 0;
  // A read follows a wait for a flag q raised in this call (which compared
  // q's stamp with this rank's) and precedes this rank's kDone, so q is
  // still in the call: anything else is a call q does not share.
  const Control* c = control(q);
  const uint32_t theirs = c->seq.load(std::memory_order_relaxed);
  if (theirs != seq)
    fail(ErrorCode::mismatch, "rank ", rank_, ": call ", seq, " reads rank ", q,
         "'s shared memory, but rank ", q, " is in call ", theirs);
  if (kind == BufferKind::input || kind == BufferKind::output) {
    const uint32_t number = kind == BufferKind::input
                                ? c->in_window.load(std::memory_order_relaxed)
                                : c->out_window.load(std::memory_order_relaxed);
    base = kind == BufferKind::input ? c->in_offset.load(std::memory_order_relaxed)
                                     : c->out_offset.load(std::memory_order_relaxed);
    if (number > 0) {
      std::shared_ptr<SharedWindow> user;
      if (number <= user_.size()) user = user_[number - 1].lock();
      if (!user)
        fail(ErrorCode::invalid_argument, "rank ", rank_, ": rank ", q, "'s ", to_string(kind),
             " lies in window ", number, ", which this rank has released");
      w = user.get();  // user_ keeps a weak reference; the caller's call holds the window
      if (base + offset + bytes > w->bytes())
        fail(ErrorCode::mismatch, "rank ", rank_, ": rank ", q, "'s ", to_string(kind),
             " runs past the end of window ", number);
      return w->base(q) + base + offset;
    }
  } else {
    CHORUS_CHECK(kind == BufferKind::window);
  }
  CHORUS_CHECK(w != nullptr);
  if (base + offset + bytes > w->bytes())
    fail(ErrorCode::internal, "rank ", rank_, ": a read of rank ", q,
         "'s staging window runs past its end");
  return w->base(q) + base + offset;
}

void WindowSet::signal(int q, uint32_t flag, uint32_t seq) {
  CHORUS_CHECK(flag < kMaxFlags);
  auto* line = reinterpret_cast<std::atomic<uint32_t>*>(control_->base(q) +
                                                        kLine * (1 + static_cast<size_t>(rank_)));
  line[flag].store(seq, std::memory_order_release);
}

bool WindowSet::signalled(int q, uint32_t flag, uint32_t seq) const {
  const auto* line = reinterpret_cast<const std::atomic<uint32_t>*>(
      control_->base(rank_) + kLine * (1 + static_cast<size_t>(q)));
  const uint32_t v = line[flag].load(std::memory_order_acquire);
  // Call numbers grow by one per call: "at least seq", robust to wrap-around.
  return static_cast<int32_t>(v - seq) >= 0;
}

}  // namespace chorus
