#include "schedule/program.h"

#include "core/check.h"

namespace chorus {

std::string_view to_string(BufferKind kind) {
  switch (kind) {
    case BufferKind::input:
      return "input";
    case BufferKind::output:
      return "output";
    case BufferKind::scratch:
      return "scratch";
    case BufferKind::window:
      return "window";
  }
  return "invalid";
}

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
    case OpKind::recv_reduce:
      return "recv_reduce";
    case OpKind::copy:
      return "copy";
    case OpKind::reduce:
      return "reduce";
    case OpKind::divide:
      return "divide";
    case OpKind::get:
      return "get";
    case OpKind::get_reduce:
      return "get_reduce";
    case OpKind::signal:
      return "signal";
    case OpKind::wait:
      return "wait";
  }
  return "invalid";
}

bool is_receive(OpKind k) {
  return k == OpKind::recv || k == OpKind::recv_reduce;
}
bool reads_src(OpKind k) {
  return k == OpKind::send || k == OpKind::recv_reduce || k == OpKind::copy ||
         k == OpKind::reduce || k == OpKind::get_reduce;
}
bool reads_dst(OpKind k) {
  return k == OpKind::reduce || k == OpKind::divide;
}
bool writes_dst(OpKind k) {
  return k != OpKind::send && k != OpKind::signal && k != OpKind::wait;
}
bool has_peer(OpKind k) {
  return k == OpKind::send || is_receive(k);
}
bool is_one_sided(OpKind k) {
  return k == OpKind::get || k == OpKind::get_reduce || k == OpKind::signal || k == OpKind::wait;
}
bool reads_remote(OpKind k) {
  return k == OpKind::get || k == OpKind::get_reduce;
}

size_t op_count(const Op& op) {
  if (op.kind == OpKind::signal || op.kind == OpKind::wait) return 0;
  return op.kind == OpKind::send ? op.src.count : op.dst.count;
}

bool Program::one_sided() const {
  for (const Op& o : ops)
    if (is_one_sided(o.kind)) return true;
  return false;
}

std::vector<OpIndex> sink_ops(const Program& program) {
  std::vector<bool> depended_on(program.ops.size(), false);
  for (const Op& op : program.ops)
    for (OpIndex d : op.deps)
      if (d < depended_on.size()) depended_on[d] = true;
  std::vector<OpIndex> sinks;
  for (size_t i = 0; i < program.ops.size(); ++i)
    if (!depended_on[i]) sinks.push_back(static_cast<OpIndex>(i));
  return sinks;
}

Program point_to_point_program(OpKind kind, int peer, size_t count) {
  CHORUS_CHECK(kind == OpKind::send || kind == OpKind::recv);
  const bool sending = kind == OpKind::send;
  ProgramBuilder b(sending ? BufferCounts{count, 0} : BufferCounts{0, count});
  if (sending)
    b.send(peer, ProgramBuilder::input(0, count));
  else
    b.recv(peer, ProgramBuilder::output(0, count));
  return std::move(b).finish();
}

std::string describe(const Region& r) {
  return str_cat(to_string(r.buffer), "[", r.offset, ",+", r.count, ")");
}

std::string describe(const Op& op) {
  std::string s(to_string(op.kind));
  if (has_peer(op.kind) || is_one_sided(op.kind)) s += str_cat(" peer=", op.peer);
  if (reads_remote(op.kind)) s += " remote=" + describe(op.remote);
  if (reads_src(op.kind)) s += " src=" + describe(op.src);
  if (writes_dst(op.kind)) s += " dst=" + describe(op.dst);
  if (op.kind == OpKind::divide) s += str_cat(" divisor=", op.divisor);
  if (op.kind == OpKind::signal || op.kind == OpKind::wait) s += str_cat(" flag=", op.flag);
  s += " deps={";
  for (size_t i = 0; i < op.deps.size(); ++i) s += str_cat(i ? "," : "", op.deps[i]);
  s += str_cat("} step=", op.step);
  return s;
}

ProgramBuilder::ProgramBuilder(const BufferCounts& counts) {
  program_.input_count = counts.input;
  program_.output_count = counts.output;
}

OpIndex ProgramBuilder::add(Op op) {
  program_.ops.push_back(std::move(op));
  return static_cast<OpIndex>(program_.ops.size() - 1);
}

namespace {
Op make_op(OpKind kind, int peer, Region src, Region dst, uint32_t step,
           std::vector<OpIndex> deps) {
  Op op;
  op.kind = kind;
  op.peer = peer;
  op.src = src;
  op.dst = dst;
  op.step = step;
  op.deps = std::move(deps);
  return op;
}
}  // namespace

OpIndex ProgramBuilder::send(int peer, Region src, std::vector<OpIndex> deps, uint32_t step) {
  return add(make_op(OpKind::send, peer, src, {}, step, std::move(deps)));
}
OpIndex ProgramBuilder::recv(int peer, Region dst, std::vector<OpIndex> deps, uint32_t step) {
  return add(make_op(OpKind::recv, peer, {}, dst, step, std::move(deps)));
}
OpIndex ProgramBuilder::recv_reduce(int peer, Region src, Region dst, std::vector<OpIndex> deps,
                                    uint32_t step) {
  return add(make_op(OpKind::recv_reduce, peer, src, dst, step, std::move(deps)));
}
OpIndex ProgramBuilder::copy(Region src, Region dst, std::vector<OpIndex> deps, uint32_t step) {
  return add(make_op(OpKind::copy, -1, src, dst, step, std::move(deps)));
}
OpIndex ProgramBuilder::reduce(Region src, Region dst, std::vector<OpIndex> deps, uint32_t step) {
  return add(make_op(OpKind::reduce, -1, src, dst, step, std::move(deps)));
}
OpIndex ProgramBuilder::divide(Region dst, uint32_t divisor, std::vector<OpIndex> deps,
                               uint32_t step) {
  Op op = make_op(OpKind::divide, -1, {}, dst, step, std::move(deps));
  op.divisor = divisor;
  return add(std::move(op));
}
OpIndex ProgramBuilder::get(int peer, Region remote, Region dst, std::vector<OpIndex> deps,
                            uint32_t step) {
  Op op = make_op(OpKind::get, peer, {}, dst, step, std::move(deps));
  op.remote = remote;
  return add(std::move(op));
}
OpIndex ProgramBuilder::get_reduce(int peer, Region remote, Region src, Region dst,
                                   std::vector<OpIndex> deps, uint32_t step) {
  Op op = make_op(OpKind::get_reduce, peer, src, dst, step, std::move(deps));
  op.remote = remote;
  return add(std::move(op));
}
OpIndex ProgramBuilder::signal(int peer, uint32_t flag, std::vector<OpIndex> deps, uint32_t step) {
  Op op = make_op(OpKind::signal, peer, {}, {}, step, std::move(deps));
  op.flag = flag;
  return add(std::move(op));
}
OpIndex ProgramBuilder::wait(int peer, uint32_t flag, std::vector<OpIndex> deps, uint32_t step) {
  Op op = make_op(OpKind::wait, peer, {}, {}, step, std::move(deps));
  op.flag = flag;
  return add(std::move(op));
}

size_t ProgramBuilder::alloc_window(size_t count) {
  const size_t off = program_.window_count;
  program_.window_count += count;
  return off;
}

size_t ProgramBuilder::alloc_scratch(size_t count) {
  const size_t off = program_.scratch_count;
  program_.scratch_count += count;
  return off;
}

Program ProgramBuilder::finish() && {
  return std::move(program_);
}

}  // namespace chorus
