// Ranks as threads of one process, over the in-process transport: for tests and
// for trying chorus without a launcher.
#pragma once

#include <chorus/communicator.h>

#include <functional>

namespace chorus::testing {

// Runs body(comm) on nranks threads, one Communicator each, and returns when all
// have returned. If any rank throws, its peers fail fast with peer_failure
// instead of waiting for their timeout, and the first exception raised is
// rethrown here once every rank has returned.
void run_ranks(int nranks, const std::function<void(Communicator&)>& body);

}  // namespace chorus::testing
