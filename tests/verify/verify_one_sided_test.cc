// The verifier on one-sided Programs (get, get_reduce, signal, wait over
// shared windows).
//
// The grid: every registered algorithm that needs shared windows
// (one_sided::needs_windows: one_shot, two_shot, ...), proven for N = 2..64
// (a subset) and counts {0, 1, N-1, N, N+1, 3N+2, 1009, 1000003}, with the
// call's buffers in windows and staged, summed and averaged, in place and out
// of place (verify() checks both), with the per-rank gets and signals checked
// against the algorithm's own counts. Without shared windows the algorithms
// decline, with a reason.
//
// The mutations: correct one-sided Programs broken in one place each must be
// rejected with their own error kind: a missing signal, a read that does not
// wait, an overwrite before the readers are done, a read outliving the peer's
// call, a wrong remote region, and the flag protocol's other errors.
#include "algorithms/algorithm.h"
#include "algorithms/one_sided.h"
#include "analysis/verify_algorithm.h"
#include "support/program_edit.h"
#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <ostream>
#include <string>
#include <vector>

namespace chorus {
namespace {

constexpr auto kAllreduce = Collective::allreduce;

// ---- the grid ----------------------------------------------------------------

std::vector<const Algorithm*> one_sided_algorithms() {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : all_algorithms())
    if (a.own_support == one_sided::needs_windows) out.push_back(&a);
  return out;
}

struct GridParam {
  const Algorithm* algo;
  int nranks;
};

void PrintTo(const GridParam& p, std::ostream* os) {
  *os << to_string(p.algo->collective) << "/" << p.algo->name << " N=" << p.nranks;
}

std::string param_name(const ::testing::TestParamInfo<GridParam>& info) {
  std::string name = std::string(to_string(info.param.algo->collective)) + "_" +
                     std::string(info.param.algo->name) + "_N" + std::to_string(info.param.nranks);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<size_t> grid_counts(int nranks) {
  const auto n = static_cast<size_t>(nranks);
  std::vector<size_t> c{0, 1, n - 1, n, n + 1, 3 * n + 2, 1009, 1000003};
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

std::vector<GridParam> grid_params() {
  std::vector<GridParam> out;
  for (const Algorithm* a : one_sided_algorithms())
#ifdef CHORUS_REDUCED_GRIDS  // sanitizer builds: fewer rank counts
    for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 16, 17}) out.push_back({a, n});
#else
    for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 32, 33, 48, 63, 64}) out.push_back({a, n});
#endif
  return out;
}

CollectiveSpec windows_spec(const Algorithm& a, int n, size_t count, bool window_buffers,
                            bool average) {
  CollectiveSpec s{a.collective, n, 0, count, 4, 0};
  s.windows = true;
  s.window_buffers = window_buffers;
  s.average = average;
  return s;
}

class VerifyOneSidedGrid : public ::testing::TestWithParam<GridParam> {};

TEST(VerifyOneSided, TheRegistryHasOneSidedAlgorithms) {
  std::vector<std::string> names;
  for (const Algorithm* a : one_sided_algorithms()) names.emplace_back(a->name);
  EXPECT_NE(std::find(names.begin(), names.end(), "one_shot"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "two_shot"), names.end());
}

