// ProcessGroupChorus: chorus as a torch.distributed backend (torch 1.13's
// c10d extension API). chorus/torch/__init__.py registers it as "chorus":
//
//   import chorus.torch
//   dist.init_process_group("chorus")          # env://, file://, tcp://
//   dist.all_reduce(t)                         # through ProcessGroupChorus
//
// The group meets its peers through the c10d Store that torch hands it
// (start_up.h) and keeps one chorus Communicator. Every call checks its
// tensors and submits its chorus::Calls (Communicator::submit) in the calling
// thread: chorus serialises the threads that call into one communicator, in
// the order they enter. Each chorus call carries an on_complete callback that
// counts it down; the last one to complete, on whichever thread completes it
// (chorus's progress thread, most often, or a thread inside wait()), copies
// the results back into the caller's tensors and completes the call's
// ChorusWork (work.h) and its future. There is no thread of the backend's own:
// chorus's engine advances every outstanding call. Collectives the C++ API
// lacks (gather, scatter, uneven all_to_all) are composed of point-to-point
// calls. A receive from any rank, which chorus has in a blocking form only,
// waits on a thread of its own.
//
// The methods are defined in three files: process_group.cc (the group, its
// submission and windows), collectives.cc (the calls that are one chorus
// collective) and point_to_point.cc (the calls made of messages).
#pragma once

#include "torch_backend/tensors.h"
#include "torch_backend/work.h"

#include <chorus/communicator.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::torch_backend {

