// Invariant checks that throw chorus::Error with both values printed.
#pragma once

#include <chorus/error.h>

#include <sstream>
#include <string>
#include <utility>

namespace chorus {

// Builds a message from streamable parts: str_cat("rank ", r, ": ", what).
template <typename... Parts>
std::string str_cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(ErrorCode code, Parts&&... parts) {
  throw Error(code, str_cat(std::forward<Parts>(parts)...));
}

// Throws Error(internal) naming the expression and both values when a != b.
#define CHORUS_CHECK_EQ(a, b)                                                                      \
  do {                                                                                             \
    const auto& chorus_check_a = (a);                                                              \
    const auto& chorus_check_b = (b);                                                              \
    if (!(chorus_check_a == chorus_check_b))                                                       \
      ::chorus::fail(::chorus::ErrorCode::internal, __FILE__, ":", __LINE__, ": ", #a, " == ", #b, \
                     " failed (", chorus_check_a, " vs ", chorus_check_b, ")");                    \
  } while (0)

#define CHORUS_CHECK(cond)                                                                \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::chorus::fail(::chorus::ErrorCode::internal, __FILE__, ":", __LINE__, ": ", #cond, \
                     " failed");                                                          \
  } while (0)

}  // namespace chorus