TEST_P(VerifyOneSidedGrid, ProvesTheCollective) {
  const GridParam p = GetParam();
  const auto un = static_cast<size_t>(p.nranks);
  for (size_t count : grid_counts(p.nranks))
    for (bool in_windows : {false, true})
      for (bool average : {false, true}) {
        if (average && p.algo->collective != kAllreduce) continue;  // nothing to average
        const CollectiveSpec spec = windows_spec(*p.algo, p.nranks, count, in_windows, average);
        SCOPED_TRACE(testing::Message()
                     << "count " << count << (in_windows ? " buffers in windows" : " staged")
                     << (average ? " avg" : " sum"));
        const VerifyResult r = verify(*p.algo, spec);
        ASSERT_TRUE(r.supported) << r.reason;
        ASSERT_TRUE(r.ok()) << r.error->message;
        EXPECT_TRUE(r.in_place_checked);
        ASSERT_EQ(r.ranks.size(), un);
        if (p.nranks == 1) continue;  // a copy: no one-sided op
        // Every rank signals each peer once per flag it uses and reads from
        // every peer; in all, the ranks read and reduce what the algorithm's
        // header says. Depth: a get and a signal's arrival take one unit each.
        size_t got = 0, reduced = 0;
        for (const RankStats& s : r.ranks) {
          EXPECT_EQ(s.messages_sent, 0u);
          got += s.bytes_got;
          reduced += s.elements_reduced;
          if (p.algo->collective == Collective::allgather) {
            EXPECT_EQ(s.signals, 2 * (un - 1));
            EXPECT_EQ(s.gets, un - 1);
            EXPECT_EQ(s.bytes_got, (un - 1) * count * 4);
          } else if (p.algo->name == "one_shot") {
            EXPECT_EQ(s.signals, 2 * (un - 1));
            EXPECT_EQ(s.gets, un - 1);
            EXPECT_EQ(s.bytes_got, (un - 1) * count * 4);
          } else if (p.algo->name == "two_shot") {
            EXPECT_EQ(s.signals, 3 * (un - 1));
            EXPECT_EQ(s.gets, 2 * (un - 1));
          }
        }
        if (p.algo->collective == Collective::allgather) {
          EXPECT_EQ(got, un * (un - 1) * count * 4);
          EXPECT_EQ(reduced, 0u);
          EXPECT_EQ(r.critical_path, 3u);  // kReady, the gets at once, kDone
        } else if (p.algo->name == "one_shot") {
          EXPECT_EQ(got, un * (un - 1) * count * 4);
          EXPECT_EQ(reduced, un * (un - 1) * count);
          EXPECT_EQ(r.critical_path, un + 1);  // kReady, N-1 gets in a row, kDone
        } else if (p.algo->name == "two_shot") {
          EXPECT_EQ(got, 2 * (un - 1) * count * 4);
          EXPECT_EQ(reduced, (un - 1) * count);
          EXPECT_EQ(r.critical_path, un + 3);  // and kReduced, step 3's gets at once
        }
      }
  if (p.nranks > 1) {
    // Without shared windows the algorithm declines, naming why.
    const CollectiveSpec plain{p.algo->collective, p.nranks, 0, 8, 4, 0};
    const VerifyResult r = verify(*p.algo, plain);
    EXPECT_FALSE(r.supported);
    EXPECT_NE(r.reason.find("windows"), std::string::npos) << r.reason;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, VerifyOneSidedGrid, ::testing::ValuesIn(grid_params()),
                         param_name);

// ---- mutations -----------------------------------------------------------------

using one_sided::kDone;
using one_sided::kReady;

struct Case {
  CollectiveSpec spec;
  std::vector<Program> programs;
};

// The Programs of a one-sided AllReduce, with the call's buffers in windows or
// staged.
Case build(std::string_view name, int n, size_t count, bool in_windows, bool average = false) {
  const Algorithm* a = find_algorithm(kAllreduce, name);
  EXPECT_NE(a, nullptr) << name;
  const CollectiveSpec spec = windows_spec(*a, n, count, in_windows, average);
  return {spec, chorus::build_all(*a, spec)};
}

VerifyResult check(const Case& c) {
  return verify_programs(c.spec, c.programs, "mutated");
}

// Index of the first op of rank program p that matches `pred`.
template <typename Pred>
OpIndex find_op(const Program& p, Pred pred) {
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (pred(p.ops[i])) return static_cast<OpIndex>(i);
  ADD_FAILURE() << "no such op";
  return 0;
}
OpIndex signal_to(const Program& p, int peer, uint32_t flag) {
  return find_op(
      p, [&](const Op& o) { return o.kind == OpKind::signal && o.peer == peer && o.flag == flag; });
}
OpIndex wait_for(const Program& p, int peer, uint32_t flag) {
  return find_op(
      p, [&](const Op& o) { return o.kind == OpKind::wait && o.peer == peer && o.flag == flag; });
}
OpIndex get_from(const Program& p, int peer) {
  return find_op(p, [&](const Op& o) { return reads_remote(o.kind) && o.peer == peer; });
}

using test::erase_op;

void drop_dep(Op& op, OpIndex dep) {
  const auto it = std::find(op.deps.begin(), op.deps.end(), dep);
  ASSERT_NE(it, op.deps.end()) << "op has no dep " << dep;
  op.deps.erase(it);
}

void expect_kind(const VerifyResult& r, VerifyErrorKind kind) {
  ASSERT_TRUE(r.error.has_value()) << "expected " << to_string(kind) << ", verification passed";
  EXPECT_EQ(r.error->kind, kind) << to_string(r.error->kind) << ": " << r.error->message;
  EXPECT_NE(r.error->message.find("(mutated) N="), std::string::npos) << r.error->message;
}

bool mentions(const VerifyResult& r, const std::string& what) {
  return r.error && r.error->message.find(what) != std::string::npos;
}

TEST(VerifyOneSidedMutation, UnmutatedProgramsPass) {
  for (const char* name : {"one_shot", "two_shot"})
    for (int n : {2, 3, 4, 5})
      for (bool in_windows : {false, true}) {
        const VerifyResult r = check(build(name, n, 10, in_windows));
        EXPECT_TRUE(r.ok()) << r.error->message;
      }
}

// A signal or a wait moves no data: whatever its unused src and dst say, the
// symbolic run neither reads nor writes them (in bounds they once read as a
// reduce of dst with src; past the end they failed an internal check).
TEST(VerifyOneSidedMutation, SignalsAndWaitsMoveNoData) {
  for (const char* name : {"one_shot", "two_shot"})
    for (bool past_the_end : {false, true}) {
      Case c = build(name, 3, 6, false);
      for (Program& p : c.programs)
        for (Op& o : p.ops)
          if (o.kind == OpKind::signal || o.kind == OpKind::wait) {
            o.src = {BufferKind::output, 0, past_the_end ? p.output_count + 5 : p.output_count};
            o.dst = o.src;
          }
      VerifyResult r;
      ASSERT_NO_THROW(r = check(c)) << name;
      EXPECT_TRUE(r.ok()) << name << ": " << r.error->message;
    }
}

TEST(VerifyOneSidedMutation, MissingSignalLeavesAWaitUnmatched) {
  for (bool in_windows : {false, true}) {
    Case c = build("one_shot", 4, 10, in_windows);
    erase_op(c.programs[1], signal_to(c.programs[1], 2, kReady));
    const VerifyResult r = check(c);
    expect_kind(r, VerifyErrorKind::unmatched_wait);
    EXPECT_EQ(r.error->rank, 2);  // the rank whose wait would hang
    EXPECT_EQ(r.error->op, wait_for(c.programs[2], 1, kReady));
    EXPECT_TRUE(mentions(r, "from rank 1")) << r.error->message;
    EXPECT_TRUE(mentions(r, "missing signal")) << r.error->message;
  }
}

TEST(VerifyOneSidedMutation, SignalWithoutAWait) {
  Case c = build("two_shot", 3, 9, false);
  erase_op(c.programs[0], wait_for(c.programs[0], 2, kDone));
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::unmatched_signal);
  EXPECT_EQ(r.error->rank, 2);
  EXPECT_EQ(r.error->op, signal_to(c.programs[2], 0, kDone));
}

