// Binding local ranks to cores, as MPI launchers do by default: with at most
// one rank per core, rank i of a host runs on the i-th core it may use, so two
// ranks that talk through shared memory never share a core by accident (a
// shared core turns a 2 us hand-off into a scheduler time slice).
#pragma once

namespace chorus {

// Binds the calling process to one core when local_size is at most the number
// of cores it may run on; otherwise (oversubscribed) leaves it free. Returns
// the core it bound to, or -1. Errors of the OS call are ignored on purpose:
// binding is a performance hint, never a reason to fail a job.
int bind_local_rank(int local_rank, int local_size);

}  // namespace chorus
