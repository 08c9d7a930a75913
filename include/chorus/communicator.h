// Communicator: a group of N ranks that run collectives together.
//
// Threading: every rank must call the same collectives in the same order with
// matching arguments (as in NCCL and MPI). Several asynchronous operations may be
// outstanding at once; they complete correctly when every rank issues them in the
// same order. Calls may come from several threads (torch's autograd thread
// submits, its main thread waits): the communicator serialises them, and the
// order in which they enter is the order of the calls.
//
// Progress: an outstanding Work advances without its caller. A blocking call,
// and a wait(), run on the caller's thread; when a caller returns with work
// outstanding, the communicator's progress thread takes over until the work is
// done or a caller comes back (CHORUS_PROGRESS=thread, the default; it sleeps
// on the transport's readiness and uses no CPU while nothing is outstanding).
// With CHORUS_PROGRESS=caller, work advances only inside the communicator's
// calls: Work::wait(), Work::done(), or any other collective.
//
// In-place forms (as in NCCL):
//   allreduce, broadcast, reduce:  send == recv
//   allgather:                     send == recv + rank * send_count * elem_size
//   reduce_scatter:                recv == send + rank * recv_count * elem_size
//   gather (on the root):          send == recv + root * count * elem_size
//   scatter (on the root):         recv == send + root * count * elem_size
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

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class Communicator;
namespace detail {
class CommunicatorImpl;
struct WorkState;
struct PlanState;
struct Access;  // chorus's own way in (src/engine/communicator_impl.h)
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
  // Never blocks: true once the operation has completed (successfully or
  // not: wait() then reports the outcome). Where no other thread is advancing
  // the communicator, it advances it once, without waiting.
  bool done();
  // Waits at most `timeout` for the operation, advancing it on this thread
  // as wait() does: true once it has completed (then it rethrows its error,
  // as wait() does), false when the time passed first (the operation goes
  // on; the progress thread takes it over). How a caller that must look at
  // something else now and then (a signal, a deadline of its own) waits.
  bool wait_for(std::chrono::nanoseconds timeout);
  // A flag read, nothing more: true once the operation has completed. Makes
  // no progress (where CHORUS_PROGRESS=caller, only the communicator's calls
  // complete it); what a thread that must not enter chorus polls.
  bool is_completed() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

struct Call;

// A call prepared once and started many times on the same buffers, as
// MPI_Allreduce_init and a persistent request do:
//   chorus::Plan plan = comm.prepare(chorus::Call::allreduce(g, g, n, type, op));
//   for (int step = 0; step < steps; ++step) {
//     chorus::Work w = plan.start();   // no allocation, no selection
//     ...                              // compute
//     w.wait();
//   }
// prepare() checks the call and fixes its algorithm, Program, chunking and
// fingerprint (a collective over the communicator only where the algorithm
// choice asks the peers, as any first call of a shape does; every rank
// prepares the same calls). start() runs it as the next call of the
// communicator: every rank starts its plans in the same order as its other
// calls. A plan of a message, of a deterministic call or of a one-sided
// algorithm runs its call as submit() would at each start.
// start() raises Error(invalid_argument) while the plan's previous run is
// outstanding, and the communicator's error once it is broken (revoked,
// aborted, shrunk or destroyed). A Plan destroyed while its run is
// outstanding leaves the run to complete on its own; its Work stays valid.
class Plan {
 public:
  Plan();
  explicit Plan(std::shared_ptr<detail::PlanState> state);
  // Starts the next run; its Work is the plan's (a Work of an earlier run of
  // this plan refers to it too).
  Work start();
  // The algorithm every run uses ("ring"); "" where each start chooses (see
  // above) or for a message.
  std::string algorithm() const;