TEST(VerifyOneSidedMutation, SecondSignalOfAFlag) {
  Case c = build("one_shot", 3, 6, false);
  Program& p = c.programs[0];
  const OpIndex s = signal_to(p, 1, kReady);
  p.ops.push_back(p.ops[s]);
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::duplicate_signal);
  EXPECT_EQ(r.error->rank, 0);
  EXPECT_EQ(r.error->op, p.ops.size() - 1);
  EXPECT_TRUE(mentions(r, "at rank 1")) << r.error->message;
}

TEST(VerifyOneSidedMutation, SecondWaitForASignal) {
  Case c = build("one_shot", 3, 6, false);
  Program& p = c.programs[2];
  p.ops.push_back(p.ops[wait_for(p, 0, kReady)]);
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::duplicate_wait);
  EXPECT_EQ(r.error->rank, 2);
  EXPECT_EQ(r.error->op, p.ops.size() - 1);
}

TEST(VerifyOneSidedMutation, FlagOutOfRange) {
  Case c = build("one_shot", 3, 6, false);
  c.programs[1].ops[signal_to(c.programs[1], 2, kDone)].flag = kMaxFlags;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::bad_flag);
  EXPECT_EQ(r.error->rank, 1);
}

TEST(VerifyOneSidedMutation, OneSidedOpsNeedWindows) {
  Case c = build("one_shot", 3, 6, false);
  c.spec.windows = false;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::no_windows);
  EXPECT_EQ(r.error->rank, 0);
}

