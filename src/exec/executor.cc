#include "exec/executor.h"

#include "core/check.h"
#include "core/cpu_relax.h"
#include "core/reduce_kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace chorus {

namespace {

// A duration as milliseconds with one decimal: "300000.0".
std::string milliseconds_text(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double, std::milli>(d).count());
  return buf;
}
// Holes at the front of the in-flight list that make it worth compacting.
constexpr size_t kCompactAfter = 64;
// How long a timed-out call waits for its peers' answers to a stall report.
constexpr auto kStallReportWait = std::chrono::milliseconds(250);
// A one-sided wait: polls before yielding the core, then yields for a while
// before napping between polls. The phases and the liveness checks go by the
// clock, not by rounds: on a loaded host one yield can take a whole time
// slice, and a count of yields would then put the first check of a dead
// peer past the call's deadline.
constexpr int kWaitSpinRounds = 200;
constexpr auto kWaitYieldFor = std::chrono::milliseconds(20);
constexpr auto kWaitNap = std::chrono::microseconds(50);
// Pauses between two clock reads while a one-sided wait polls on its core.
constexpr int kPollsPerNap = 16;
constexpr auto kWaitCheckEvery = std::chrono::milliseconds(5);  // liveness checks
}  // namespace

std::string CallLabel::str() const {
  if (peer >= 0) return str_cat(operation, " ", peer);
  return str_cat(operation, "(", algorithm, ")");
}

namespace {

// The ops that write Output which no other op reads: PreparedProgram::
// final_output. Reads of Output: the src of send, recv_reduce, copy, reduce
// and get_reduce, and the dst of reduce and divide (which read it first).
std::vector<uint8_t> final_output_ops(const Program& program) {
  struct Read {
    size_t begin, end;
    size_t op;
  };
  std::vector<Read> reads;
  auto reads_src = [](OpKind k) {
    return k == OpKind::send || k == OpKind::recv_reduce || k == OpKind::copy ||
           k == OpKind::reduce || k == OpKind::get_reduce;
  };
  const auto& ops = program.ops;
  size_t longest = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    auto add = [&](const Region& r) {
      if (r.buffer != BufferKind::output || r.count == 0) return;
      reads.push_back({r.offset, r.end(), i});
      longest = std::max(longest, r.count);
    };
    if (reads_src(o.kind)) add(o.src);
    if (o.kind == OpKind::reduce || o.kind == OpKind::divide) add(o.dst);
  }
  std::sort(reads.begin(), reads.end(),
            [](const Read& a, const Read& b) { return a.begin < b.begin; });
  std::vector<uint8_t> final(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    const bool writes = o.kind != OpKind::send && o.kind != OpKind::signal &&
                        o.kind != OpKind::wait && o.kind != OpKind::divide;
    if (!writes || o.dst.buffer != BufferKind::output || o.dst.count == 0) continue;
    // Reads that may overlap [offset, end) begin within `longest` before it.
    const size_t from = o.dst.offset > longest ? o.dst.offset - longest : 0;
    auto it = std::lower_bound(reads.begin(), reads.end(), from,
                               [](const Read& r, size_t v) { return r.begin < v; });
    bool read = false;
    for (; it != reads.end() && it->begin < o.dst.end() && !read; ++it)
      read = it->op != i && it->end > o.dst.offset;
    final[i] = read ? 0 : 1;
  }
  return final;
}

}  // namespace

