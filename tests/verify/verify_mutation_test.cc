// Mutation tests of the verifier: correct Programs, broken on purpose in one
// place each, must be rejected with the specific error kind (and the error
// must name the rank and op where that is meaningful).
#include "algorithms/algorithm.h"
#include "support/program_edit.h"
#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace chorus {
namespace {

std::vector<Program> build_all(Collective c, std::string_view name, int n, size_t count,
                               int root = 0) {
  const Algorithm* a = find_algorithm(c, name);
  EXPECT_NE(a, nullptr) << name;
  return chorus::build_all(*a, {c, n, 0, count, 4, root});
}

VerifyResult check(Collective c, int n, size_t count, const std::vector<Program>& programs,
                   int root = 0) {
  return verify_programs({c, n, 0, count, 4, root}, programs, "mutated");
}

// Index of the k-th op of `kind` in p.
OpIndex nth(const Program& p, OpKind kind, size_t k) {
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (p.ops[i].kind == kind && k-- == 0) return static_cast<OpIndex>(i);
  ADD_FAILURE() << "no op #" << k << " of kind " << to_string(kind);
  return 0;
}

using test::erase_op;

// Inserts `op` right after op k, depending on k; every op that depended on k
// also depends on the new op, so it slots into the ordering.
void insert_after(Program& p, OpIndex k, Op op) {
  const OpIndex at = k + 1;
  for (Op& o : p.ops)
    for (OpIndex& d : o.deps)
      if (d >= at) ++d;
  for (Op& o : p.ops)
    if (std::find(o.deps.begin(), o.deps.end(), k) != o.deps.end()) o.deps.push_back(at);
  op.deps.push_back(k);
  p.ops.insert(p.ops.begin() + at, std::move(op));
}

void expect_kind(const VerifyResult& r, VerifyErrorKind kind) {
  ASSERT_TRUE(r.error.has_value()) << "expected " << to_string(kind) << ", verification passed";
  EXPECT_EQ(r.error->kind, kind) << to_string(r.error->kind) << ": " << r.error->message;
  // Every message names the collective, the schedule, N and count.
  EXPECT_NE(r.error->message.find("(mutated) N="), std::string::npos) << r.error->message;
}

constexpr auto kAllreduce = Collective::allreduce;

TEST(VerifyMutation, UnmutatedProgramsPass) {
  for (int n : {1, 2, 3, 4, 5}) {
    const auto p = build_all(kAllreduce, "ring", n, 8);
    const VerifyResult r = check(kAllreduce, n, 8, p);
    EXPECT_TRUE(r.ok()) << r.error->message;
  }
}

TEST(VerifyMutation, DroppedSendLeavesAReceiveUnmatched) {
  auto p = build_all(kAllreduce, "ring", 4, 8);
  erase_op(p[1], nth(p[1], OpKind::send, 2));
  const VerifyResult r = check(kAllreduce, 4, 8, p);
  expect_kind(r, VerifyErrorKind::unmatched_receive);
  EXPECT_EQ(r.error->rank, 2);  // the receiver that waits for rank 1
}

TEST(VerifyMutation, ExtraSendIsUnmatched) {
  auto p = build_all(kAllreduce, "ring", 3, 6);
  p[0].ops.push_back({OpKind::send, 2, {BufferKind::input, 0, 2}, {}, 0, {}, 0, {}, 0});
  expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::unmatched_send);
}

TEST(VerifyMutation, DoubledReduceCountsAContributionTwice) {
  auto p = build_all(kAllreduce, "ring", 3, 6);
  const OpIndex k = nth(p[0], OpKind::recv_reduce, 0);
  const Op& rr = p[0].ops[k];
  // Folds the rank's own input chunk in once more after it was reduced.
  insert_after(p[0], k, {OpKind::reduce, -1, rr.src, rr.dst, rr.step, {}, 0, {}, 0});
  const VerifyResult r = check(kAllreduce, 3, 6, p);
  expect_kind(r, VerifyErrorKind::double_contribution);
  EXPECT_EQ(r.error->rank, 0);
  EXPECT_EQ(r.error->op, k + 1);
}