TEST(VerifyOneSidedMutation, PeerMustBeAnotherRank) {
  Case c = build("one_shot", 3, 6, true);
  c.programs[1].ops[get_from(c.programs[1], 2)].peer = 1;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::bad_peer);
  EXPECT_EQ(r.error->rank, 1);
}

// A get that does not wait for the peer's kReady: staged, it may read the
// staging window before the peer's copy into it is done; in windows, it may
// read the peer's input before the peer has entered the call. Without a wait
// for the peer at all, nothing compares the peer's call stamp either, which
// is the first thing the verifier reports (the later ones, a read ordered
// after a wait for the peer but not after its write: SignalBeforeTheWrite,
// ReadOfAReducedBlockBeforeItIsReduced).
TEST(VerifyOneSidedMutation, ReadBeforeTheWait) {
  for (const char* name : {"one_shot", "two_shot"})
    for (bool in_windows : {false, true}) {
      SCOPED_TRACE(testing::Message() << name << (in_windows ? " in windows" : " staged"));
      Case c = build(name, 4, 10, in_windows);
      Program& p = c.programs[2];
      const OpIndex g = get_from(p, 3);
      drop_dep(p.ops[g], wait_for(p, 3, kReady));
      const VerifyResult r = check(c);
      expect_kind(r, VerifyErrorKind::unchecked_read);
      EXPECT_EQ(r.error->rank, 2);
      EXPECT_EQ(r.error->op, g);
      EXPECT_TRUE(mentions(r, "rank 3's call stamp")) << r.error->message;
    }
}

// A get of rank 1's memory that waits for rank 2's kReady instead of rank
// 1's: no comparison of rank 1's stamp precedes it.
TEST(VerifyOneSidedMutation, ReadAfterAWaitForAnotherPeerOnly) {
  Case c = build("one_shot", 3, 6, false);
  Program& p = c.programs[0];
  const OpIndex g = get_from(p, 1);
  drop_dep(p.ops[g], wait_for(p, 1, kReady));
  p.ops[g].deps.push_back(wait_for(p, 2, kReady));
  std::sort(p.ops[g].deps.begin(), p.ops[g].deps.end());
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::unchecked_read);
  EXPECT_EQ(r.error->rank, 0);
  EXPECT_EQ(r.error->op, g);
}

// The writer's side of the same: rank 1 raises kReady to rank 2 before its
// staging copy is done.
TEST(VerifyOneSidedMutation, SignalBeforeTheWrite) {
  Case c = build("one_shot", 4, 10, false);
  Program& p = c.programs[1];
  const OpIndex staging = find_op(
      p, [](const Op& o) { return o.kind == OpKind::copy && o.dst.buffer == BufferKind::window; });
  p.ops[signal_to(p, 2, kReady)].deps.clear();
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::read_before_signal);
  EXPECT_EQ(r.error->rank, 2);
  EXPECT_EQ(r.error->op, get_from(c.programs[2], 1));
  EXPECT_TRUE(mentions(r, "rank 1's op " + std::to_string(staging))) << r.error->message;
}

