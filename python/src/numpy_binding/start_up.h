// chorus.init() of the numpy binding: this process's Communicator, from
// explicit arguments or from the launcher's environment (as
// chorus::init_from_env), started so that Ctrl-C still interrupts it while
// the store keeps it waiting for late ranks.
#pragma once

#include "numpy_binding/communicator.h"

#include <memory>
#include <optional>
#include <string>

namespace chorus::python {

// rank, world_size and store together, or none of them (then they come
// from the environment); transport "shm" or "tcp"; timeout in seconds bounds
// the start-up; progress "thread" or "caller" and progress_cpu override
// CHORUS_PROGRESS and CHORUS_PROGRESS_CPU.
std::shared_ptr<PyCommunicator> init(std::optional<int> rank, std::optional<int> world_size,
                                     std::optional<std::string> store,
                                     std::optional<std::string> transport,
                                     std::optional<double> timeout,
                                     std::optional<std::string> progress,
                                     std::optional<int> progress_cpu);

// chorus.join(): chorus::join_from_env, waiting as init() does.
std::shared_ptr<PyCommunicator> join();

}  // namespace chorus::python
