// Communicator: a group of N ranks that run collectives together.
//
// Threading: a Communicator is used by one thread at a time. Every rank must call
// the same collectives in the same order with matching arguments (as in NCCL and
// MPI). Several asynchronous operations may be outstanding at once; they complete
// correctly when every rank issues them in the same order.
//
// Progress: chorus has no progress thread. An outstanding Work advances whenever
// its communicator is inside a call: Work::wait(), Work::done(), or any other
// collective.
//
// In-place forms (as in NCCL):
//   allreduce, broadcast, reduce:  send == recv
//   allgather:                     send == recv + rank * send_count * elem_size
//   reduce_scatter:                recv == send + rank * recv_count * elem_size
//
// Example:
//   chorus::testing::run_ranks(4, [](chorus::Communicator& comm) {
//     std::vector<float> v(1024, float(comm.rank()));
//     comm.allreduce(v.data(), v.data(), v.size(), chorus::DataType::float32,
//                    chorus::ReduceOp::sum);
//     // every v[i] == 0 + 1 + 2 + 3
//   });
#pragma once

#include <chorus/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace chorus {

namespace detail {
class CommunicatorImpl;
struct WorkState;
}  // namespace detail
class SharedWindow;

// Memory that every rank of a communicator on one host (shm or inproc) can
// address: Communicator::window() makes one on every rank. Collectives whose
// buffers lie in windows read the peers' data in place, without the copies
// ordinary buffers need (every rank passes window buffers, or none).
// A Window is a shared handle: the memory lives while any copy of it does
// here, and while any rank still maps it; nothing outlives the last rank,
// however it ends (no file is left in /dev/shm or elsewhere).
//   chorus::Window w = comm.window(n * sizeof(float));
//   auto* v = static_cast<float*>(w.data());
//   comm.allreduce(v, v, n, chorus::DataType::float32, chorus::ReduceOp::sum);
class Window {
 public:
  Window() = default;
  void* data() const;
  size_t size() const;  // bytes
  explicit operator bool() const { return window_ != nullptr; }

 private:
  friend class Communicator;
  explicit Window(std::shared_ptr<SharedWindow> window) : window_(std::move(window)) {}
  std::shared_ptr<SharedWindow> window_;
};

// Handle on an asynchronous collective. wait() and done() on a Work whose
// Communicator has been destroyed raise Error(invalid_argument).
class Work {
 public:
  Work();
  explicit Work(std::shared_ptr<detail::WorkState> state);
  // Blocks until the operation has completed; rethrows its error, if any.
  void wait();
  // Makes progress without blocking; true once the operation has completed
  // (successfully or not: wait() then reports the outcome).
  bool done();

 private:
  std::shared_ptr<detail::WorkState> state_;
};

// Every call on a moved-from Communicator raises Error(invalid_argument).
// Only chorus::Error leaves its methods (out of memory is ErrorCode::system).
class Communicator {
 public:
  explicit Communicator(std::unique_ptr<detail::CommunicatorImpl> impl);
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  int rank() const;
  int size() const;

  // Aborts the communicator: every pending and later call on this rank raises
  // Error(aborted) with `reason`, and every peer raises aborted naming this
  // rank and the reason. May be called from any thread, also while another
  // thread is blocked in a call on this communicator (that call returns within
  // milliseconds); never blocks. Not concurrently with the destructor.
  // A new communicator (init_from_env) works afterwards.
  void abort(std::string_view reason);

  // This rank's last 64 calls as JSON: sequence number, shape, algorithm,
  // start and end times, state, and for a failed call the error and the ops it
  // still waited for. CHORUS_FLIGHT_RECORDER=DIR also writes it to
  // DIR/chorus-flight-rank<R>.json whenever a call fails.
  std::string flight_record() const;

  // A collective: every rank calls it with the same `bytes`, in the same
  // order as its other calls. Raises Error(invalid_argument) where the ranks
  // share no memory (tcp, shm+tcp, or one rank).
  Window window(size_t bytes);

  // recv[i] = op over all ranks of send[i], on every rank; count elements each.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                 const CallOptions& options = {});
  // recv = concat over ranks j of rank j's send (send_count elements each).
  void allgather(const void* send, void* recv, size_t send_count, DataType type,
                 const CallOptions& options = {});
  // send holds size()*recv_count elements; rank r receives block r of the
  // reduction.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op, const CallOptions& options = {});
  // recv = root's send on every rank (send is read on the root only).
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                 const CallOptions& options = {});
  // recv on root = op over all ranks of send (recv is written on the root only).
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              const CallOptions& options = {});
  // Returns once every rank has entered the barrier.
  void barrier(const CallOptions& options = {});
  // send holds size() blocks of `count` elements; block j goes to rank j, and
  // block j of recv receives rank j's block rank(). Buffers must not overlap.
  void alltoall(const void* send, void* recv, size_t count, DataType type,
                const CallOptions& options = {});

  // Point to point. The k-th send from rank a to rank b matches the k-th recv
  // at b from a (FIFO per ordered pair, in call order, also across
  // collectives); counts and types must agree. A zero-count message is a real
  // message. peer must be another rank of this communicator.
  //   if (comm.rank() == 0) comm.send(v.data(), v.size(), DataType::float32, 1);
  //   if (comm.rank() == 1) comm.recv(v.data(), v.size(), DataType::float32, 0);
  void send(const void* buf, size_t count, DataType type, int peer,
            const CallOptions& options = {});
  void recv(void* buf, size_t count, DataType type, int peer, const CallOptions& options = {});
  // Asynchronous forms: buf stays untouched by the caller until the Work is done.
  Work isend(const void* buf, size_t count, DataType type, int peer,
             const CallOptions& options = {});
  Work irecv(void* buf, size_t count, DataType type, int peer, const CallOptions& options = {});

  Work allreduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                       const CallOptions& options = {});

  // Internal: the implementation behind this handle. Throws Error
  // (invalid_argument) on a moved-from Communicator.
  detail::CommunicatorImpl& impl() const;

 private:
  std::unique_ptr<detail::CommunicatorImpl> impl_;
};

}  // namespace chorus