// Two-shot's second round reads a peer's reduced block without waiting for its
// kReduced: the peer may still be reducing it.
TEST(VerifyOneSidedMutation, ReadOfAReducedBlockBeforeItIsReduced) {
  for (bool in_windows : {false, true}) {
    Case c = build("two_shot", 4, 12, in_windows);
    Program& p = c.programs[0];
    const OpIndex g = find_op(p, [](const Op& o) { return o.kind == OpKind::get && o.peer == 1; });
    // Only after rank 1's kReady (so its stamp is compared), not after its
    // kReduced: rank 1's reduction of the block may then land after the
    // read, which the verifier reports at the writer.
    p.ops[g].deps = {wait_for(p, 1, kReady)};
    const VerifyResult r = check(c);
    expect_kind(r, VerifyErrorKind::overwrite_before_read);
    EXPECT_EQ(r.error->rank, 1);
    EXPECT_TRUE(mentions(r, "rank 0's op " + std::to_string(g))) << r.error->message;
  }
}

// One-shot with buffers in windows, in place: the result goes to Output, which
// is the Input peers read, only after every peer's kDone. Without that wait it
// may overwrite an input a peer is still reading.
TEST(VerifyOneSidedMutation, OverwriteBeforeTheReadersAreDone) {
  Case c = build("one_shot", 4, 10, true);
  Program& p = c.programs[1];
  const OpIndex result = static_cast<OpIndex>(p.ops.size() - 1);
  ASSERT_EQ(p.ops[result].kind, OpKind::copy);
  ASSERT_EQ(p.ops[result].dst.buffer, BufferKind::output);
  std::vector<OpIndex> kept;
  for (OpIndex d : p.ops[result].deps)
    if (p.ops[d].kind != OpKind::wait) kept.push_back(d);
  ASSERT_LT(kept.size(), p.ops[result].deps.size());
  p.ops[result].deps = kept;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::overwrite_before_read);
  EXPECT_EQ(r.error->rank, 1);  // the writer
  EXPECT_EQ(r.error->op, result);
  EXPECT_EQ(r.error->layout, "in_place");  // out of place, Output is no one's input
}

// The same through the final waits themselves: without them nothing orders
// the result after the peers' reads.
TEST(VerifyOneSidedMutation, RemovedDoneWaitsLetTheResultOverwrite) {
  Case c = build("one_shot", 3, 7, true);
  Program& p = c.programs[2];
  for (int q : {0, 1}) erase_op(p, wait_for(p, q, kDone));
  // The peers' kDone signals to rank 2 are now waited for by no one.
  for (int q : {0, 1})
    erase_op(c.programs[static_cast<size_t>(q)],
             signal_to(c.programs[static_cast<size_t>(q)], 2, kDone));
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::overwrite_before_read);
  EXPECT_EQ(r.error->rank, 2);
}

// Staged, nothing overwrites the staging window within the call, but without
// its final waits rank 1 may return (and its next call overwrite the window)
// while its peers still read it.
TEST(VerifyOneSidedMutation, ReadAfterThePeerReturned) {
  Case c = build("one_shot", 4, 10, false);
  Program& p = c.programs[1];
  for (int q : {0, 2, 3}) erase_op(p, wait_for(p, q, kDone));
  for (int q : {0, 2, 3})
    erase_op(c.programs[static_cast<size_t>(q)],
             signal_to(c.programs[static_cast<size_t>(q)], 1, kDone));
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::read_after_return);
  EXPECT_EQ(r.error->rank, 0);  // the first reader of rank 1's window
  EXPECT_EQ(r.error->op, get_from(c.programs[0], 1));
  EXPECT_TRUE(mentions(r, "rank 1's call may return")) << r.error->message;
}

TEST(VerifyOneSidedMutation, RemoteRegionPastThePeersBuffer) {
  for (bool in_windows : {false, true}) {
    Case c = build("one_shot", 3, 6, in_windows);
    Op& g = c.programs[0].ops[get_from(c.programs[0], 2)];
    g.remote.offset = 1;  // 6 elements from offset 1 of 6
    const VerifyResult r = check(c);
    expect_kind(r, VerifyErrorKind::bad_remote_region);
    EXPECT_EQ(r.error->rank, 0);
    EXPECT_TRUE(mentions(r, "rank 2's input[1,+6)")) << r.error->message;
  }
}

TEST(VerifyOneSidedMutation, RemoteRegionInThePeersScratch) {
  Case c = build("one_shot", 3, 6, true);
  c.programs[0].ops[get_from(c.programs[0], 1)].remote.buffer = BufferKind::scratch;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::bad_remote_region);
  EXPECT_TRUE(mentions(r, "cannot read")) << r.error->message;
}

