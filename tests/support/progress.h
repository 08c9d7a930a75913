// Both progress modes (engine/progress.h) in the grids, at no extra cells: a
// grid switches a communicator between them (use_progress) and completes each
// call as the mode in effect would (finish): in thread mode the calling thread
// only watches the Work's flag while the progress thread advances the call,
// so a failure, a timeout or the result reaches it through that thread.
#pragma once

#include "core/config.h"

#include <chorus/communicator.h>

namespace chorus::test {

// Switches `comm` to `mode` (CommunicatorImpl::set_progress).
void use_progress(Communicator& comm, ProgressMode mode);
// The mode `comm` is in.
ProgressMode progress_of(const Communicator& comm);
// Completes `work` on `comm`, then wait()s for its outcome (rethrows its
// error): in thread mode this thread makes no chorus call until the flag is
// up, in caller mode it waits as usual.
void finish(Communicator& comm, Work work);
// The mode of one rank of a grid cell: the ranks of a cell alternate, and
// the cells alternate which rank starts, so that every cell runs both modes
// and each rank of a pair sees each mode across the grid.
ProgressMode alternating_progress(int rank, size_t cell);

}  // namespace chorus::test
