// chorus.init() of the numpy binding (start_up.h).
#include "numpy_binding/start_up.h"

#include "core/config.h"
#include "numpy_binding/buffers.h"
#include "numpy_binding/errors.h"
#include "numpy_binding/waiter.h"

#include <chorus/init.h>

#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace py = pybind11;

namespace chorus::python {
namespace {

// init() runs on a thread of its own while the caller waits in slices: the
// store may keep it waiting for late ranks, and Ctrl-C must still work. On a
// signal the caller raises at once and the start-up thread, left on its own,
// drops the communicator it may still get (its peers see this rank leave).
struct StartUp {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::optional<Communicator> comm;
  std::exception_ptr error;
};

// Runs `start` on a thread of its own while the caller waits in slices (see
// StartUp).
std::shared_ptr<PyCommunicator> start_up(const std::function<Communicator()>& start) {
  auto job = std::make_shared<StartUp>();
  std::thread([job, start] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::optional<Communicator> comm;
    std::exception_ptr error;
    try {
      comm.emplace(start());
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(job->mu);
    job->comm = std::move(comm);
    job->error = error;
    job->finished = true;
    job->cv.notify_all();
  }).detach();

  const bool signals = on_main_thread();
  while (true) {
    {
      py::gil_scoped_release nogil;
      std::unique_lock lock(job->mu);
      if (job->cv.wait_for(lock, kSignalSlice, [&] { return job->finished; })) break;
    }
    if (signals && PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  std::lock_guard lock(job->mu);
  if (job->error) std::rethrow_exception(job->error);
  return std::make_shared<PyCommunicator>(std::move(*job->comm));
}

}  // namespace

std::shared_ptr<PyCommunicator> init(std::optional<int> rank, std::optional<int> world_size,
                                     std::optional<std::string> store,
                                     std::optional<std::string> transport,
                                     std::optional<double> timeout,
                                     std::optional<std::string> progress,
                                     std::optional<int> progress_cpu) {
  const bool explicit_job = rank || world_size || store;
  if (explicit_job && !(rank && world_size && store))
    invalid(
        "init: give rank, world_size and store together, or none of them (then they come "
        "from the environment)");
  InitOptions options;
  if (explicit_job) {
    options.rank = *rank;
    options.world_size = *world_size;
    options.store = *store;
  } else {
    const BootstrapEnv env = read_bootstrap_env();
    options.rank = env.rank;
    options.world_size = env.world_size;
    options.store = env.store;
  }
  if (transport) options.transport = *transport;
  if (timeout) options.timeout = seconds_to_ms(*timeout, "init: timeout");
  if (progress) options.progress = *progress;
  if (progress_cpu) {
    if (*progress_cpu < 0) invalid("init: progress_cpu must be a CPU number from 0 to 1023");
    options.progress_cpu = *progress_cpu;
  }

  return start_up([options] { return chorus::init(options); });
}

std::shared_ptr<PyCommunicator> join() {
  return start_up([] { return chorus::join_from_env(); });
}

}  // namespace chorus::python
