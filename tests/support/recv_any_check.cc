#include "support/recv_any_check.h"

#include "core/check.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace chorus::test {

std::vector<std::string> check_recv_any(Communicator& comm) {
  std::vector<std::string> problems;
  const int n = comm.size();
  const int r = comm.rank();
  constexpr size_t kCount = 1031;
  auto holds = [](const std::vector<int32_t>& v, int32_t x) {
    return std::all_of(v.begin(), v.end(), [x](int32_t e) { return e == x; });
  };

  // Each other rank once, in whatever order they arrive.
  if (r == 0) {
    std::vector<int> seen;
    for (int k = 1; k < n; ++k) {
      std::vector<int32_t> v(kCount, -1);
      const int from = comm.recv_any(v.data(), v.size(), DataType::int32);
      seen.push_back(from);
      if (!holds(v, from)) problems.push_back(str_cat("the message from rank ", from, " is wrong"));
    }
    std::sort(seen.begin(), seen.end());
    for (int k = 1; k < n; ++k)
      if (seen[static_cast<size_t>(k - 1)] != k)
        problems.push_back(str_cat("senders seen: rank ", seen[static_cast<size_t>(k - 1)],
                                   " where rank ", k, " was due"));
  } else {
    const std::vector<int32_t> v(kCount, r);
    comm.send(v.data(), v.size(), DataType::int32, 0);
  }
  comm.barrier();

  // Two messages of one sender, in order; the first claimed by an irecv
  // posted before.
  if (r == 0) {
    int32_t first = -1;
    Work claimed = comm.irecv(&first, 1, DataType::int32, 1);
    int32_t second = -1;
    const int from = comm.recv_any(&second, 1, DataType::int32);
    claimed.wait();
    if (from != 1 || first != 100 || second != 101)
      problems.push_back(str_cat("after an irecv: got ", first, " by irecv and ", second,
                                 " from rank ", from,
                                 " by recv_any; 100, then 101 from rank 1 "
                                 "were due"));
  } else if (r == 1) {
    const int32_t a = 100;
    const int32_t b = 101;
    comm.send(&a, 1, DataType::int32, 0);
    comm.send(&b, 1, DataType::int32, 0);
  }
  comm.barrier();

  // Tags: rank 2's message with tag 7, sent before rank 1's (rank 1 sends
  // once rank 2 tells it), waits for a receive with tag 7; recv_any with
  // tag 3 takes rank 1's. (No collective between a send and its receive:
  // messages and collectives keep one order per pair.)
  CallOptions three;
  three.tag = 3;
  CallOptions seven;
  seven.tag = 7;
  if (r == 2) {
    // Asynchronous: over inproc a send completes only when it is received.
    const int32_t v = 7;
    Work tagged = comm.isend(&v, 1, DataType::int32, 0, seven);
    comm.send(nullptr, 0, DataType::int32, 1);
    tagged.wait();
  } else if (r == 1) {
    comm.recv(nullptr, 0, DataType::int32, 2);
    const int32_t v = 3;
    comm.send(&v, 1, DataType::int32, 0, three);
  } else if (r == 0) {
    int32_t x = -1;
    const int from = comm.recv_any(&x, 1, DataType::int32, three);
    int32_t y = -1;
    comm.recv(&y, 1, DataType::int32, 2, seven);
    if (from != 1 || x != 3 || y != 7)
      problems.push_back(str_cat("tags: recv_any(tag 3) got ", x, " from rank ", from,
                                 ", recv(tag 7) from rank 2 got ", y));
  }
  comm.barrier();

  // A deadline with nothing sent: timeout, and the communicator goes on.
  if (r == 0) {
    CallOptions quick;
    quick.timeout = std::chrono::milliseconds(100);
    int32_t v = 0;
    try {
      comm.recv_any(&v, 1, DataType::int32, quick);
      problems.push_back("recv_any returned with nothing sent");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::timeout)
        problems.push_back(str_cat("recv_any with nothing sent raised ", e.what()));
    }
  }
  int64_t sum = r;
  comm.allreduce(&sum, &sum, 1, DataType::int64, ReduceOp::sum);
  if (sum != int64_t{n} * (n - 1) / 2) problems.push_back("the allreduce after a timeout is wrong");
  return problems;
}

}  // namespace chorus::test