 private:
  std::shared_ptr<detail::PlanState> state_;
};

// One call of a communicator, as data: what Communicator::submit() runs. Every
// named call (allreduce, broadcast_async, send, irecv, ...) fills one and
// submits it, so a program that decides at run time what to call (a sweep, a
// binding to another language, a replay) builds a Call instead of a switch:
//   chorus::Call call = chorus::Call::allreduce(v.data(), v.data(), v.size(),
//                                               chorus::DataType::float32,
//                                               chorus::ReduceOp::sum);
//   chorus::Work work = comm.submit(call);   // returns at once
//   ...                                      // other work
//   work.wait();
// The buffers' meaning per collective is that of the named forms below.
struct Call {
  // A collective, or one side of a point-to-point message.
  enum class Kind : int { collective, send, recv };
  Kind kind = Kind::collective;
  Collective collective = Collective::allreduce;  // Kind::collective only
  const void* send = nullptr;                     // the send buffer; Kind::send: the message
  void* recv = nullptr;  // the recv buffer; Kind::recv: where the message lands
  size_t count = 0;      // elements, as types.h's Collective says; a message's length
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;  // allreduce, reduce_scatter, reduce
  int root = 0;                 // broadcast, reduce, gather, scatter
  int peer = -1;                // Kind::send, Kind::recv: the other rank
  CallOptions options;

  static Call allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        CallOptions options = {});
  static Call allgather(const void* send, void* recv, size_t send_count, DataType type,
                        CallOptions options = {});
  static Call reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                             ReduceOp op, CallOptions options = {});
  static Call broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                        CallOptions options = {});
  static Call reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                     int root, CallOptions options = {});
  static Call alltoall(const void* send, void* recv, size_t count, DataType type,
                       CallOptions options = {});
  static Call barrier(CallOptions options = {});
  static Call gather(const void* send, void* recv, size_t count, DataType type, int root,
                     CallOptions options = {});
  static Call scatter(const void* send, void* recv, size_t count, DataType type, int root,
                      CallOptions options = {});
  static Call send_to(const void* buf, size_t count, DataType type, int peer,
                      CallOptions options = {});
  static Call recv_from(void* buf, size_t count, DataType type, int peer, CallOptions options = {});
  // The call's name in errors: "allreduce", ..., "send", "recv".
  std::string_view name() const;
};

// One rank's part in the waiting of recent collectives
// (Communicator::stragglers). A rank's lateness in a call is its arrival (when
// it entered the call) minus the first arrival, on rank 0's clock.
struct StragglerStats {
  int rank = 0;
  int calls = 0;           // collectives looked at (the same for every rank)
  int last_count = 0;      // of them, those it arrived last in, later than error_s
  double mean_late_s = 0;  // its lateness, mean over the calls
  double p90_late_s = 0;   // its lateness, 90th percentile over the calls
  // The share of the group's waiting (summed over the calls: last arrival
  // minus first) that it caused, as the last arriver beyond the error.
  double wait_share = 0;
  // The error bar of its lateness: the clock offsets' errors (half the best
  // round trip of the ping-pongs that measured them), its own and the
  // largest other; a lateness below it is not attributed.
  double error_s = 0;
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
  // The transport that connects the ranks: "inproc", "shm", "tcp" or "shm+tcp".
  std::string transport() const;
  // Who advances outstanding work: "thread" (its progress thread) or
  // "caller" (CHORUS_PROGRESS, InitOptions::progress).
  std::string progress() const;

  // Aborts the communicator: every pending and later call on this rank raises
  // Error(aborted) with `reason`, and every peer raises aborted naming this
  // rank and the reason. May be called from any thread, also while another
  // thread is blocked in a call on this communicator (that call returns within
  // milliseconds); never blocks. Not concurrently with the destructor.
  // A new communicator (init_from_env) works afterwards.
  void abort(std::string_view reason);

  // Revokes the communicator: every pending and later call on every rank of
  // it raises Error(revoked), this rank's naming the revoke, the peers'
  // naming this rank. Any rank may call it, from any thread, also while
  // another thread is blocked in a call here (that call returns within
  // milliseconds); it never blocks and frees nothing. The way for a rank
  // that learns of a failure out of band to stop the others at once; a
  // failure of a call (a peer's death, an abort, a timeout) revokes the
  // communicator implicitly (its later calls raise that failure). The
  // survivors go on with shrink(). Not concurrently with the destructor.
  void revoke();