class ProcessGroupChorus final : public c10d::ProcessGroup {
 public:
  // Connects this rank's communicator through `store` (start_up.h); every
  // call's deadline is `timeout`.
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  // A group over a communicator made already (new_group).
  explicit ProcessGroupChorus(Communicator comm);
  // Calls still unfinished are aborted first (the peers
  // learn why).
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }

  // Communicator::abort: pending and later calls fail here and on the peers.
  void abort(const std::string& reason) { comm_.abort(reason); }
  // The chorus transport under the group ("shm", "tcp", ...).
  std::string transport_name() const { return comm_.transport(); }
  // This rank's last 64 chorus calls as JSON.
  std::string flight_record() const { return comm_.flight_record(); }

  // A collective, queued like every call: a tensor of `sizes` in a new window
  // of the communicator (Communicator::window), whose memory lives as long as
  // the tensor's storage. Calls whose tensors all lie in windows read the
  // peers' data in place. Blocks until every rank has made the window.
  at::Tensor empty(const std::vector<int64_t>& sizes, at::ScalarType type);

  // The group of `ranks` (ranks of this group, in the order of their rank in
  // the new one; this rank among them), derived from this group's
  // communicator (src/groups/derive.h): no store and no second rendezvous.
  // Queued like every call; a collective over `ranks` only, as torch's
  // new_group runs the backend's creator on the members only.
  // `timeout` is the new group's deadline of every call.
  c10::intrusive_ptr<ProcessGroupChorus> new_group(const std::vector<int>& ranks,
                                                   std::chrono::milliseconds timeout);
  // Communicator::revoke: any thread, never blocks.
  void revoke() { comm_.revoke(); }
  // Communicator::shrink, queued like every call: the group of the ranks
  // that did not fail (this group stays broken). `timeout` 0: the
  // communicator's.
  c10::intrusive_ptr<ProcessGroupChorus> shrink(std::chrono::milliseconds timeout);

  // One chorus collective each (collectives.cc).
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  // A sparse COO tensor (all_reduce's SUM, as gloo does): the ranks' indices
  // and values gathered, the sum their coalesced union, copied into `t`.
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor& t,
                                                  const c10d::AllreduceOptions& opts);
  // One AllReduce per tensor, all in one call (one Work).
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  // One AllGather per input tensor, all in one call (one Work):
  // outputs[r][i] receives rank r's inputs[i].
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  // Equal splits: one AllToAll; uneven ones: messages (exchange()).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // gloo's monitored barrier: every rank reports to rank 0 and waits for its
  // answer; rank 0 waits opts.timeout (30 minutes when unset; 0: it looks
  // once and waits no longer) for the reports,
  // and raises naming the rank that did not report (the first, or with
  // `wait_all_ranks` all of them), after aborting the group so that the
  // others raise too instead of waiting for their timeout.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // chorus's Gather and Scatter, through one contiguous buffer on the root
  // (the list itself when its tensors lie back to back).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // Made of point-to-point messages (point_to_point.cc).
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  struct Op;
  // What a call's start submits through: every chorus call it makes is
  // counted, and the call's Work completes once all of them have.
  class Calls {
   public:
    Calls(Communicator& comm, std::shared_ptr<Op> op) : comm_(comm), op_(std::move(op)) {}
    void submit(const Call& call);
    // For the calls that block in chorus (window, derive, shrink, the sparse
    // AllReduce's gathers, the monitored barrier).
    Communicator& comm() { return comm_; }

   private:
    Communicator& comm_;
    std::shared_ptr<Op> op_;
  };
  // What a call submits to chorus (in the calling thread).
  using Start = std::function<void(Calls&)>;

  // One call in flight: what it does once every chorus call of it has
  // succeeded (finish: copies back into the caller's tensors), and how many
  // of them are still outstanding (1 more while its start runs).
  struct Op {
    c10::intrusive_ptr<ChorusWork> work;
    // What submitted the chorus calls: kept, with the tensors its closure
    // holds (staged copies, joined inputs), until every one of them has
    // completed, for chorus reads and writes them after the start returns.
    Start start;
    std::function<void()> finish;
    std::shared_ptr<std::atomic<int>> unfinished;  // the group's count
    std::atomic<int> remaining{1};
    std::mutex mu;
    std::vector<chorus::Work> calls;  // under mu
    std::exception_ptr start_error;   // what the start threw
    // One chorus call (or the start) ended; the last one completes the call.
    void one_done();
  };
  // A call's Op, counted among the group's unfinished calls (or
  // unsupported() while the group is being destroyed).
  std::shared_ptr<Op> new_op(c10d::OpType type, const std::string& call,
                             std::vector<at::Tensor> outputs, std::function<void()> finish);
  // Runs `start` (its error kept as the call's) and keeps it with the Op.
  void run_start(const std::shared_ptr<Op>& op, Start start);
  // A run of elements of a tensor, in bytes (for uneven all_to_all).
  struct Block {
    size_t offset = 0;
    size_t bytes = 0;
  };

  // `root` as a rank of this group, or unsupported().
  int root_rank(int64_t root, const std::string& call) const;
  // `peer` is another rank of this group, or unsupported().
  void check_peer(int peer, const std::string& call) const;
  // The k-th send from a to b matches the k-th recv at b from a, and their
  // tags must agree (a different tag raises mismatch on both): tags check
  // the order, they do not reorder messages as gloo's do.
  static CallOptions tagged(int tag, const std::string& call);
  // The rows of `t` (named `what`) as one block per rank: `splits` rows each,
  // or equal blocks when `splits` is empty.
  std::vector<Block> split_rows(const at::Tensor& t, const std::vector<int64_t>& splits,
                                const std::string& call, const char* what) const;
  // Block j of src goes to rank j, block j of dst comes from rank j.
  c10::intrusive_ptr<c10d::Work> exchange(c10d::OpType type, const std::string& call,
                                          std::vector<at::Tensor> outputs, const Staged& src,
                                          const std::vector<Block>& send, const Staged& dst,
                                          const std::vector<Block>& recv,
                                          const CallOptions& options);

  // Runs `start` in this thread and returns the call's Work, which
  // completes when every chorus call `start` submitted has.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const std::string& call,
                                         std::vector<at::Tensor> outputs, Start start,
                                         std::function<void()> finish);
  // Runs `start` on a thread of its own (a receive from any rank), the Work
  // completing when it returns.
  c10::intrusive_ptr<c10d::Work> enqueue_blocking(c10d::OpType type, const std::string& call,
                                                  std::vector<at::Tensor> outputs, Start start,
                                                  std::function<void()> finish);
  void shut_down();

  Communicator comm_;
  // Calls submitted and not yet completed (shared with their Ops).
  std::shared_ptr<std::atomic<int>> unfinished_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<bool> stopping_{false};
  std::mutex threads_mu_;
  std::vector<std::thread> threads_;  // enqueue_blocking's, joined at shut_down
};

}  // namespace chorus::torch_backend
