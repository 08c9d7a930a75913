// Both progress modes in the grids (progress.h).
#include "support/progress.h"

#include "engine/communicator_impl.h"

#include <chrono>
#include <thread>

namespace chorus::test {

void use_progress(Communicator& comm, ProgressMode mode) {
  detail::impl_of(comm).set_progress(mode);
}

ProgressMode progress_of(const Communicator& comm) {
  return detail::impl_of(comm).config().progress;
}

void finish(Communicator& comm, Work work) {
  if (progress_of(comm) == ProgressMode::thread && comm.size() > 1)
    while (!work.is_completed()) std::this_thread::sleep_for(std::chrono::microseconds(20));
  work.wait();
}

ProgressMode alternating_progress(int rank, size_t cell) {
  return (static_cast<size_t>(rank) + cell) % 2 == 0 ? ProgressMode::thread : ProgressMode::caller;
}

}  // namespace chorus::test
