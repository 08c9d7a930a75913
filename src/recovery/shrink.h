// Communicator::shrink (include/chorus/communicator.h): the survivors of a
// failure agree on who is left and make a communicator of themselves.
//
// The agreement runs over the ranks' recovery links
// (transport/recovery_link.h), which no failure of the transport touches:
// each rank listens on a socket of its own for as long as its communicator
// lives. A rank whose process has gone refuses connections (or closes the
// ones it had), so its death is certain at once; a rank that is alive but
// does not answer is counted failed once the timeout T has passed.
//
//   1. The rank revokes its communicator where it still works, so that
//      every rank still inside a call learns of the shrink at once.
//   2. The coordinator is the lowest rank not known to have failed. Every
//      other rank connects to its coordinator and sends its vote (it is
//      alive and shrinking). A coordinator whose link closes, or which does
//      not answer within T of the vote, has failed: the rank votes for the
//      next one.
//   3. The coordinator connects to every rank and waits for their votes,
//      for T/2 at most: a rank whose link closes has failed, one that has
//      not voted by then has failed too. The members are the ranks that
//      voted and live, renumbered in the order of their old ranks.
//   4. The coordinator opens the set-up point of the new communicator (an
//      in-process world, or a store server at its recovery address, which
//      the new communicator's coordinator keeps for its life) and sends the
//      decision, members and set-up point, to every member, which takes it
//      from whoever sends it.
//   5. Every member builds its transport over that point, as split does
//      (groups/derive.h, step 3): its final barrier is met by every member or
//      by none, so every member returns the same communicator, or every
//      member raises (a member that dies after its vote fails the set-up on
//      every member, at the latest at the deadline). The old communicator
//      then stays broken, and shrink may be called on it again.
#pragma once

#include <chorus/communicator.h>

#include <chrono>

namespace chorus::detail {

// Communicator::shrink. `timeout` 0: the communicator's (CHORUS_TIMEOUT).
Communicator shrink(Communicator& comm, std::chrono::milliseconds timeout);

}  // namespace chorus::detail
