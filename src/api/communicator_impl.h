// The implementation behind chorus::Communicator: argument checks, algorithm
// choice, program cache, and the executor engine over one transport.
//
// Every public collective funnels into one CallDescriptor and one enqueue path.
#pragma once

#include "algorithms/algorithm.h"
#include "core/config.h"
#include "exec/executor.h"
#include "transport/transport.h"

#include <chorus/communicator.h>
#include <chorus/error.h>

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <tuple>

namespace chorus {

// One collective call as the API received it.
struct CallDescriptor {
  Collective collective = Collective::allreduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  const CallOptions* options = nullptr;
};

// Chooses the algorithm for a call when none is named; the tuner plugs in here.
using AlgorithmSelector = std::function<const Algorithm*(const CollectiveSpec&)>;

namespace detail {

// Scratch buffers, reused across calls so that a large call does not pay for
// fresh pages every time.
class ScratchPool {
 public:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    size_t bytes = 0;
  };
  Buffer take(size_t bytes);
  void give(Buffer buffer);

 private:
  std::vector<Buffer> free_;
};

// One call in progress. The communicator recycles these (with their
// Execution's arrays) once nobody holds them, so that a call allocates
// nothing; the engine holds the Execution through an aliasing pointer that
// keeps the whole WorkState alive.
struct WorkState {
  CommunicatorImpl* comm = nullptr;
  ScratchPool::Buffer scratch;
  Execution exec;
  // The avg division, applied to `avg_count` elements of `avg_out` once the
  // sum is complete (avg_out == nullptr: none).
  void* avg_out = nullptr;
  size_t avg_count = 0;
  size_t avg_divisor = 0;
  DataType avg_type = DataType::float32;
  std::exception_ptr error;
  bool finished = false;
};

class CommunicatorImpl {
 public:
  CommunicatorImpl(std::unique_ptr<Transport> transport, Config config);
  ~CommunicatorImpl();

  int rank() const { return rank_; }
  int size() const { return size_; }
  Transport& transport() { return *transport_; }
  const Config& config() const { return config_; }
  void set_selector(AlgorithmSelector selector) {
    selector_ = std::move(selector);
    last_call_ = {};  // its choice may differ now
  }

  // Validates, picks the algorithm, builds (or reuses) the program, starts it.
  std::shared_ptr<WorkState> submit(const CallDescriptor& call);
  // Send or receive of `count` elements to/from `peer` as a one-op Program on
  // the same engine (kind is OpKind::send or OpKind::recv).
  std::shared_ptr<WorkState> submit_point_to_point(OpKind kind, const void* send, void* recv,
                                                   size_t count, DataType type, int peer,
                                                   const CallOptions& options);
  void wait(WorkState& work);
  bool test(WorkState& work);

  // Name of the algorithm a call would use (after overrides and fallback).
  const Algorithm& choose(const CollectiveSpec& spec, const CallOptions& options) const;

 private:
  void validate(const CallDescriptor& call) const;
  std::shared_ptr<const PreparedProgram> program_for(const Algorithm& algo,
                                                     const CollectiveSpec& spec);
  void fail_all(std::exception_ptr error);
  void retire(WorkState& work);
  // Retires every outstanding call whose execution is done, in order.
  void retire_done();
  // A recycled or new WorkState for one call.
  std::shared_ptr<WorkState> new_work();

  std::unique_ptr<Transport> transport_;
  int rank_;  // transport_'s, read once: the checks use them on every call
  int size_;
  Config config_;
  Engine engine_;
  AlgorithmSelector selector_;
  ScratchPool pool_;
  std::vector<std::shared_ptr<WorkState>> outstanding_;
  std::exception_ptr broken_;  // set once a call failed: the communicator is unusable
  // Programs are pure functions of (algorithm, spec): cache the recent ones.
  using ProgramKey = std::tuple<const Algorithm*, size_t, size_t, int, size_t>;
  std::map<ProgramKey, std::shared_ptr<const PreparedProgram>> programs_;
  // One-op programs of point-to-point calls, by (kind, peer, count).
  std::map<std::tuple<int, int, size_t>, std::shared_ptr<const PreparedProgram>> p2p_programs_;
  // The algorithm and program of the last collective call: a loop of equal
  // calls skips the override parsing, the tuner's and the cache's lookups.
  // Valid because the choice is a function of exactly these fields (config
  // and selector are fixed; set_selector clears it).
  struct LastCall {
    Collective collective = Collective::allreduce;
    size_t count = 0;
    size_t elem_size = 0;
    int root = -1;
    std::string algorithm_option;  // CallOptions::algorithm
    const Algorithm* algorithm = nullptr;
    std::shared_ptr<const PreparedProgram> program;
  };
  LastCall last_call_;
  // WorkStates to recycle; one is free when only this list holds it.
  std::vector<std::shared_ptr<WorkState>> spare_work_;
};

}  // namespace detail

// Wraps a transport into a Communicator.
Communicator make_communicator(std::unique_ptr<Transport> transport, Config config);

}  // namespace chorus
