// The checks of Communicator::recv_any, shared by the in-process test
// (tests/api/point_to_point_test.cc) and the multi-process one (mp_check
// recv-any, over shm and tcp): every rank of `comm` (N >= 3) runs them alike.
#pragma once

#include <chorus/chorus.h>

#include <string>
#include <vector>

namespace chorus::test {

// Every other rank sends rank 0 one message (its rank in every element):
// rank 0 receives them with recv_any and must see each sender once, with its
// data. Then rank 1 alone sends two messages: recv_any takes them in order.
// A message an earlier irecv claims is not taken: rank 0 posts irecv from
// rank 1, then recv_any gets rank 1's second message. A message with
// another tag is not taken. A deadline that passes raises timeout, and the
// communicator keeps working. Returns the problems found.
std::vector<std::string> check_recv_any(Communicator& comm);

}  // namespace chorus::test
