// init() and init_from_env(): the public start-up of a multi-process job.
// The options are checked here; bootstrap/ opens the store and connects the
// transport, and the Communicator is built over what it hands back.
#include "bootstrap/bootstrap.h"
#include "bootstrap/store_url.h"
#include "core/check.h"
#include "core/config.h"
#include "core/transport_kind.h"
#include "engine/communicator_impl.h"
#include "recovery/grow.h"

#include <chorus/init.h>

namespace chorus {

Communicator init(const InitOptions& options) {
  Config config = Config::from_env();
  check_config_directories(config);
  if (options.world_size < 1)
    fail(ErrorCode::invalid_argument, "init: world size must be >= 1, got ", options.world_size);
  if (options.rank < 0 || options.rank >= options.world_size)
    fail(ErrorCode::invalid_argument, "init: rank ", options.rank, " outside [0, ",
         options.world_size, ")");
  // The same kinds as CHORUS_TRANSPORT, which this overrides.
  if (!options.transport.empty())
    config.transport = parse_process_transport(
        options.transport, str_cat("init: transport '", options.transport, "'"));
  if (!options.progress.empty())
    config.progress = parse_progress_mode(options.progress, "init: progress");
  if (options.progress_cpu != -1)
    config.progress_cpu = check_progress_cpu(
        options.progress_cpu, std::to_string(options.progress_cpu), "init: progress_cpu");
  if (options.timeout.count() < 0) fail(ErrorCode::invalid_argument, "init: negative timeout");
  const auto timeout = options.timeout.count() > 0 ? options.timeout : config.timeout;
  const Deadline deadline = deadline_after(timeout);
  auto transport =
      bootstrap_transport(options.store, options.rank, options.world_size, config, deadline);
  config.job_store = options.store;
  return make_communicator(std::move(transport), std::move(config));
}

Communicator init_from_env() {
  const BootstrapEnv env = read_bootstrap_env();
  // A malformed store URL names the variable it came from.
  try {
    parse_store_url(env.store);
  } catch (const Error& e) {
    fail(e.code(), env.store_source, ": ", e.what());
  }
  InitOptions options;
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.store = env.store;
  return init(options);
}

Communicator join_from_env() {
  return detail::join_from_env();
}

}  // namespace chorus