// Staged, a peer's output is readable only where the peer put it.
TEST(VerifyOneSidedMutation, RemoteRegionThePeerNeverStages) {
  Case c = build("two_shot", 3, 9, false);
  c.programs[2].window_output = SIZE_MAX;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::remote_not_staged);
  EXPECT_NE(r.error->rank, 2);
  EXPECT_TRUE(mentions(r, "rank 2")) << r.error->message;
}

TEST(VerifyOneSidedMutation, StagingPastTheWindow) {
  Case c = build("one_shot", 3, 6, false);
  c.programs[1].window_input = 1;  // 6 elements from 1 of a 6-element window
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::region_out_of_bounds);
  EXPECT_EQ(r.error->rank, 1);
}

TEST(VerifyOneSidedMutation, LocalWindowRegionPastTheWindow) {
  Case c = build("one_shot", 3, 6, false);
  Program& p = c.programs[2];
  p.ops[find_op(p, [](const Op& o) { return o.dst.buffer == BufferKind::window; })].dst.offset = 2;
  expect_kind(check(c), VerifyErrorKind::region_out_of_bounds);
}

// In bounds but the wrong elements: rank 0 folds rank 1's input shifted by
// one.
TEST(VerifyOneSidedMutation, RemoteRegionOfTheWrongElements) {
  Case c = build("one_shot", 3, 6, true);
  Op& g = c.programs[0].ops[find_op(
      c.programs[0], [](const Op& o) { return o.kind == OpKind::get_reduce && o.peer == 1; })];
  g.remote = {BufferKind::input, 1, 5};
  g.src.count = 5;
  g.dst.count = 5;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::misaligned_reduce);
  EXPECT_EQ(r.error->rank, 0);
}

// Staged, the own contribution is read from the staging window; reading it
// from a peer instead counts that peer twice.
TEST(VerifyOneSidedMutation, GetOfTheWrongPeer) {
  Case c = build("one_shot", 3, 6, false);
  Program& p = c.programs[0];
  const OpIndex g = find_op(p, [](const Op& o) { return o.kind == OpKind::get_reduce; });
  const int was = p.ops[g].peer;
  const int other = was == 1 ? 2 : 1;
  p.ops[g].peer = other;
  p.ops[g].deps.push_back(wait_for(p, other, kReady));
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::double_contribution);
  EXPECT_EQ(r.error->rank, 0);
}

// Two ops of one rank that neither deps nor other ranks order: one-shot's
// result copy (buffers in windows) that does not wait for the last fold.
TEST(VerifyOneSidedMutation, LocalRaceNotOrderedThroughOtherRanks) {
  Case c = build("one_shot", 3, 6, true);
  Program& p = c.programs[0];
  Op& result = p.ops.back();
  ASSERT_EQ(result.kind, OpKind::copy);
  std::vector<OpIndex> kept;
  for (OpIndex d : result.deps)
    if (p.ops[d].kind == OpKind::wait) kept.push_back(d);
  result.deps = kept;
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::race);
  EXPECT_EQ(r.error->rank, 0);
  EXPECT_TRUE(mentions(r, "through other ranks")) << r.error->message;
}

// A two-rank AllReduce, staged, whose result copy out of the staging window is
// ordered after the staging copy into it only through the peer: staging copy
// -> kReady -> the peer's wait and get -> the peer's kDone -> this rank's
// wait -> result copy. In place the result copy also overwrites the Input the
// staging copy read. With `wait_for_done` false the result copy does not wait
// for the peer's kDone, and nothing orders the two.
std::vector<Program> ordered_through_the_peer(bool wait_for_done) {
  using B = ProgramBuilder;
  std::vector<Program> p(2);
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    B b({4, 4});
    const size_t at = b.alloc_window(4);
    b.stage_input_at(at);
    const size_t tmp = b.alloc_scratch(4);
    const OpIndex staged = b.copy(B::input(0, 4), B::window(at, 4));
    b.signal(peer, kReady, {staged});
    const OpIndex ready = b.wait(peer, kReady);
    const OpIndex got = b.get(peer, B::input(0, 4), B::scratch(tmp, 4), {ready});
    b.signal(peer, kDone, {got});
    const OpIndex done = b.wait(peer, kDone);
    const OpIndex own = b.copy(B::window(at, 4), B::output(0, 4),
                               wait_for_done ? std::vector<OpIndex>{done} : std::vector<OpIndex>{});
    b.reduce(B::scratch(tmp, 4), B::output(0, 4), {own, got});
    p[static_cast<size_t>(r)] = std::move(b).finish();
  }
  return p;
}

