// What the communicator's sources share for their error messages: the head
// of a call's error ("rank 2: allreduce: ") and a size product that names
// what overflowed.
#pragma once

#include "core/check.h"

#include <chorus/error.h>

#include <cstddef>
#include <ostream>
#include <string_view>

namespace chorus::detail {

// "rank 2: allreduce: " (or "rank 2: send to peer 3: ") as the head of an error
// message, formatted only when an error is raised: calls that pass their
// checks pay nothing for it.
struct CallSite {
  int rank;
  std::string_view what;
  int peer = -1;
};
inline std::ostream& operator<<(std::ostream& out, const CallSite& w) {
  out << "rank " << w.rank << ": " << w.what;
  if (w.peer >= 0) out << " " << w.peer;
  return out << ": ";
}

// a * b, or Error(invalid_argument) naming `what` where it overflows size_t.
inline size_t checked_mul(size_t a, size_t b, const char* what) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(ErrorCode::invalid_argument, what, " overflows size_t (", a, " x ", b, ")");
  return r;
}

}  // namespace chorus::detail
