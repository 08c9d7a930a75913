// Composite transport: a job that spans hosts and has several ranks on some of
// them. Each peer is routed to the transport that reaches it: shared memory for
// the ranks of this host (a sub-group with ranks of its own, numbered in global
// rank order), tcp for the others. bootstrap/ builds the two and joins them here.
//
//   // ranks 0,1 on host A, ranks 2,3 on host B; this is rank 2:
//   //   local_of_global = {-1, -1, -1, 1}   (rank 3 is shm rank 1; self -1)
//   auto t = make_composite_transport(2, 4, std::move(shm), local_of_global,
//                                     std::move(tcp));
//
// Request ids carry the sub-transport in their lowest bit. Waiting: the two
// transports have no common thing to block on, so a wait with nothing
// complete alternates short waits on each; a completion on either is seen
// within one slice (200 us).
#pragma once

#include "transport/transport.h"

#include <memory>
#include <vector>

namespace chorus {

// `shm` connects the ranks of this host, with rank local_of_global[p] standing
// for global rank p; local_of_global[p] == -1 routes p over `tcp` (whose ranks
// are the global ones), and is also what this rank's own entry holds.
std::unique_ptr<Transport> make_composite_transport(int rank, int size,
                                                    std::unique_ptr<Transport> shm,
                                                    std::vector<int> local_of_global,
                                                    std::unique_ptr<Transport> tcp);

}  // namespace chorus