  // After a failure or a revoke, the live ranks call it: they agree on the
  // ranks that failed and return a new communicator of the others, ranked
  // in the order of their ranks here. The agreement tolerates further
  // failures: a rank that dies during the shrink is left out too, and every
  // survivor returns the same membership, or every survivor raises. A rank
  // that lives but has not called shrink within `timeout` (0: CHORUS_TIMEOUT)
  // is counted failed. Needs no store (the ranks meet over links that
  // outlive this communicator's transport; docs/RELIABILITY.md says how
  // long it takes). On a working communicator it revokes it first. This
  // communicator stays broken, its windows released; where shrink raised,
  // it may be called again.
  //   try { comm.allreduce(...); }
  //   catch (const chorus::Error&) { comm = comm.shrink(); }
  Communicator shrink(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Grows the communicator by `joining` new processes, which call
  // chorus::join_from_env() (init.h): a collective over this communicator
  // that returns a communicator of its ranks (ranked as here) and the
  // joiners (ranked after them, in the order they arrive). The joiners meet
  // the members through the job's store (the one init() was given) and name
  // the generation they join (CHORUS_JOIN_GENERATION, docs/LAUNCHING.md):
  // this communicator's generation + 1, where init() makes generation 0 and
  // each grow the next (split and shrink keep it). A late joiner, or one of
  // another generation, is refused with an Error that says so. Every member
  // and joiner gets the new communicator, or every one raises (a joiner that
  // does not come within `timeout`, 0: CHORUS_TIMEOUT, fails it). Processes
  // only (not run_ranks' threads).
  //   comm = comm.shrink();                 // after a rank died
  //   comm = comm.grow(1);                  // its replacement joins
  Communicator grow(int joining, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Splits this communicator, as MPI_Comm_split and ncclCommSplit do. A
  // collective over this communicator: every rank calls it, in the same order
  // as its other calls. The ranks that pass the same color form a new
  // communicator, ranked by (key, rank in this one); a negative color takes
  // part in the call and gets std::nullopt.
  //   auto row = comm.split(comm.rank() / 4, comm.rank());   // groups of 4
  // A child is a communicator like any other (every call, windows where its
  // ranks share memory, abort, timeouts, the flight recorder, a tuner of its
  // own shape), with links of its own: it needs no store, since its set-up
  // meets through this communicator, and destroying or aborting the parent
  // or a child never breaks another. Parent and children may be used from one
  // thread in any interleaving that is the same on every rank.
  std::optional<Communicator> split(int color, int key);
  // The ranks of this communicator that share a host (memory) with this one,
  // ranked as here: split with the host as color. Hosts are the ranks' own
  // host identities (CHORUS_HOST_ID, else the machine, /dev/shm and pid
  // namespace it runs in), not launcher variables. A collective over this
  // communicator.
  Communicator split_by_host();

  // This rank's last 64 calls as JSON: sequence number, shape, algorithm,
  // start and end times, state, and for a failed call the error and the ops it
  // still waited for. CHORUS_FLIGHT_RECORDER=DIR also writes it to
  // DIR/chorus-flight-rank<R>.json whenever a call fails.
  std::string flight_record() const;

  // A collective (every rank calls it, in the order of its other calls):
  // who held the others back over the last `calls` collectives (0: as many
  // as every rank still has in its flight recorder, at most 64). Each rank
  // keeps its arrival times; this call measures every rank's clock offset
  // to rank 0 (ping-pongs, NTP style, with their error bar), gathers the
  // arrivals and returns one StragglerStats per rank, the same on every
  // rank. The flight record then carries each of those calls' last arriver
  // and its lateness (docs/OPERATING.md).
  std::vector<StragglerStats> stragglers(int calls = 0);

  // A collective: every rank calls it with the same `bytes`, in the same
  // order as its other calls. Raises Error(invalid_argument) where the ranks
  // share no memory (tcp, shm+tcp, or one rank).
  Window window(size_t bytes);

  // Starts `call` and returns at once: its arguments are checked before any
  // byte moves (Error(invalid_argument)), and its buffers stay untouched by the
  // caller until the Work is done. Every other call is this one.
  Work submit(const Call& call);
  // The same, and `on_complete` runs once the call has completed
  // (successfully or not), exactly once, on the thread that completed it (the
  // progress thread, or a caller inside wait(), done() or another call) after
  // that thread has let go of the communicator: it may call chorus, and must
  // not block for long. The Work is done (done(), is_completed(), wait())
  // only once `on_complete` has returned, so a wait() on another thread
  // never returns before it; inside it, wait() on its own Work returns at
  // once. What a framework's futures hang on.
  Work submit(const Call& call, std::function<void()> on_complete);
  // Runs `call` to its end, on this thread: the blocking form of submit(),
  // which every blocking named call is (submit(call).wait() hands the call
  // to the progress thread in between).
  void run(const Call& call);
  // Prepares `call` to be started many times (Plan, above).
  Plan prepare(const Call& call);

  // recv[i] = op over all ranks of send[i], on every rank; count elements each.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                 const CallOptions& options = {});
  // recv = concat over ranks j of rank j's send (send_count elements each).
  void allgather(const void* send, void* recv, size_t send_count, DataType type,
                 const CallOptions& options = {});
  // send holds size()*recv_count elements; rank r receives block r of the
  // reduction.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                      const CallOptions& options = {});
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
  // recv on root = concat over ranks j of rank j's send (count elements each;
  // recv holds size()*count and is written on the root only).
  void gather(const void* send, void* recv, size_t count, DataType type, int root,
              const CallOptions& options = {});
  // send on root holds size() blocks of `count` elements (read on the root
  // only); rank j receives block j into recv.
  void scatter(const void* send, void* recv, size_t count, DataType type, int root,
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
  // A receive from any other rank (MPI_ANY_SOURCE): the next message that
  // arrives from a rank, with this tag, that no earlier call of this rank
  // receives (that rank's next message to this one, as recv() from it would
  // meet), received into buf; returns the sender. Blocking. A deadline that
  // passes before any message arrives raises Error(timeout) and leaves the
  // communicator usable: nothing was received.
  //   int from = comm.recv_any(v.data(), v.size(), DataType::float32);
  int recv_any(void* buf, size_t count, DataType type, const CallOptions& options = {});

  // Asynchronous forms of every call: each submits the same Call as its
  // blocking form and returns its Work at once; the buffers stay untouched by
  // the caller until the Work is done. Calls complete in the order they were
  // issued on every rank.
  Work allreduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                       const CallOptions& options = {});
  Work allgather_async(const void* send, void* recv, size_t send_count, DataType type,
                       const CallOptions& options = {});
  Work reduce_scatter_async(const void* send, void* recv, size_t recv_count, DataType type,
                            ReduceOp op, const CallOptions& options = {});
  Work broadcast_async(const void* send, void* recv, size_t count, DataType type, int root,
                       const CallOptions& options = {});
  Work reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                    int root, const CallOptions& options = {});
  Work barrier_async(const CallOptions& options = {});
  Work alltoall_async(const void* send, void* recv, size_t count, DataType type,
                      const CallOptions& options = {});
  Work gather_async(const void* send, void* recv, size_t count, DataType type, int root,
                    const CallOptions& options = {});
  Work scatter_async(const void* send, void* recv, size_t count, DataType type, int root,
                     const CallOptions& options = {});
  Work send_async(const void* buf, size_t count, DataType type, int peer,
                  const CallOptions& options = {});
  Work recv_async(void* buf, size_t count, DataType type, int peer,
                  const CallOptions& options = {});
  // MPI's names for send_async and recv_async.
  Work isend(const void* buf, size_t count, DataType type, int peer,
             const CallOptions& options = {}) {
    return send_async(buf, count, type, peer, options);
  }
  Work irecv(void* buf, size_t count, DataType type, int peer, const CallOptions& options = {}) {
    return recv_async(buf, count, type, peer, options);
  }

 private:
  friend struct detail::Access;
  std::unique_ptr<detail::CommunicatorImpl> impl_;
};

}  // namespace chorus