// A two-rank AllReduce exchange, correct in place and out of place: send the
// input, receive the peer's into scratch, then fold it into the output (which
// in place is the input, so the fold waits for the send through the copy).
// With `recv_after_send`, each rank posts its receive only after its send
// completed: fine with unbounded buffering, a deadlock when a send waits for
// its receive.
std::vector<Program> exchange(bool recv_after_send) {
  using B = ProgramBuilder;
  std::vector<Program> p(2);
  for (int r = 0; r < 2; ++r) {
    B b({4, 4});
    b.alloc_scratch(4);
    const OpIndex s = b.send(1 - r, B::input(0, 4));
    const OpIndex got = b.recv(1 - r, B::scratch(0, 4),
                               recv_after_send ? std::vector<OpIndex>{s} : std::vector<OpIndex>{});
    const OpIndex own = b.copy(B::input(0, 4), B::output(0, 4), {s});
    b.reduce(B::scratch(0, 4), B::output(0, 4), {got, own});
    p[static_cast<size_t>(r)] = std::move(b).finish();
  }
  return p;
}

TEST(VerifyMutation, SwappedSourceReducesTheWrongElements) {
  auto p = exchange(false);
  EXPECT_TRUE(check(kAllreduce, 2, 4, p).ok());
  // Rank 1 folds the first half of what it received into the second half of
  // its output.
  Op& fold = p[1].ops[3];
  fold.src = {BufferKind::scratch, 0, 2};
  fold.dst = {BufferKind::output, 2, 2};
  const VerifyResult r = check(kAllreduce, 2, 4, p);
  expect_kind(r, VerifyErrorKind::misaligned_reduce);
  EXPECT_EQ(r.error->rank, 1);
  EXPECT_EQ(r.error->op, 3u);
}

TEST(VerifyMutation, SwappedDestinationsGiveAWrongResult) {
  auto p = build_all(Collective::alltoall, "pairwise", 2, 3);
  EXPECT_TRUE(check(Collective::alltoall, 2, 3, p).ok());
  // Rank 0: own block copied to block 0, rank 1's received into block 1;
  // swapped, each lands in the other's place.
  Op& own = p[0].ops[nth(p[0], OpKind::copy, 0)];
  Op& got = p[0].ops[nth(p[0], OpKind::recv, 0)];
  std::swap(own.dst, got.dst);
  const VerifyResult r = check(Collective::alltoall, 2, 3, p);
  expect_kind(r, VerifyErrorKind::wrong_result);
  EXPECT_EQ(r.error->rank, 0);
  EXPECT_NE(r.error->message.find("output[0]"), std::string::npos) << r.error->message;
}

TEST(VerifyMutation, MissingCopyLeavesOutputUndefined) {
  auto p = build_all(kAllreduce, "ring", 1, 5);
  p[0].ops.clear();
  const VerifyResult r = check(kAllreduce, 1, 5, p);
  expect_kind(r, VerifyErrorKind::wrong_result);
  EXPECT_NE(r.error->message.find("nothing defined"), std::string::npos) << r.error->message;
}

TEST(VerifyMutation, DependencyCycleIsNamed) {
  auto p = build_all(kAllreduce, "ring", 3, 6);
  // Op 2 (the second send) depends on op 1 (the first recv_reduce); closing
  // the loop makes a cycle.
  ASSERT_EQ(p[1].ops[2].deps, std::vector<OpIndex>{1});
  p[1].ops[1].deps.push_back(2);
  const VerifyResult r = check(kAllreduce, 3, 6, p);
  expect_kind(r, VerifyErrorKind::dependency_cycle);
  EXPECT_EQ(r.error->rank, 1);
}

