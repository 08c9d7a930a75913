// The revoke and shrink checks of shrink_check.h.
#include "support/shrink_check.h"

#include "core/check.h"
#include "support/progress.h"

#include <chorus/error.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

double now_ms() {
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

constexpr size_t kSmall = 1000;
constexpr size_t kLarge = size_t{1} << 22;  // 16 MiB of float32: many steps of every algorithm

// One AllReduce of ones. The even ranks submit it and, with the progress
// thread on, only watch its flag (progress.h: finish), so that a failure
// reaches them while that thread is inside the transport; the odd ranks
// block in the call.
void ones(Communicator& comm, std::vector<float>& v, size_t count) {
  v.assign(count, 1.0f);
  if (comm.rank() % 2 == 0)
    finish(comm, comm.allreduce_async(v.data(), v.data(), count, DataType::float32, ReduceOp::sum));
  else
    comm.allreduce(v.data(), v.data(), count, DataType::float32, ReduceOp::sum);
}

}  // namespace

std::vector<std::string> check_exact_allreduce(Communicator& next, const std::vector<int>& members,
                                               int old_rank) {
  std::vector<std::string> problems;
  const int n = static_cast<int>(members.size());
  if (next.size() != n)
    problems.push_back(str_cat("the new communicator has ", next.size(), " ranks, not ", n));
  const auto self = std::find(members.begin(), members.end(), old_rank);
  const int expected_rank = static_cast<int>(self - members.begin());
  if (next.rank() != expected_rank)
    problems.push_back(str_cat("old rank ", old_rank, " is rank ", next.rank(),
                               " of the new communicator, not ", expected_rank));
  if (!problems.empty()) return problems;
  // Who is who, in order.
  std::vector<int32_t> olds(static_cast<size_t>(n));
  const int32_t mine = old_rank;
  next.allgather(&mine, olds.data(), 1, DataType::int32);
  for (int i = 0; i < n; ++i)
    if (olds[static_cast<size_t>(i)] != members[static_cast<size_t>(i)])
      problems.push_back(str_cat("rank ", i, " of the new communicator is old rank ",
                                 olds[static_cast<size_t>(i)], ", not ",
                                 members[static_cast<size_t>(i)]));
  // Exact sums, small and large.
  double expected = 0;
  for (int m : members) expected += m + 1;
  for (size_t count : {kSmall + 3, kLarge / 4 + 1}) {
    std::vector<float> v(count, static_cast<float>(old_rank + 1));
    next.allreduce(v.data(), v.data(), count, DataType::float32, ReduceOp::sum);
    const auto bad = std::find_if(v.begin(), v.end(),
                                  [&](float x) { return static_cast<double>(x) != expected; });
    if (bad != v.end())
      problems.push_back(str_cat("AllReduce of ", count, " on the new communicator: element ",
                                 bad - v.begin(), " is ", *bad, ", not ", expected));
  }
  return problems;
}

std::vector<std::string> check_shrink_after_death(Communicator& comm, int victim, bool inside,
                                                  const Die& die, int second,
                                                  std::optional<Communicator>* next_out) {
  std::vector<std::string> problems;
  const int n = comm.size();
  const int me = comm.rank();
  std::vector<float> v;
  // The victim's last call may end before the survivors' does (it has
  // done its part), so a survivor may raise in it already.
  constexpr int kBefore = 3;
  if (me == victim) {
    for (int i = 0; i < kBefore; ++i) ones(comm, v, kSmall);
    if (inside) {
      // Its part of a large AllReduce begun, and no more: chorus makes
      // progress only inside calls, so the call cannot end without it.
      // Ranks that are threads read each other's buffers in place, so the
      // victim's must outlive its thread: a dead process's memory is gone
      // for its peers only through their transport.
      static std::vector<float> big;
      big.assign(kLarge, 1.0f);
      Work work = comm.allreduce_async(big.data(), big.data(), big.size(), DataType::float32,
                                       ReduceOp::sum);
      for (int i = 0; i < 3; ++i) work.done();
      die();
      return problems;
    }
    die();
    return problems;
  }
  bool raised = false;
  try {
    for (int i = 0; i < kBefore; ++i) ones(comm, v, kSmall);
    // Where the victim's sends of the large call were all posted (threads
    // read them in place), a survivor may finish that call; its next one
    // raises then.
    if (inside) ones(comm, v, kLarge);
    for (int i = 0; i < 100; ++i) ones(comm, v, kSmall);
  } catch (const Error& e) {
    raised = true;
    if (e.code() != ErrorCode::peer_failure && e.code() != ErrorCode::revoked &&
        e.code() != ErrorCode::aborted)
      problems.push_back(str_cat("the failed call raised ", to_string(e.code()), ": ", e.what()));
  }
  if (!raised) {
    problems.push_back(str_cat("no call raised after rank ", victim, " died"));
    return problems;
  }
  if (me == second) {
    // Dies while the others shrink, without calling it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    die();
    return problems;
  }
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (r != victim && r != second) members.push_back(r);
  Communicator next = comm.shrink();
  for (auto& p : check_exact_allreduce(next, members, me)) problems.push_back(p);
  // The old communicator stays broken.
  try {
    ones(comm, v, kSmall);
    problems.push_back("a call on the old communicator returned after the shrink");
  } catch (const Error&) {
  }
  if (next_out != nullptr) next_out->emplace(std::move(next));
  return problems;
}

std::vector<std::string> check_revoke_unblocks(Communicator& comm, double bound_ms,
                                               double& measured_ms,
                                               std::optional<Communicator>* next_out) {
  std::vector<std::string> problems;
  const int n = comm.size();
  const int me = comm.rank();
  comm.barrier();
  std::atomic<double> revoked_at{0};
  std::thread revoker;
  if (me == 0)
    revoker = std::thread([&] {
      // Long enough for every rank to have left the barrier (a revoke cuts
      // short the calls still in flight) and to wait in its receive.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      revoked_at = now_ms();
      comm.revoke();
    });
  float x = 0;
  double raised_at = 0;
  try {
    // Nothing ever meets it: every rank is blocked until the revoke. The
    // even ranks' progress threads wait in the transport (ones() says why).
    if (me % 2 == 0)
      finish(comm, comm.recv_async(&x, 1, DataType::float32, (me + 1) % n));
    else
      comm.recv(&x, 1, DataType::float32, (me + 1) % n);
    problems.push_back("a receive that nothing met returned");
  } catch (const Error& e) {
    raised_at = now_ms();
    if (e.code() != ErrorCode::revoked)
      problems.push_back(
          str_cat("the blocked call raised ", to_string(e.code()), ", not revoked: ", e.what()));
  }
  if (revoker.joinable()) revoker.join();
  try {
    comm.barrier();
    problems.push_back("a call after the revoke returned");
  } catch (const Error& e) {
    if (e.code() != ErrorCode::revoked)
      problems.push_back(str_cat("a call after the revoke raised ", to_string(e.code()),
                                 ", not revoked: ", e.what()));
  }
  Communicator next = comm.shrink();
  std::vector<int> members;
  for (int r = 0; r < n; ++r) members.push_back(r);
  for (auto& p : check_exact_allreduce(next, members, me)) problems.push_back(p);
  double when = revoked_at;
  next.broadcast(&when, &when, 1, DataType::float64, 0);
  measured_ms = raised_at - when;
  if (measured_ms > bound_ms)
    problems.push_back(str_cat("the blocked call raised ", measured_ms,
                               " ms after the revoke (bound ", bound_ms, " ms)"));
  if (next_out != nullptr) next_out->emplace(std::move(next));
  return problems;
}

}  // namespace chorus::test
