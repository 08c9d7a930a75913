// In-process transport: the ranks are threads of one process sharing a World.
// A message is moved exactly once: whichever side arrives second copies (or
// reduces) straight from the sender's buffer into the receiver's.
#pragma once

#include "transport/transport.h"

#include <memory>

namespace chorus {

class InprocWorld;

// Creates the shared state of an n-rank in-process group.
std::shared_ptr<InprocWorld> make_inproc_world(int nranks);

// Marks `rank` as gone (its thread returned): peers still waiting for a
// message from it fail with peer_failure instead of waiting for their deadline.
void inproc_rank_exited(InprocWorld& world, int rank);

std::unique_ptr<Transport> make_inproc_transport(std::shared_ptr<InprocWorld> world, int rank,
                                                 std::chrono::microseconds spin);

}  // namespace chorus
