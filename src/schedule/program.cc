#include "schedule/program.h"

#include "core/check.h"

namespace chorus {

std::string_view to_string(BufferKind kind) {
  switch (kind) {
    case BufferKind::input: return "input";
    case BufferKind::output: return "output";
    case BufferKind::scratch: return "scratch";
  }
  return "invalid";
}

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
    case OpKind::recv_reduce: return "recv_reduce";
    case OpKind::copy: return "copy";
    case OpKind::reduce: return "reduce";
    case OpKind::divide: return "divide";
  }
  return "invalid";
}

bool is_receive(OpKind k) { return k == OpKind::recv || k == OpKind::recv_reduce; }
bool reads_src(OpKind k) { return k != OpKind::recv && k != OpKind::divide; }
bool reads_dst(OpKind k) {
  return k == OpKind::reduce || k == OpKind::divide;
}
bool has_peer(OpKind k) { return k == OpKind::send || is_receive(k); }

size_t op_count(const Op& op) { return op.kind == OpKind::send ? op.src.count : op.dst.count; }

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
  if (has_peer(op.kind)) s += str_cat(" peer=", op.peer);
  if (reads_src(op.kind)) s += " src=" + describe(op.src);
  if (op.kind != OpKind::send) s += " dst=" + describe(op.dst);
  if (op.kind == OpKind::divide) s += str_cat(" divisor=", op.divisor);
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

OpIndex ProgramBuilder::send(int peer, Region src, std::vector<OpIndex> deps, uint32_t step) {
  return add({OpKind::send, peer, src, {}, step, std::move(deps)});
}
OpIndex ProgramBuilder::recv(int peer, Region dst, std::vector<OpIndex> deps, uint32_t step) {
  return add({OpKind::recv, peer, {}, dst, step, std::move(deps)});
}
OpIndex ProgramBuilder::recv_reduce(int peer, Region src, Region dst, std::vector<OpIndex> deps,
                                    uint32_t step) {
  return add({OpKind::recv_reduce, peer, src, dst, step, std::move(deps)});
}
OpIndex ProgramBuilder::copy(Region src, Region dst, std::vector<OpIndex> deps, uint32_t step) {
  return add({OpKind::copy, -1, src, dst, step, std::move(deps)});
}
OpIndex ProgramBuilder::reduce(Region src, Region dst, std::vector<OpIndex> deps, uint32_t step) {
  return add({OpKind::reduce, -1, src, dst, step, std::move(deps)});
}

OpIndex ProgramBuilder::divide(Region dst, uint32_t divisor, std::vector<OpIndex> deps,
                               uint32_t step) {
  return add({OpKind::divide, -1, {}, dst, step, std::move(deps), divisor});
}

size_t ProgramBuilder::alloc_scratch(size_t count) {
  const size_t off = program_.scratch_count;
  program_.scratch_count += count;
  return off;
}

Program ProgramBuilder::finish() && { return std::move(program_); }

}  // namespace chorus
