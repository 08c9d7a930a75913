#include "core/check.h"
#include "core/first_seen.h"
#include "engine/communicator_impl.h"
#include "transport/inproc/inproc_transport.h"
#include "transport/recovery_link.h"

#include <chorus/testing.h>

#include <mutex>
#include <thread>

namespace chorus::testing {

namespace {

// host_of empty: every rank on the host of the process.
void run_threads(int nranks, const std::vector<int>& host_of,
                 const std::function<void(Communicator&)>& body) {
  const Config config = Config::from_env();
  auto world = make_inproc_world(nranks);
  auto directory = std::make_shared<RecoveryDirectory>(nranks, random_recovery_token());
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      Transport* raw = nullptr;
      try {
        auto transport = make_inproc_transport(world, r, config.spin);
        transport->set_recovery_link(std::make_shared<RecoveryLink>(r, directory, "127.0.0.1"));
        raw = transport.get();
        Config mine = config;
        if (!host_of.empty()) {
          mine.host_id = str_cat("run_ranks-host-", host_of[static_cast<size_t>(r)]);
          transport->set_host_layout(number_by_first_seen(std::span<const int>(host_of)));
        }
        Communicator comm = make_communicator(std::move(transport), std::move(mine));
        try {
          body(comm);
        } catch (...) {
          // Recorded before the abort, so that the peers' peer_failure errors,
          // which the abort causes, can never be taken for the first one.
          std::string what = "a non-standard exception";
          ErrorCode cause = ErrorCode::internal;
          try {
            throw;
          } catch (const Error& e) {
            what = e.what();
            cause = e.code();
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          {
            std::lock_guard lock(mu);
            if (!first) first = std::current_exception();
          }
          // Peers blocked on this rank fail fast instead of timing out.
          raw->abort(cause, str_cat("rank ", r, " raised: ", what));
        }
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
      inproc_rank_exited(*world, r);
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace

void run_ranks(int nranks, const std::function<void(Communicator&)>& body) {
  if (nranks < 1) fail(ErrorCode::invalid_argument, "run_ranks: nranks must be >= 1, got ", nranks);
  run_threads(nranks, {}, body);
}

void run_ranks(const std::vector<int>& host_of, const std::function<void(Communicator&)>& body) {
  if (host_of.empty()) fail(ErrorCode::invalid_argument, "run_ranks: no ranks (host_of is empty)");
  for (size_t r = 0; r < host_of.size(); ++r)
    if (host_of[r] < 0)
      fail(ErrorCode::invalid_argument, "run_ranks: host of rank ", r,
           " is negative: ", host_of[r]);
  run_threads(static_cast<int>(host_of.size()), host_of, body);
}

}  // namespace chorus::testing
