#include "transport/transport.h"

#include "core/check.h"

namespace chorus {

// The algorithms' names are not known down here (the stamp carries a row
// number); the communicator rewords the message with them.
StampMismatch::StampMismatch(int receiver, int sender, const CallStamp& expected,
                             const CallStamp& sent)
    : Error(ErrorCode::mismatch,
            str_cat("rank ", receiver, ": mismatched calls: ",
                    describe_mismatch(sender, sent, "", receiver, expected, ""))),
      rank(receiver),
      peer(sender),
      mine(expected),
      theirs(sent) {}

}  // namespace chorus
