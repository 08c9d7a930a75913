// wait_all: a transport test's wait for its own requests, failing the test
// (not hanging) at a deadline, and on a request it did not post or that
// completes twice.
#pragma once

#include "core/deadline.h"
#include "transport/transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace chorus::test {

// Waits until every id in `ids` has completed on `t`.
inline void wait_all(Transport& t, std::vector<RequestId> ids,
                     Deadline deadline = Clock::now() + std::chrono::seconds(10)) {
  std::vector<RequestId> done;
  while (!ids.empty()) {
    done.clear();
    t.wait_some(done, deadline);
    if (done.empty() && Clock::now() >= deadline) FAIL() << "rank " << t.rank() << " timed out";
    for (RequestId id : done) {
      ASSERT_NE(std::find(ids.begin(), ids.end(), id), ids.end())
          << "rank " << t.rank() << ": unknown or repeated request " << id;
      std::erase(ids, id);
    }
  }
}

}  // namespace chorus::test