TEST(VerifyMutation, ForwardSelfAndMissingDependencies) {
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[2].ops[0].deps.push_back(1);  // later op, no cycle
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::forward_dependency);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[2].ops[3].deps.push_back(3);
    const VerifyResult r = check(kAllreduce, 3, 6, p);
    expect_kind(r, VerifyErrorKind::self_dependency);
    EXPECT_EQ(r.error->op, 3u);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[2].ops[3].deps.push_back(1000);
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::missing_dependency);
  }
}

TEST(VerifyMutation, RemovedDependencyRaces) {
  auto p = build_all(kAllreduce, "ring", 4, 8);
  // The second AllGather receive overwrites the chunk the second
  // ReduceScatter send reads; without the dep they race in either layout.
  Op& recv = p[2].ops[nth(p[2], OpKind::recv, 1)];
  ASSERT_FALSE(recv.deps.empty());
  recv.deps.clear();
  const VerifyResult r = check(kAllreduce, 4, 8, p);
  expect_kind(r, VerifyErrorKind::race);
  EXPECT_EQ(r.error->rank, 2);
  EXPECT_EQ(r.error->layout, "out_of_place");
}

TEST(VerifyMutation, RaceThatOnlyExistsInPlace) {
  auto p = build_all(kAllreduce, "ring", 4, 8);
  // The first AllGather receive writes output chunk r, which the first
  // ReduceScatter send read as input chunk r: the same memory only in place.
  Op& recv = p[2].ops[nth(p[2], OpKind::recv, 0)];
  ASSERT_FALSE(recv.deps.empty());
  recv.deps.clear();
  const VerifyResult r = check(kAllreduce, 4, 8, p);
  expect_kind(r, VerifyErrorKind::race);
  EXPECT_EQ(r.error->layout, "in_place");
}

TEST(VerifyMutation, SendReceiveCountMismatch) {
  auto p = build_all(kAllreduce, "ring", 4, 8);
  Op& s = p[3].ops[nth(p[3], OpKind::send, 1)];
  ASSERT_GT(s.src.count, 0u);
  --s.src.count;
  const VerifyResult r = check(kAllreduce, 4, 8, p);
  expect_kind(r, VerifyErrorKind::count_mismatch);
  EXPECT_EQ(r.error->rank, 3);
}

TEST(VerifyMutation, RendezvousDeadlock) {
  const VerifyResult good = check(kAllreduce, 2, 4, exchange(false));
  EXPECT_TRUE(good.ok()) << good.error->message;
  const VerifyResult r = check(kAllreduce, 2, 4, exchange(true));
  expect_kind(r, VerifyErrorKind::deadlock);
  EXPECT_NE(r.error->message.find("only with unbounded buffering"), std::string::npos)
      << r.error->message;
}

TEST(VerifyMutation, DeadlockEvenWithBuffering) {
  // Both ranks send only after their receive completed.
  using B = ProgramBuilder;
  std::vector<Program> p(2);
  for (int r = 0; r < 2; ++r) {
    B b({4, 4});
    b.alloc_scratch(4);
    const OpIndex got = b.recv(1 - r, B::scratch(0, 4));
    const OpIndex s = b.send(1 - r, B::input(0, 4), {got});
    const OpIndex own = b.copy(B::input(0, 4), B::output(0, 4), {s});
    b.reduce(B::scratch(0, 4), B::output(0, 4), {got, own});
    p[static_cast<size_t>(r)] = std::move(b).finish();
  }
  const VerifyResult r = check(kAllreduce, 2, 4, p);
  expect_kind(r, VerifyErrorKind::deadlock);
  EXPECT_NE(r.error->message.find("even with unbounded buffering"), std::string::npos)
      << r.error->message;
}

