// Fd: the one owner of a POSIX file descriptor (sockets, shared-memory
// objects, files, epoll/event/signal/pid fds). It closes the descriptor on
// destruction and is movable, not copyable.
//
//   Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) fail(...);
//   ::read(fd.get(), buf, n);      // closed when fd leaves scope
#pragma once

#include <utility>

namespace chorus {

class Fd {
 public:
  Fd() = default;
  // Takes ownership of `fd`; a negative value (a failed call) is no descriptor.
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes the descriptor now (if any); the Fd is then empty.
  void reset();
  // Gives up ownership without closing; the Fd is then empty.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

}  // namespace chorus
