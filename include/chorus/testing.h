// Ranks as threads of one process, over the in-process transport: for tests and
// for trying chorus without a launcher.
#pragma once

#include <chorus/communicator.h>

#include <functional>
#include <vector>

namespace chorus::testing {

// Runs body(comm) on nranks threads, one Communicator each, and returns when all
// have returned. If any rank throws, its peers fail fast with peer_failure
// instead of waiting for their timeout, and the first exception raised is
// rethrown here once every rank has returned.
void run_ranks(int nranks, const std::function<void(Communicator&)>& body);

// The same with host_of.size() ranks, rank r standing for a rank of host
// host_of[r] (equal numbers share a host; as CHORUS_HOST_ID would set it), so
// that threads of one process play a job across hosts: its communicators
// see those hosts, and the hierarchical algorithms (hier_*) serve it.
//   run_ranks({0, 0, 0, 1}, body);  // a host of three ranks and one of one
void run_ranks(const std::vector<int>& host_of, const std::function<void(Communicator&)>& body);

}  // namespace chorus::testing