TEST(VerifyMutation, StructuralErrors) {
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[1].ops[nth(p[1], OpKind::recv_reduce, 0)].dst.buffer = BufferKind::input;
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::input_written);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[1].ops[0].src.offset = 5;  // 2 elements from offset 5 of 6
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::region_out_of_bounds);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[1].ops[nth(p[1], OpKind::recv_reduce, 0)].src.count = 1;
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::region_count_mismatch);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[1].ops[0].peer = 1;  // itself
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::bad_peer);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[1].output_count = 5;
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::buffer_size);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p.pop_back();
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::program_count);
  }
  {
    auto p = build_all(kAllreduce, "ring", 3, 6);
    p[0].ops[0].kind = static_cast<OpKind>(kOpKindCount);
    expect_kind(check(kAllreduce, 3, 6, p), VerifyErrorKind::bad_op_kind);
  }
  {
    const auto p = build_all(kAllreduce, "ring", 3, 6);
    const VerifyResult r = verify_programs({kAllreduce, 3, 0, 6, 4, /*root=*/3}, p, "mutated");
    expect_kind(r, VerifyErrorKind::bad_spec);
  }
}

TEST(VerifyMutation, OverlappingCopyOperands) {
  auto p = build_all(kAllreduce, "ring", 1, 6);
  // After the copy, shift output[0,4) onto output[2,6): a memmove with no
  // defined order.
  insert_after(
      p[0], 0,
      {OpKind::copy, -1, {BufferKind::output, 0, 4}, {BufferKind::output, 2, 4}, 0, {}, 0, {}, 0});
  expect_kind(check(kAllreduce, 1, 6, p), VerifyErrorKind::overlapping_operands);
}

TEST(VerifyMutation, BroadcastMustNotReadInputOffTheRoot) {
  auto p = build_all(Collective::broadcast, "binomial", 4, 5, /*root=*/1);
  // Rank 2 (not the root) forwards its own input instead of what it received.
  Program& q = p[2];
  bool changed = false;
  for (Op& o : q.ops)
    if (o.kind == OpKind::send) {
      o.src.buffer = BufferKind::input;
      changed = true;
    }
  if (!changed)
    q.ops.insert(
        q.ops.begin(),
        {OpKind::copy, -1, {BufferKind::input, 0, 5}, {BufferKind::output, 0, 5}, 0, {}, 0, {}, 0});
  const VerifyResult r = check(Collective::broadcast, 4, 5, p, 1);
  expect_kind(r, VerifyErrorKind::forbidden_access);
  EXPECT_EQ(r.error->rank, 2);
}

TEST(VerifyMutation, ReduceMustNotWriteOutputOffTheRoot) {
  auto p = build_all(Collective::reduce, "binomial", 4, 5, /*root=*/0);
  p[3].ops.push_back(
      {OpKind::copy, -1, {BufferKind::input, 0, 5}, {BufferKind::output, 0, 5}, 0, {}, 0, {}, 0});
  const VerifyResult r = check(Collective::reduce, 4, 5, p, 0);
  expect_kind(r, VerifyErrorKind::forbidden_access);
  EXPECT_EQ(r.error->rank, 3);
}

TEST(VerifyMutation, BarrierWithALostRound) {
  const int n = 8;
  auto p = build_all(Collective::barrier, "dissemination", n, 0);
  EXPECT_TRUE(check(Collective::barrier, n, 0, p).ok());
  // Drop the last round (its send and receive) everywhere: every message is
  // still matched, but a rank hears only from half of the others.
  for (Program& q : p) {
    ASSERT_GE(q.ops.size(), 2u);
    q.ops.resize(q.ops.size() - 2);
  }
  const VerifyResult r = check(Collective::barrier, n, 0, p);
  expect_kind(r, VerifyErrorKind::barrier_incomplete);
}

TEST(VerifyMutation, ErrorKindNamesAreDistinct) {
  std::vector<std::string> names;
  for (int k = 0; k < kVerifyErrorKindCount; ++k)
    names.emplace_back(to_string(static_cast<VerifyErrorKind>(k)));
  for (const auto& n : names) EXPECT_NE(n, "invalid");
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
}

// --- the average: a divide of the Output by N, once, after the last reduce ---

CollectiveSpec average_spec(Collective c, int n, size_t count) {
  CollectiveSpec s{c, n, 0, count, 4, 0};
  s.average = true;
  return s;
}

