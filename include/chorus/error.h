// The one exception type chorus throws across its API.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace chorus {

enum class ErrorCode {
  invalid_argument,  // bad call arguments; raised before any byte moves
  timeout,           // a wait passed its deadline
  peer_failure,      // a peer died, closed its connection or failed its own call
  mismatch,          // ranks disagree (sizes, protocol, token)
  aborted,           // the communicator was aborted locally
  revoked,           // the communicator was revoked (Communicator::revoke) by this or another rank
  system,            // an OS call failed
  internal,          // a broken invariant inside chorus
};

std::string_view to_string(ErrorCode code);

// Error carries a code and a message that names the rank, the peer and the
// collective where they are known, e.g.
//   "rank 2: allreduce(ring): timeout waiting for peer 3 after 300000 ms".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace chorus
