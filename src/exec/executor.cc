#include "exec/executor.h"

#include "core/check.h"
#include "core/reduce_kernels.h"

#include <algorithm>
#include <cstring>

namespace chorus {

Execution::Execution(std::shared_ptr<const Program> program, ExecBuffers buffers, DataType type,
                     ReduceOp op, std::string context, Deadline deadline)
    : program_(std::move(program)),
      buffers_(buffers),
      type_(type),
      op_(op),
      elem_size_(dtype_size(type)),
      context_(std::move(context)),
      deadline_(deadline),
      remaining_(program_->ops.size()) {
  const size_t n = program_->ops.size();
  missing_deps_.resize(n);
  dependents_.resize(n);
  ready_.assign(n, false);
  finished_.assign(n, false);
  reducers_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Op& o = program_->ops[i];
    missing_deps_[i] = static_cast<uint32_t>(o.deps.size());
    for (OpIndex d : o.deps) {
      CHORUS_CHECK(d < i);
      dependents_[d].push_back(static_cast<OpIndex>(i));
    }
    if (o.kind == OpKind::recv_reduce) reducers_[i] = {type_, op_, address(o.src)};
  }
}

std::byte* Execution::address(const Region& r) const {
  std::byte* base = nullptr;
  switch (r.buffer) {
    case BufferKind::input: base = static_cast<std::byte*>(const_cast<void*>(buffers_.input)); break;
    case BufferKind::output: base = static_cast<std::byte*>(buffers_.output); break;
    case BufferKind::scratch: base = static_cast<std::byte*>(buffers_.scratch); break;
  }
  if (base == nullptr) return nullptr;  // zero-sized or absent buffer; never dereferenced
  return base + r.offset * elem_size_;
}

std::string Execution::pending_summary() const {
  std::string s;
  size_t shown = 0;
  for (size_t i = 0; i < finished_.size() && shown < 4; ++i) {
    if (finished_[i] || missing_deps_[i] > 0) continue;
    const Op& o = program_->ops[i];
    s += str_cat(shown ? "; " : "", to_string(o.kind),
                 has_peer(o.kind) ? str_cat(o.kind == OpKind::send ? " to" : " from", " peer ", o.peer)
                                  : std::string(),
                 " (op ", i, " of ", finished_.size(), ")");
    ++shown;
  }
  return s.empty() ? "nothing startable" : s;
}

Engine::Engine(Transport& transport)
    : transport_(transport),
      rank_(transport.rank()),
      send_queue_(static_cast<size_t>(transport.size())),
      recv_queue_(static_cast<size_t>(transport.size())) {}

void Engine::enqueue(const std::shared_ptr<Execution>& exec) {
  Execution& e = *exec;
  active_.push_back(exec);
  const auto& ops = e.program_->ops;
  // Reserve this execution's place in every peer queue first, so that ops of a
  // later execution can never overtake it on a channel.
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (!has_peer(o.kind)) continue;
    if (o.peer < 0 || o.peer >= transport_.size() || o.peer == rank_)
      fail(ErrorCode::internal, "rank ", rank_, ": ", e.context_, ": op ", i, " names peer ",
           o.peer);
    auto& q = o.kind == OpKind::send ? send_queue_[static_cast<size_t>(o.peer)]
                                     : recv_queue_[static_cast<size_t>(o.peer)];
    q.push_back({&e, static_cast<OpIndex>(i)});
  }
  for (size_t i = 0; i < ops.size(); ++i)
    if (e.missing_deps_[i] == 0) op_ready(e, static_cast<OpIndex>(i));
  if (e.done()) std::erase_if(active_, [&](const auto& p) { return p.get() == &e; });
}

void Engine::op_ready(Execution& e, OpIndex op) {
  const Op& o = e.program_->ops[op];
  e.ready_[op] = true;
  if (has_peer(o.kind)) {
    pump_peer(o.peer, o.kind == OpKind::send);
  } else {
    start_local(e, op);
  }
}

void Engine::start_local(Execution& e, OpIndex op) {
  const Op& o = e.program_->ops[op];
  e.ready_[op] = false;
  const size_t bytes = o.dst.count * e.elem_size_;
  if (bytes > 0) {
    std::byte* dst = e.address(o.dst);
    const std::byte* src = e.address(o.src);
    if (o.kind == OpKind::copy) {
      if (dst != src) std::memmove(dst, src, bytes);
    } else {
      reduce_into(e.type_, e.op_, dst, dst, src, o.dst.count);
    }
  }
  finish_op(e, op);
}

// Posts the head ops of a peer queue while they are ready.
void Engine::pump_peer(int peer, bool sends) {
  auto& q = sends ? send_queue_[static_cast<size_t>(peer)] : recv_queue_[static_cast<size_t>(peer)];
  while (!q.empty()) {
    Pending p = q.front();
    Execution& e = *p.exec;
    if (!e.ready_[p.op]) return;
    q.pop_front();
    e.ready_[p.op] = false;
    const Op& o = e.program_->ops[p.op];
    RequestId id;
    if (sends) {
      id = transport_.isend(peer, e.address(o.src), o.src.count * e.elem_size_);
    } else {
      const Reducer* red = o.kind == OpKind::recv_reduce ? &e.reducers_[p.op] : nullptr;
      id = transport_.irecv(peer, e.address(o.dst), o.dst.count * e.elem_size_, red);
    }
    in_flight_.emplace(id, p);
  }
}

void Engine::finish_op(Execution& e, OpIndex op) {
  CHORUS_CHECK(!e.finished_[op]);
  e.finished_[op] = true;
  --e.remaining_;
  for (OpIndex d : e.dependents_[op])
    if (--e.missing_deps_[d] == 0) op_ready(e, d);
}

void Engine::dispatch(const std::vector<RequestId>& done) {
  bool any_finished = false;
  for (RequestId id : done) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) fail(ErrorCode::internal, "rank ", rank_, ": unknown request ", id);
    const Pending p = it->second;
    in_flight_.erase(it);
    finish_op(*p.exec, p.op);
    any_finished |= p.exec->done();
  }
  if (any_finished) std::erase_if(active_, [](const auto& e) { return e->done(); });
}

void Engine::poll() {
  done_scratch_.clear();
  transport_.poll(done_scratch_);
  dispatch(done_scratch_);
}

void Engine::timed_out(const Execution& e) {
  fail(ErrorCode::timeout, "rank ", rank_, ": ", e.context(), ": timeout over ", transport_.name(),
       " waiting for ", e.pending_summary());
}

void Engine::wait(const Execution& exec) {
  while (!exec.done()) {
    Deadline deadline = exec.deadline();
    for (const auto& a : active_) deadline = std::min(deadline, a->deadline());
    done_scratch_.clear();
    transport_.wait_some(done_scratch_, deadline);
    if (done_scratch_.empty()) {
      if (Clock::now() >= deadline) {
        for (const auto& a : active_)
          if (a->deadline() <= deadline) timed_out(*a);
        timed_out(exec);
      }
      continue;
    }
    dispatch(done_scratch_);
  }
}

}  // namespace chorus