TEST(VerifyAverage, EveryReducingAlgorithmAveragesOnce) {
  for (const Algorithm& a : all_algorithms()) {
    if (a.collective != Collective::allreduce && a.collective != Collective::reduce_scatter &&
        a.collective != Collective::reduce)
      continue;
    for (int n : {1, 2, 5, 8})
      for (size_t count : {size_t{0}, size_t{1}, size_t{37}}) {
        const CollectiveSpec spec = average_spec(a.collective, n, count);
        if (!supported_everywhere(a, spec)) continue;
        const VerifyResult r = verify_programs(spec, chorus::build_all(a, spec), a.name);
        EXPECT_TRUE(r.ok()) << a.name << " N=" << n << " count=" << count << ": "
                            << (r.error ? r.error->message : r.reason);
      }
  }
}

TEST(VerifyAverage, AMissingDivideIsAWrongResult) {
  const CollectiveSpec spec = average_spec(kAllreduce, 4, 12);
  CollectiveSpec sum = spec;
  sum.average = false;
  const Algorithm& ring = *find_algorithm(kAllreduce, "ring");
  const VerifyResult r = verify_programs(spec, chorus::build_all(ring, sum), "mutated");
  expect_kind(r, VerifyErrorKind::wrong_result);
  EXPECT_NE(r.error->message.find("must hold the average of"), std::string::npos)
      << r.error->message;
}

TEST(VerifyAverage, ADivideOfASumIsAWrongResult) {
  CollectiveSpec sum{kAllreduce, 4, 0, 12, 4, 0};
  CollectiveSpec avg = sum;
  avg.average = true;
  const Algorithm& ring = *find_algorithm(kAllreduce, "ring");
  const VerifyResult r = verify_programs(sum, chorus::build_all(ring, avg), "mutated");
  expect_kind(r, VerifyErrorKind::wrong_result);
}

TEST(VerifyAverage, DividingTwiceIsCaught) {
  const CollectiveSpec spec = average_spec(kAllreduce, 3, 9);
  auto programs = chorus::build_all(*find_algorithm(kAllreduce, "ring"), spec);
  Program& p = programs[1];
  const OpIndex last = static_cast<OpIndex>(p.ops.size() - 1);
  ASSERT_EQ(p.ops[last].kind, OpKind::divide);
  insert_after(p, last, p.ops[last]);
  const VerifyResult r = verify_programs(spec, programs, "mutated");
  expect_kind(r, VerifyErrorKind::wrong_result);
  EXPECT_EQ(r.error->rank, 1);
  EXPECT_NE(r.error->message.find("a second time"), std::string::npos) << r.error->message;
}

TEST(VerifyAverage, ReducingIntoAnAverageIsCaught) {
  // A divide right after rank 0's first fold: later folds add to an average.
  const CollectiveSpec spec = average_spec(kAllreduce, 4, 8);
  auto programs = chorus::build_all(*find_algorithm(kAllreduce, "ring"), spec);
  Program& p = programs[0];
  const OpIndex fold = nth(p, OpKind::recv_reduce, 0);
  Op divide;
  divide.kind = OpKind::divide;
  divide.dst = p.ops[fold].dst;
  divide.divisor = 4;
  insert_after(p, fold, divide);
  expect_kind(verify_programs(spec, programs, "mutated"), VerifyErrorKind::wrong_result);
}

TEST(VerifyAverage, TheDivisorMustBeN) {
  const CollectiveSpec spec = average_spec(kAllreduce, 4, 8);
  auto programs = chorus::build_all(*find_algorithm(kAllreduce, "ring"), spec);
  programs[2].ops.back().divisor = 3;
  const VerifyResult r = verify_programs(spec, programs, "mutated");
  expect_kind(r, VerifyErrorKind::wrong_result);
  EXPECT_NE(r.error->message.find("not by N = 4"), std::string::npos) << r.error->message;
}

}  // namespace
}  // namespace chorus
