// Checks of Communicator::revoke and shrink that run the same over inproc
// (tests/recovery/shrink_test.cc: ranks are threads, and a rank "dies" by
// returning, which closes its communicator) and over shm and tcp
// (tests/multiprocess/mp_check.cc: a rank dies by SIGKILL). Each returns
// this rank's problems, empty when the check holds here.
#pragma once

#include <chorus/communicator.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace chorus::test {

// Ends the calling rank; where it returns (a thread), the check returns at
// once and the rank's communicator goes with its thread.
using Die = std::function<void()>;

// Rank `victim` dies between two AllReduces (`inside` false) or in the
// middle of a large one (`inside` true), which the even ranks' progress
// threads drive and the odd ranks' callers; every survivor must raise, shrink
// to size() - 1 with the ranks renumbered in order, and run an exact
// AllReduce on the new communicator. With `second` >= 0, that rank dies too,
// once the others are in the shrink (it never calls it); the survivors then
// shrink to size() - 2. A survivor's new communicator is left in `next`
// where given.
std::vector<std::string> check_shrink_after_death(Communicator& comm, int victim, bool inside,
                                                  const Die& die, int second = -1,
                                                  std::optional<Communicator>* next = nullptr);

// Rank 0 revokes the communicator from a second thread while every rank is
// blocked in a receive that nothing will meet (the even ranks' progress
// threads wait in the transport for it, the odd ranks' callers): every rank's call must raise
// revoked within `bound_ms` of the revoke, and so must a later call; then
// all shrink to the same size and run an exact AllReduce. `measured_ms`
// receives this rank's time from the revoke to its error (the ranks share
// the monotonic clock of one host). The new communicator is left in `next`
// where given.
std::vector<std::string> check_revoke_unblocks(Communicator& comm, double bound_ms,
                                               double& measured_ms,
                                               std::optional<Communicator>* next = nullptr);

// The ranks' AllReduce of (old rank + 1) on the new communicator `next`,
// whose members are the old ranks `members` (ascending): exact sums.
std::vector<std::string> check_exact_allreduce(Communicator& next, const std::vector<int>& members,
                                               int old_rank);

}  // namespace chorus::test