TEST(VerifyOneSidedMutation, OrderThroughAPeerIsAnOrder) {
  CollectiveSpec spec{kAllreduce, 2, 0, 4, 4, 0};
  spec.windows = true;
  const VerifyResult good = verify_programs(spec, ordered_through_the_peer(true), "mutated");
  EXPECT_TRUE(good.ok()) << good.error->message;
  EXPECT_TRUE(good.in_place_checked);
  const VerifyResult r = verify_programs(spec, ordered_through_the_peer(false), "mutated");
  expect_kind(r, VerifyErrorKind::race);
  EXPECT_EQ(r.error->rank, 0);
  EXPECT_TRUE(mentions(r, "through other ranks")) << r.error->message;
  EXPECT_TRUE(mentions(r, "window[0]")) << r.error->message;
}

// Each rank raises its signal only after the peer's: a cycle through the
// flags, which no run completes.
TEST(VerifyOneSidedMutation, SignalsWaitingForEachOtherDeadlock) {
  using B = ProgramBuilder;
  CollectiveSpec spec{kAllreduce, 2, 0, 4, 4, 0};
  spec.windows = true;
  spec.window_buffers = true;
  std::vector<Program> p(2);
  for (int r = 0; r < 2; ++r) {
    B b({4, 4});
    const OpIndex w = b.wait(1 - r, kReady);
    b.signal(1 - r, kReady, {w});
    const OpIndex own = b.copy(B::input(0, 4), B::output(0, 4), {w});
    b.get_reduce(1 - r, B::input(0, 4), B::output(0, 4), B::output(0, 4), {own});
    p[static_cast<size_t>(r)] = std::move(b).finish();
  }
  const VerifyResult r = verify_programs(spec, p, "mutated");
  expect_kind(r, VerifyErrorKind::deadlock);
  EXPECT_TRUE(mentions(r, "waits for flag 0")) << r.error->message;
}

// The average: one_shot and two_shot divide the Output after their final
// waits; dividing before a peer has read the result is an overwrite.
TEST(VerifyOneSidedMutation, AverageBeforeThePeersReadTheReducedBlock) {
  Case c = build("two_shot", 3, 9, true, /*average=*/true);
  EXPECT_TRUE(check(c).ok());
  Program& p = c.programs[1];
  Op& divide = p.ops.back();
  ASSERT_EQ(divide.kind, OpKind::divide);
  // Only after its own reads, not after the peers' kDone.
  std::vector<OpIndex> kept;
  for (OpIndex d : divide.deps)
    if (p.ops[d].kind != OpKind::wait) kept.push_back(d);
  divide.deps = kept;
  for (size_t i = 0; i < p.ops.size() - 1; ++i)
    if (p.ops[i].kind == OpKind::get) divide.deps.push_back(static_cast<OpIndex>(i));
  const VerifyResult r = check(c);
  expect_kind(r, VerifyErrorKind::overwrite_before_read);
  EXPECT_EQ(r.error->rank, 1);
  EXPECT_EQ(r.error->op, p.ops.size() - 1);
}

TEST(VerifyOneSidedMutation, ErrorKindNamesAreDistinct) {
  std::vector<std::string> names;
  for (int k = 0; k < kVerifyErrorKindCount; ++k)
    names.emplace_back(to_string(static_cast<VerifyErrorKind>(k)));
  for (const char* want :
       {"unmatched_wait", "unmatched_signal", "duplicate_signal", "duplicate_wait",
        "read_before_signal", "overwrite_before_read", "read_after_return", "bad_remote_region",
        "remote_not_staged", "no_windows", "bad_flag", "unchecked_read"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
}  // namespace chorus
