// The torch backend's start-up: chorus's own bootstrap (bootstrap_over_store
// in src/bootstrap/bootstrap.h) run over the c10d Store that torch hands a
// process group, so that there is no second store. TorchStore (start_up.cc)
// adapts c10d's Store to chorus's.
#pragma once

#include <chorus/communicator.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace chorus::torch_backend {

// This rank's communicator among `size` ranks that meet through `store` (the
// group's c10d store, the same prefix on every rank). `timeout` is every
// call's deadline; the start-up waits for the others as long as the store's
// own timeout allows when that is longer (a group made with a short timeout
// still starts while the ranks arrive at their own pace). A failure reaches
// every rank through the store, with this rank's reason.
//   Communicator comm = connect(store, rank, size, std::chrono::minutes(30));
Communicator connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);

}  // namespace chorus::torch_backend
