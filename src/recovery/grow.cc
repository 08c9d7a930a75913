// Communicator::grow and join_from_env (recovery/grow.h says the steps).
#include "recovery/grow.h"

#include "bootstrap/bootstrap.h"
#include "bootstrap/store_url.h"
#include "core/check.h"
#include "core/config.h"
#include "engine/call_site.h"
#include "engine/communicator_impl.h"
#include "groups/derive.h"
#include "transport/forwarding_transport.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace chorus::detail {
namespace {

// What the members' rank 0 publishes for the joiners.
struct GrowInvitation {
  Invitation invitation;
  int32_t members = 0;
  int32_t joining = 0;
};

std::string key(int generation, std::string_view what) {
  return str_cat("chorus/grow/", generation, "/", what);
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

std::string text_of(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

Outcome failed_outcome(const Error& e) {
  Outcome out;
  out.ok = 0;
  out.code = static_cast<int32_t>(e.code());
  const std::string text = e.what();
  std::memcpy(out.message, text.data(), std::min(text.size(), sizeof out.message - 1));
  return out;
}

[[noreturn]] void raise(const Outcome& o) {
  fail(static_cast<ErrorCode>(o.code),
       std::string(o.message, strnlen(o.message, sizeof o.message)));
}

}  // namespace

Communicator grow(Communicator& comm, int joining, std::chrono::milliseconds timeout) {
  CommunicatorImpl& impl = impl_of(comm);
  const CallSite where{impl.rank(), "grow"};
  if (joining < 1) fail(ErrorCode::invalid_argument, where, "joining must be >= 1, got ", joining);
  if (timeout.count() < 0)
    fail(ErrorCode::invalid_argument, where, "negative timeout ", timeout.count(), " ms");
  if (timeout.count() == 0) timeout = impl.config().timeout;
  if (impl.transport().kind() == TransportKind::inproc)
    fail(ErrorCode::invalid_argument, where,
         "the ranks are threads of one process: joiners are processes that meet the members "
         "through the job's store (init)");
  if (impl.config().job_store.empty())
    fail(ErrorCode::invalid_argument, where,
         "this communicator's line was not started by init(), so there is no job store for the "
         "joiners to meet the members at");
  const int n = impl.size();
  const int generation = impl.config().generation + 1;
  const Deadline deadline = deadline_after(timeout);

  // Step 1 on rank 0; its invitation (or its failure) to every member.
  SetupPoint point;
  GrowInvitation inv;
  if (impl.rank() == 0) {
    try {
      OpenedStore job = open_store(impl.config().job_store, false, deadline, impl.config());
      if (job.store->add(key(generation, "claimed"), 1) != 1)
        fail(ErrorCode::mismatch, where, "generation ", generation,
             " of this job was grown already (by another communicator)");
      inv.invitation = open_setup(impl, n + joining, point);
      inv.members = n;
      inv.joining = joining;
      if (inv.invitation.opened.ok) {
        job.store->set(key(generation, "invitation"), bytes_of(&inv, sizeof inv));
        job.store->set("chorus/grow/latest", bytes_of(std::to_string(generation).data(),
                                                      std::to_string(generation).size()));
      }
    } catch (const Error& e) {
      inv.invitation.opened = failed_outcome(e);
    }
    for (int r = 1; r < n; ++r) impl.setup_message(OpKind::send, &inv, sizeof inv, r);
  } else {
    impl.setup_message(OpKind::recv, &inv, sizeof inv, 0);
  }
  if (!inv.invitation.opened.ok) raise(inv.invitation.opened);

  // Step 3.
  std::unique_ptr<Transport> transport;
  try {
    transport = join_setup(inv.invitation, impl.rank(), n + joining, impl.config(), deadline);
  } catch (const Error& e) {
    impl.spend_generation(generation);
    fail(e.code(), where, "the members and ", joining, " joiner(s) of generation ", generation,
         " could not set up their communicator: ", e.what(), "; a retry is generation ",
         generation + 1);
  }
  if (point.server)
    transport = std::make_unique<KeepsServer>(std::move(transport), std::move(point.server));
  Config child = impl.config();
  child.derived = true;
  child.generation = generation;
  return make_communicator(std::move(transport), std::move(child));
}

Communicator join_from_env() {
  const std::optional<std::string> gen_var = setting_var(env_var, "CHORUS_JOIN_GENERATION");
  if (!gen_var || gen_var->empty())
    fail(ErrorCode::invalid_argument,
         "join_from_env: CHORUS_JOIN_GENERATION is not set (the generation of the grow to join: "
         "1 for the first grow of the job)");
  int generation = 0;
  const std::string_view g(*gen_var);
  const auto [end, ec] = std::from_chars(g.data(), g.data() + g.size(), generation);
  if (ec != std::errc() || end != g.data() + g.size() || generation < 1)
    fail(ErrorCode::invalid_argument, "join_from_env: CHORUS_JOIN_GENERATION='", g,
         "' is not a generation (an integer >= 1)");
  const std::optional<std::string> store_var = setting_var(env_var, "CHORUS_STORE");
  if (!store_var || store_var->empty())
    fail(ErrorCode::invalid_argument,
         "join_from_env: CHORUS_STORE is not set (the job's store, where the members' grow "
         "publishes its invitation)");
  try {
    parse_store_url(*store_var);
  } catch (const Error& e) {
    fail(e.code(), "join_from_env: CHORUS_STORE: ", e.what());
  }
  Config config = Config::from_env();
  check_config_directories(config);
  const Deadline deadline = deadline_after(config.timeout);
  OpenedStore job = open_store(*store_var, false, deadline, config);
  GrowInvitation inv;
  std::vector<uint8_t> got;
  try {
    got = job.store->get(key(generation, "invitation"), deadline);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timeout) throw;
    std::string latest = "no grow has been made in this job";
    try {
      latest = str_cat("the latest is generation ",
                       text_of(job.store->get("chorus/grow/latest", Clock::now())));
    } catch (const Error&) {
    }
    fail(ErrorCode::timeout, "join_from_env: no grow of generation ", generation, " within ",
         config.timeout.count(), " ms (", latest, "): CHORUS_JOIN_GENERATION names the wrong one?");
  }
  if (got.size() != sizeof inv)
    fail(ErrorCode::mismatch, "join_from_env: the invitation of generation ", generation, " has ",
         got.size(), " bytes, not ", sizeof inv, " (another chorus version?)");
  std::memcpy(&inv, got.data(), sizeof inv);
  const int64_t place = job.store->add(key(generation, "joiners"), 1);
  if (place > inv.joining)
    fail(ErrorCode::invalid_argument, "join_from_env: late: the grow of generation ", generation,
         " takes ", inv.joining, " joiner(s) and has them all (this is joiner ", place,
         "); a later grow has a generation of its own");
  const int rank = inv.members + static_cast<int>(place) - 1;
  const int size = inv.members + inv.joining;
  std::unique_ptr<Transport> transport;
  try {
    transport = join_setup(inv.invitation, rank, size, config, deadline);
  } catch (const Error& e) {
    fail(e.code(), "join_from_env: rank ", rank, " of generation ", generation, ": ", e.what());
  }
  config.job_store = *store_var;
  config.generation = generation;
  config.derived = true;
  return make_communicator(std::move(transport), std::move(config));
}

}  // namespace chorus::detail
