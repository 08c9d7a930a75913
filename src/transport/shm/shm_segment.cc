#include "transport/shm/shm_segment.h"

#include "core/check.h"

#include <cerrno>
#include <climits>
#include <cstring>

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace chorus::shm {

namespace {

[[noreturn]] void fail_errno(const std::string& what, int err) {
  fail(ErrorCode::system, "shm transport: ", what, ": ", std::strerror(err));
}

}  // namespace

Segment::Segment(Segment&& other) noexcept
    : base_(other.base_),
      bytes_(other.bytes_),
      name_(std::move(other.name_)),
      owns_name_(other.owns_name_) {
  other.base_ = nullptr;
  other.bytes_ = 0;
  other.owns_name_ = false;
}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    base_ = other.base_;
    bytes_ = other.bytes_;
    name_ = std::move(other.name_);
    owns_name_ = other.owns_name_;
    other.base_ = nullptr;
    other.bytes_ = 0;
    other.owns_name_ = false;
  }
  return *this;
}

Segment::~Segment() {
  release();
}

void Segment::release() {
  unlink();
  if (base_ != nullptr) ::munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

void Segment::unlink() {
  if (owns_name_) {
    ::shm_unlink(name_.c_str());
    owns_name_ = false;
  }
}

Segment Segment::create(const std::string& name, size_t bytes) {
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600));
  if (!fd.valid()) fail_errno(str_cat("shm_open(", name, ", O_CREAT)"), errno);
  Segment seg;
  seg.name_ = name;
  seg.owns_name_ = true;  // from here on the destructor unlinks it
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    fail_errno(str_cat("ftruncate(", name, ", ", bytes, ")"), errno);
  // posix_fallocate returns the error instead of setting errno.
  if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0)
    fail_errno(str_cat("reserving ", bytes, " B for ", name, " (is /dev/shm full?)"), err);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) fail_errno(str_cat("mmap(", name, ", ", bytes, ")"), errno);
  seg.base_ = static_cast<std::byte*>(p);
  seg.bytes_ = bytes;
  return seg;
}

Segment Segment::attach(const std::string& name, size_t bytes) {
  Fd fd(::shm_open(name.c_str(), O_RDWR, 0));
  if (!fd.valid()) fail_errno(str_cat("shm_open(", name, ")"), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno(str_cat("fstat(", name, ")"), errno);
  if (static_cast<size_t>(st.st_size) != bytes)
    fail(ErrorCode::mismatch, "shm transport: segment ", name, " has ", st.st_size,
         " B, this rank expects ", bytes, " B (ranks disagree on size or slot options)");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) fail_errno(str_cat("mmap(", name, ", ", bytes, ")"), errno);
  Segment seg;
  seg.base_ = static_cast<std::byte*>(p);
  seg.bytes_ = bytes;
  seg.name_ = name;
  return seg;
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  // EAGAIN (value already changed), EINTR and ETIMEDOUT all mean "re-check".
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

Fd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return Fd();
#endif
}

bool process_exited(const Fd& pidfd, pid_t pid) {
  if (pidfd.valid()) {
    // A pidfd becomes readable when the process exits, even while it is an
    // unreaped zombie (which kill(pid, 0) would still report as alive).
    pollfd p{pidfd.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace chorus::shm