std::shared_ptr<const PreparedProgram> prepare(Program program) {
  auto p = std::make_shared<PreparedProgram>();
  const size_t n = program.ops.size();
  p->dep_count.resize(n);
  p->dependents_begin.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const Op& o = program.ops[i];
    p->one_sided |= is_one_sided(o.kind);
    p->dep_count[i] = static_cast<uint32_t>(o.deps.size());
    for (OpIndex d : o.deps) {
      if (d >= i)
        fail(ErrorCode::internal, "op ", i, " (", describe(o), ") depends on op ", d,
             ", which is not an earlier op");
      ++p->dependents_begin[d + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) p->dependents_begin[i + 1] += p->dependents_begin[i];
  p->dependents.resize(p->dependents_begin[n]);
  std::vector<uint32_t> fill(p->dependents_begin.begin(), p->dependents_begin.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (OpIndex d : program.ops[i].deps) p->dependents[fill[d]++] = static_cast<OpIndex>(i);
  p->final_output = final_output_ops(program);
  p->program = std::move(program);
  return p;
}

Execution::Execution(std::shared_ptr<const PreparedProgram> program, ExecBuffers buffers,
                     DataType type, ReduceOp op, CallLabel label, Deadline deadline,
                     const CallStamp& stamp) {
  restart(std::move(program), buffers, type, op, label, deadline, stamp);
}

void Execution::restart(std::shared_ptr<const PreparedProgram> program, ExecBuffers buffers,
                        DataType type, ReduceOp op, CallLabel label, Deadline deadline,
                        const CallStamp& stamp) {
  stamp_ = stamp;
  prepared_ = std::move(program);
  program_ = &prepared_->program;
  buffers_ = buffers;
  type_ = type;
  op_ = op;
  elem_size_ = dtype_size(type);
  label_ = label;
  deadline_ = deadline;
  // assign() keeps the capacity: no allocation once the arrays have grown.
  missing_deps_.assign(prepared_->dep_count.begin(), prepared_->dep_count.end());
  state_.assign(program_->ops.size(), 0);
  remaining_ = program_->ops.size();
}

std::byte* Execution::address(const Region& r) const {
  std::byte* base = nullptr;
  switch (r.buffer) {
    case BufferKind::input:
      base = static_cast<std::byte*>(const_cast<void*>(buffers_.input));
      break;
    case BufferKind::output:
      base = static_cast<std::byte*>(buffers_.output);
      break;
    case BufferKind::scratch:
      base = static_cast<std::byte*>(buffers_.scratch);
      break;
    case BufferKind::window:
      base = static_cast<std::byte*>(buffers_.window);
      break;
  }
  if (base == nullptr) return nullptr;  // zero-sized or absent buffer; never dereferenced
  return base + r.offset * elem_size_;
}

std::string Execution::pending_summary() const {
  std::string s;
  size_t shown = 0;
  for (size_t i = 0; i < state_.size() && shown < 4; ++i) {
    if ((state_[i] & kFinished) || missing_deps_[i] > 0) continue;
    const Op& o = program_->ops[i];
    const bool outward = o.kind == OpKind::send || o.kind == OpKind::signal;
    s += str_cat(shown ? "; " : "", to_string(o.kind),
                 has_peer(o.kind) || is_one_sided(o.kind)
                     ? str_cat(outward ? " to" : " from", " peer ", o.peer)
                     : std::string(),
                 " (op ", i, " of ", state_.size(), ")");
    ++shown;
  }
  return s.empty() ? "nothing startable" : s;
}

Engine::Engine(Transport& transport)
    : transport_(transport),
      rank_(transport.rank()),
      size_(transport.size()),
      send_queue_(static_cast<size_t>(transport.size())),
      recv_queue_(static_cast<size_t>(transport.size())) {}

void Engine::enqueue(const std::shared_ptr<Execution>& exec) {
  Execution& e = *exec;
  if (e.prepared_->one_sided && (windows_ == nullptr || !windows_->ready()))
    fail(ErrorCode::internal, "rank ", rank_, ": ", e.context(),
         ": a one-sided Program without shared windows");
  active_.push_back(exec);
  const auto& ops = e.program_->ops;
  // Streaming only where Output lies apart from Input: in place, a written
  // line was read just before and is in the cache anyway.
  const size_t out_bytes = e.program_->output_count * e.elem_size_;
  const size_t in_bytes = e.program_->input_count * e.elem_size_;
  const auto* in = static_cast<const std::byte*>(e.buffers_.input);
  const auto* out = static_cast<const std::byte*>(e.buffers_.output);
  const bool apart =
      in == nullptr || out == nullptr || out + out_bytes <= in || in + in_bytes <= out;
  e.output_store_ = stream_bytes_ > 0 && out_bytes >= stream_bytes_ && apart ? WriteMode::streaming
                                                                             : WriteMode::cached;
  if (tracer_ != nullptr) {
    e.started_ns_.assign(ops.size(), 0);
    now_ticks_ = Tracer::ticks();
  }
  // Reserve this execution's place in every peer queue first, so that ops of a
  // later execution can never overtake it on a channel.
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (!has_peer(o.kind)) continue;
    if (o.peer < 0 || o.peer >= size_ || o.peer == rank_)
      fail(ErrorCode::internal, "rank ", rank_, ": ", e.context(), ": op ", i, " names peer ",
           o.peer);
    auto& q = o.kind == OpKind::send ? send_queue_[static_cast<size_t>(o.peer)]
                                     : recv_queue_[static_cast<size_t>(o.peer)];
    q.push_back({&e, static_cast<OpIndex>(i)});
  }
  // Ops without deps start now. (Not "no deps missing": a local op that runs
  // inline readies its dependents itself, which must not start twice.)
  const std::vector<uint32_t>& dep_count = e.prepared_->dep_count;
  for (size_t i = 0; i < ops.size(); ++i)
    if (dep_count[i] == 0) op_ready(e, static_cast<OpIndex>(i));
  if (e.done()) std::erase_if(active_, [&](const auto& p) { return p.get() == &e; });
}

void Engine::op_ready(Execution& e, OpIndex op) {
  const Op& o = e.program_->ops[op];
  e.state_[op] |= Execution::kReady;
  if (has_peer(o.kind)) {
    pump_peer(o.peer, o.kind == OpKind::send);
  } else {
    start_local(e, op);
  }
}

void Engine::start_local(Execution& e, OpIndex op) {
  const Op& o = e.program_->ops[op];
  e.state_[op] &= static_cast<uint8_t>(~Execution::kReady);
  const size_t bytes = o.dst.count * e.elem_size_;
  if (tracer_ != nullptr) e.started_ns_[op] = now_ticks_;
  if (is_one_sided(o.kind)) {
    if (!run_one_sided(e, op)) return;
  } else if (bytes > 0) {
    std::byte* dst = e.address(o.dst);
    const std::byte* src = o.kind == OpKind::divide ? nullptr : e.address(o.src);
    const WriteMode store = store_for(e, op);
    if (o.kind == OpKind::copy) {
      // A copy within one buffer may overlap: that one moves.
      if (store == WriteMode::streaming && (dst + bytes <= src || src + bytes <= dst))
        copy_bytes(dst, src, bytes, store);
      else if (dst != src)
        std::memmove(dst, src, bytes);
    } else if (o.kind == OpKind::divide) {
      divide_by(e.type_, dst, o.dst.count, o.divisor);
    } else {
      reduce_into(e.type_, e.op_, dst, dst, src, o.dst.count, store);
    }
  }
  if (tracer_ != nullptr) {
    now_ticks_ = Tracer::ticks();
    trace(e, op, now_ticks_);
  }
  finish_op(e, op);
}

bool Engine::run_one_sided(Execution& e, OpIndex op) {
  const Op& o = e.program_->ops[op];
  const uint32_t seq = e.stamp_.seq;
  switch (o.kind) {
    case OpKind::signal:
      windows_->signal(o.peer, o.flag, seq);
      return true;
    case OpKind::wait: {
      const bool raised = windows_->signalled(o.peer, o.flag, seq);
      check_stamp(e, o.peer);
      if (raised) return true;
      waits_.push_back({&e, op});
      return false;
    }
    case OpKind::get:
    case OpKind::get_reduce: {
      const size_t bytes = o.dst.count * e.elem_size_;
      if (bytes == 0) return true;
      const std::byte* remote = windows_->peer_address(o.peer, seq, o.remote.buffer,
                                                       o.remote.offset * e.elem_size_, bytes);
      std::byte* dst = e.address(o.dst);
      const WriteMode store = store_for(e, op);
      if (o.kind == OpKind::get)
        copy_bytes(dst, remote, bytes, store);
      else
        reduce_into(e.type_, e.op_, dst, e.address(o.src), remote, o.dst.count, store);
      return true;
    }
    default:
      CHORUS_CHECK(false);
  }
  return true;
}

bool Engine::check_waits() {
  bool any = false;
  for (size_t i = 0; i < waits_.size();) {
    const Pending p = waits_[i];
    const Op& o = p.exec->program_->ops[p.op];
    const bool raised = windows_->signalled(o.peer, o.flag, p.exec->stamp_.seq);
    check_stamp(*p.exec, o.peer);
    if (!raised) {
      ++i;
      continue;
    }
    waits_[i] = waits_.back();
    waits_.pop_back();
    if (tracer_ != nullptr) {
      now_ticks_ = Tracer::ticks();
      trace(*p.exec, p.op, now_ticks_);
    }
    finish_op(*p.exec, p.op);
    any = true;
  }
  if (any) std::erase_if(active_, [](const auto& e) { return e->done(); });
  return any;
}

// The stamp check of one-sided calls: a peer publishes its call's stamp
// before it raises any flag of the call (and before the exchanges that grow
// the staging window), and a wait compares it with this rank's own, both while
// it waits and once the flag is up, so that no get reads a peer that is in
// another call. A record of another call number says nothing: the peer has
// not reached this call yet, or (for the closing waits) has left it.
void Engine::check_stamp(const Execution& e, int peer) {
  CallStamp theirs;
  if (windows_->peer_stamp(peer, e.stamp_.seq, theirs) && theirs != e.stamp_)
    throw StampMismatch(rank_, peer, e.stamp_, theirs);
}

// Posts the head ops of a peer queue while they are ready.
void Engine::pump_peer(int peer, bool sends) {
  auto& q = sends ? send_queue_[static_cast<size_t>(peer)] : recv_queue_[static_cast<size_t>(peer)];
  while (!q.empty()) {
    Pending p = q.front();
    Execution& e = *p.exec;
    if (!(e.state_[p.op] & Execution::kReady)) return;
    q.pop_front();
    e.state_[p.op] &= static_cast<uint8_t>(~Execution::kReady);
    const Op& o = e.program_->ops[p.op];
    if (tracer_ != nullptr) e.started_ns_[p.op] = now_ticks_;
    RequestId id;
    if (sends) {
      id = transport_.isend(peer, e.address(o.src), o.src.count * e.elem_size_, e.stamp_);
    } else {
      // Transports copy the Reducer, so one on the stack is enough.
      const Reducer red{e.type_, e.op_, o.kind == OpKind::recv_reduce ? e.address(o.src) : nullptr};
      id = transport_.irecv(peer, e.address(o.dst), o.dst.count * e.elem_size_,
                            o.kind == OpKind::recv_reduce ? &red : nullptr, e.stamp_,
                            store_for(e, p.op));
    }
    track(id, p);
  }
}

void Engine::track(RequestId id, Pending pending) {
  auto pos = in_flight_.end();
  const auto first = in_flight_.begin() + static_cast<std::ptrdiff_t>(in_flight_head_);
  while (pos != first && std::prev(pos)->id > id) --pos;
  in_flight_.insert(pos, InFlight{id, pending});
}

Engine::Pending Engine::untrack(RequestId id) {
  const auto first = in_flight_.begin() + static_cast<std::ptrdiff_t>(in_flight_head_);
  const auto it = std::lower_bound(first, in_flight_.end(), id,
                                   [](const InFlight& f, RequestId v) { return f.id < v; });
  if (it == in_flight_.end() || it->id != id || it->pending.exec == nullptr)
    fail(ErrorCode::internal, "rank ", rank_, ": unknown request ", id);
  const Pending p = it->pending;
  it->pending.exec = nullptr;
  while (in_flight_head_ < in_flight_.size() && in_flight_[in_flight_head_].pending.exec == nullptr)
    ++in_flight_head_;
  if (in_flight_head_ == in_flight_.size()) {
    in_flight_.clear();  // keeps the capacity
    in_flight_head_ = 0;
  } else if (in_flight_head_ >= kCompactAfter && 2 * in_flight_head_ >= in_flight_.size()) {
    // Long-lived requests at the front: drop the holes before them.
    in_flight_.erase(in_flight_.begin(),
                     in_flight_.begin() + static_cast<std::ptrdiff_t>(in_flight_head_));
    in_flight_head_ = 0;
  }
  return p;
}

void Engine::finish_op(Execution& e, OpIndex op) {
  CHORUS_CHECK(!(e.state_[op] & Execution::kFinished));
  e.state_[op] |= Execution::kFinished;
  --e.remaining_;
  const PreparedProgram& p = *e.prepared_;
  for (uint32_t k = p.dependents_begin[op]; k < p.dependents_begin[op + 1]; ++k) {
    const OpIndex d = p.dependents[k];
    if (--e.missing_deps_[d] == 0) op_ready(e, d);
  }
}

void Engine::trace(const Execution& e, OpIndex op, int64_t end) {
  if (op >= e.started_ns_.size()) return;  // enqueued before the tracer was set
  const Op& o = e.program_->ops[op];
  const Region& r = o.kind == OpKind::send ? o.src : o.dst;
  tracer_->record({e.started_ns_[op], end, r.count * e.elem_size_, e.stamp_.seq, op, o.kind,
                   has_peer(o.kind) ? o.peer : -1, e.label_.operation, e.label_.algorithm});
}

void Engine::dispatch(const std::vector<RequestId>& done) {
  bool any_finished = false;
  if (tracer_ != nullptr && !done.empty()) now_ticks_ = Tracer::ticks();
  const int64_t now = now_ticks_;
  for (RequestId id : done) {
    const Pending p = untrack(id);
    if (tracer_ != nullptr) trace(*p.exec, p.op, now);
    finish_op(*p.exec, p.op);
    any_finished |= p.exec->done();
  }
  if (any_finished) std::erase_if(active_, [](const auto& e) { return e->done(); });
}

void Engine::poll() {
  done_scratch_.clear();
  transport_.poll(done_scratch_);
  dispatch(done_scratch_);
  if (!waits_.empty()) check_waits();
}

void Engine::timed_out(const Execution& e) {
  fail(ErrorCode::timeout, "rank ", rank_, ": ", e.context(), ": timeout over ", transport_.name(),
       " waiting for ", e.pending_summary(), ". ", stall_report(e));
}

std::string Engine::stall_report(const Execution& e) {
  const CallStamp& mine = e.stamp_;
  if (mine.kind == 0) return {};
  const bool p2p = mine.point_to_point();
  std::string behind;
  int answering = 0;
  for (const PeerProgress& p : transport_.peer_progress(Clock::now() + kStallReportWait)) {
    const bool not_entered = !p2p && p.last.kind != 0 && p.collectives_entered < mine.seq;
    if (p.responsive && !not_entered) {
      ++answering;
      continue;
    }
    std::string what;
    if (not_entered) {
      what = str_cat("has not entered call ", mine.seq);
      // How late it is: this rank has waited for it since it entered the call.
      if (e.started() != Deadline{})
        what += str_cat(" (late by ", milliseconds_text(Clock::now() - e.started()),
                        " ms: this rank entered the call that long ago)");
    }
    if (!p.responsive)
      what += str_cat(what.empty() ? "" : " and ", p.note.empty() ? "does not answer" : p.note);
    if (p.last.kind != 0)
      what += str_cat(
          "; its last call: ", p.last.point_to_point() ? "point-to-point message " : "call ",
          p.last.seq, ", ", describe(p.last, ""));
    behind += str_cat(behind.empty() ? "" : "; ", "rank ", p.rank, " ", what);
  }
  const std::string call = p2p ? str_cat("message ", mine.seq) : str_cat("call ", mine.seq);
  if (behind.empty())
    return str_cat("Stall report for ", call, ": every peer has entered it and answers");
  return str_cat("Stall report for ", call, ": ", behind, " (", answering,
                 answering == 1 ? " other peer answers)" : " other peers answer)");
}

template <typename Done>
void Engine::run_until(Done done, const Execution* exec, Deadline until) {
  // While one-sided waits are queued, flags are polled between short looks
  // at the transport: spinning first (a flag is usually raised within
  // microseconds). Then a rank that shares its core with other ranks hands
  // it over (yields), since the peer that raises the flag may need this
  // very core; one with a core of its own polls there for the spin budget
  // and then naps. It never yields: on a host with other work, a yield
  // hands the core to that work for a whole time slice (milliseconds; a
  // 4 MiB two_shot took 10 ms a call beside a compiler at nice 5, against
  // 0.3 ms quiet), where a nap ends within tens of microseconds and takes
  // the core back.
  int idle_rounds = 0;
  Clock::time_point idle_since{};
  Clock::time_point next_check{};
  while (!done()) {
    Deadline deadline = exec != nullptr ? exec->deadline() : Deadline::max();
    for (const auto& a : active_) deadline = std::min(deadline, a->deadline());
    done_scratch_.clear();
    if (!waits_.empty()) {
      transport_.poll(done_scratch_);
      if (stop_ != nullptr && stop_->load(std::memory_order_acquire)) on_stop_();
      dispatch(done_scratch_);
      const bool progressed = check_waits() || !done_scratch_.empty();
      if (progressed) {
        idle_rounds = 0;
        continue;
      }
      if (++idle_rounds > kWaitSpinRounds) {
        const Clock::time_point now = Clock::now();
        if (idle_rounds == kWaitSpinRounds + 1) {
          idle_since = now;
          next_check = now + kWaitCheckEvery;
        }
        if (now >= deadline) {
          for (const auto& a : active_)
            if (a->deadline() <= deadline) timed_out(*a);
          if (exec != nullptr) timed_out(*exec);
        }
        // No message ends a one-sided wait: ask now and then whether its
        // peers live.
        if (now >= next_check) {
          next_check = now + kWaitCheckEvery;
          for (const Pending& p : waits_) transport_.check_peer(p.exec->program_->ops[p.op].peer);
        }
        if (!transport_.shares_cores()) {
          if (now - idle_since < spin_)
            for (int i = 0; i < kPollsPerNap; ++i) cpu_relax();
          else
            std::this_thread::sleep_for(kWaitNap);
        } else if (now - idle_since < kWaitYieldFor) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(kWaitNap);
        }
      }
      continue;
    }
    transport_.wait_some(done_scratch_, std::min(deadline, until));
    if (stop_ != nullptr && stop_->load(std::memory_order_acquire)) on_stop_();
    if (done_scratch_.empty()) {
      if (Clock::now() >= deadline) {
        for (const auto& a : active_)
          if (a->deadline() <= deadline) timed_out(*a);
        if (exec != nullptr) timed_out(*exec);
      }
      continue;
    }
    dispatch(done_scratch_);
  }
}

void Engine::wait(const Execution& exec) {
  run_until([&] { return exec.done(); }, &exec);
}

void Engine::wait_until(const Execution& exec, Deadline until) {
  run_until([&] { return exec.done() || Clock::now() >= until; }, &exec, until);
}

void Engine::drive(const std::atomic<int>& wanted) {
  run_until([&] { return active_.empty() || wanted.load(std::memory_order_relaxed) > 0; }, nullptr);
}

}  // namespace chorus
