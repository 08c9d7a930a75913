#include "core/fd.h"

#include <unistd.h>

namespace chorus {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace chorus
