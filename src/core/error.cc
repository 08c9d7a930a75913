#include <chorus/error.h>

namespace chorus {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::peer_failure:
      return "peer_failure";
    case ErrorCode::mismatch:
      return "mismatch";
    case ErrorCode::aborted:
      return "aborted";
    case ErrorCode::revoked:
      return "revoked";
    case ErrorCode::system:
      return "system";
    case ErrorCode::internal:
      return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

}  // namespace chorus
