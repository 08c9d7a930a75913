// The step counts, message counts and bytes per rank that the algorithm files
// state, measured on the verified Programs (verify/verifier.h: RankStats).
// The critical path counts messages on the longest dependency chain when every
// message takes one unit of time and ports are unlimited, i.e. the alpha term.
#include "algorithms/algorithm.h"
#include "analysis/verify_algorithm.h"
#include "schedule/rank_math.h"
#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus {
namespace {

constexpr size_t kElem = 4;  // float32

VerifyResult run(Collective c, std::string_view name, int n, size_t count, int root = 0,
                 size_t segment_bytes = 0) {
  const Algorithm* a = find_algorithm(c, name);
  EXPECT_NE(a, nullptr) << name;
  if (a == nullptr) return {};
  CollectiveSpec spec{c, n, 0, count, kElem, root, segment_bytes};
  VerifyResult r = verify(*a, spec);
  EXPECT_TRUE(r.ok()) << name << " N=" << n << " count=" << count << ": "
                      << (r.error ? r.error->message : r.reason);
  return r;
}

// Ring-like algorithms take N-1 steps per phase on one port; the bidirectional
// ring floor(N/2): N steps in all for even N (the seed's table), N-1 for odd.
TEST(AlgorithmCosts, BidirRingHalvesTheRingsSteps) {
  for (int n = 2; n <= 17; ++n) {
    const size_t q = 3;
    const size_t count = q * static_cast<size_t>(n);
    const VerifyResult ar = run(Collective::allreduce, "bidir_ring", n, count);
    ASSERT_TRUE(ar.ok());
    EXPECT_EQ(ar.critical_path, static_cast<size_t>(2 * (n / 2))) << "N=" << n;
    for (const RankStats& s : ar.ranks) {
      EXPECT_EQ(s.messages_sent, static_cast<size_t>(2 * (n - 1))) << "N=" << n;
      EXPECT_EQ(s.bytes_sent, 2 * static_cast<size_t>(n - 1) * q * kElem) << "N=" << n;
      EXPECT_EQ(s.bytes_received, s.bytes_sent) << "N=" << n;
    }
    const VerifyResult ring = run(Collective::allreduce, "ring", n, count);
    EXPECT_EQ(ring.critical_path, static_cast<size_t>(2 * (n - 1))) << "N=" << n;

    const VerifyResult ag = run(Collective::allgather, "bidir_ring", n, q);
    EXPECT_EQ(ag.critical_path, static_cast<size_t>(n / 2)) << "N=" << n;
    const VerifyResult rs = run(Collective::reduce_scatter, "bidir_ring", n, q);
    EXPECT_EQ(rs.critical_path, static_cast<size_t>(n / 2)) << "N=" << n;
    for (const RankStats& s : rs.ranks)
      EXPECT_EQ(s.bytes_sent, static_cast<size_t>(n - 1) * q * kElem) << "N=" << n;
  }
}

// 2 log2 N steps on a power of two, 2 more with the fold; bandwidth optimal
// on the core: 2 (P-1)/P M sent per core rank, M each way more with an extra.
TEST(AlgorithmCosts, HalvingDoublingStepsAndBytes) {
  for (int n = 2; n <= 33; ++n) {
    const Fold f = make_fold(n);
    const int k = floor_log2(f.core);
    const size_t count = 5 * static_cast<size_t>(f.core);
    const VerifyResult r = run(Collective::allreduce, "halving_doubling", n, count);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.critical_path, static_cast<size_t>(2 * k + (f.extra > 0 ? 2 : 0))) << "N=" << n;
    for (int rank = 0; rank < n; ++rank) {
      const RankStats& s = r.ranks[static_cast<size_t>(rank)];
      const size_t core_bytes = 2 * (count - count / static_cast<size_t>(f.core)) * kElem;
      if (f.is_extra(rank)) {
        EXPECT_EQ(s.bytes_sent, count * kElem);
        EXPECT_EQ(s.messages_sent, 1u);
      } else if (f.partner(rank) >= 0) {
        EXPECT_EQ(s.bytes_sent, core_bytes + count * kElem) << "N=" << n << " rank " << rank;
        EXPECT_EQ(s.messages_sent, static_cast<size_t>(2 * k + 1));
      } else {
        EXPECT_EQ(s.bytes_sent, core_bytes) << "N=" << n << " rank " << rank;
        EXPECT_EQ(s.messages_sent, static_cast<size_t>(2 * k));
      }
    }
    const VerifyResult rs = run(Collective::reduce_scatter, "recursive_halving", n, 3);
    EXPECT_EQ(rs.critical_path, static_cast<size_t>(k + (f.extra > 0 ? 2 : 0))) << "N=" << n;
  }
}

// log2 N full-vector exchanges (+2 with the fold); Bruck ceil(log2 N) steps
// for any N with (N-1) blocks sent.
TEST(AlgorithmCosts, LatencyAlgorithmsTakeLogSteps) {
  for (int n = 2; n <= 33; ++n) {
    const Fold f = make_fold(n);
    const int k = floor_log2(f.core);
    const size_t count = 7;
    const VerifyResult rd = run(Collective::allreduce, "recursive_doubling", n, count);
    ASSERT_TRUE(rd.ok());
    EXPECT_EQ(rd.critical_path, static_cast<size_t>(k + (f.extra > 0 ? 2 : 0))) << "N=" << n;
    for (int rank = 0; rank < n; ++rank) {
      if (!f.is_extra(rank) && f.partner(rank) < 0) {
        EXPECT_EQ(rd.ranks[static_cast<size_t>(rank)].bytes_sent,
                  static_cast<size_t>(k) * count * kElem);
      }
    }

    const VerifyResult br = run(Collective::allgather, "bruck", n, count);
    EXPECT_EQ(br.critical_path, static_cast<size_t>(ceil_log2(n))) << "N=" << n;
    for (const RankStats& s : br.ranks) {
      EXPECT_EQ(s.messages_sent, static_cast<size_t>(ceil_log2(n)));
      EXPECT_EQ(s.bytes_sent, static_cast<size_t>(n - 1) * count * kElem);
    }
    if (is_pow2(n)) {
      const VerifyResult ag = run(Collective::allgather, "recursive_doubling", n, count);
      EXPECT_EQ(ag.critical_path, static_cast<size_t>(k));
    }
  }
}

TEST(AlgorithmCosts, RecursiveDoublingAllGatherDeclinesOtherRankCounts) {
  const Algorithm* a = find_algorithm(Collective::allgather, "recursive_doubling");
  ASSERT_NE(a, nullptr);
  const Support s = supports(*a, {Collective::allgather, 6, 0, 10, 4, 0});
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("power-of-two"), std::string::npos) << s.reason;
  EXPECT_TRUE(supports(*a, {Collective::allgather, 8, 0, 10, 4, 0}));
}

// Trees: a small message takes about two tree heights of messages.
TEST(AlgorithmCosts, TreesTakeTwoHeights) {
  for (int n = 2; n <= 40; ++n) {
    const VerifyResult rb = run(Collective::allreduce, "reduce_broadcast", n, 9);
    ASSERT_TRUE(rb.ok());
    EXPECT_LE(rb.critical_path, static_cast<size_t>(2 * ceil_log2(n))) << "N=" << n;
    if (is_pow2(n)) {
      EXPECT_EQ(rb.critical_path, static_cast<size_t>(2 * ceil_log2(n)));
    }

    const VerifyResult dbt = run(Collective::allreduce, "double_binary_tree", n, 9);
    ASSERT_TRUE(dbt.ok());
    EXPECT_LE(dbt.critical_path, static_cast<size_t>(2 * floor_log2(n))) << "N=" << n;
    // At most 4 ceil(M/2): half up in each tree, twice half down in one.
    for (const RankStats& s : dbt.ranks) EXPECT_LE(s.bytes_sent, 4 * 5 * kElem) << "N=" << n;
  }
}

// Segmenting: the double binary tree and the chains send one message per
// segment and edge, so a smaller segment means proportionally more messages.
TEST(AlgorithmCosts, SegmentsFollowTheRequestedSize) {
  const size_t count = 1000;
  // Two halves of 500 elements in segments of 16 elements: 32 segments each.
  const VerifyResult dbt =
      run(Collective::allreduce, "double_binary_tree", 8, count, 0, 16 * kElem);
  ASSERT_TRUE(dbt.ok());
  size_t total = 0;
  for (const RankStats& s : dbt.ranks) total += s.messages_sent;
  // Each tree has N-1 edges, each carrying every segment up and down.
  EXPECT_EQ(total, 2u * 2u * 7u * 32u);

  const VerifyResult chain =
      run(Collective::broadcast, "pipelined_chain", 5, count, 2, 100 * kElem);
  ASSERT_TRUE(chain.ok());
  // 10 segments, along 4 hops.
  EXPECT_EQ(chain.total_messages, 40u);
  EXPECT_EQ(chain.ranks[1].messages_sent, 0u);  // the chain's end: 2, 3, 4, 0, 1
  EXPECT_EQ(chain.ranks[2].messages_received, 0u);

  const VerifyResult reduce = run(Collective::reduce, "pipelined_chain", 5, count, 2, 100 * kElem);
  ASSERT_TRUE(reduce.ok());
  EXPECT_EQ(reduce.total_messages, 40u);
  EXPECT_EQ(reduce.ranks[2].messages_sent, 0u);  // the root
}

// Scatter + AllGather: the root sends N-1 blocks in the scatter and N-1 in
// the ring, and receives nothing.
TEST(AlgorithmCosts, ScatterAllGatherRootOnlySends) {
  for (int n = 2; n <= 17; ++n) {
    const size_t count = 4 * static_cast<size_t>(n);
    const VerifyResult r = run(Collective::broadcast, "scatter_allgather", n, count, 1 % n);
    ASSERT_TRUE(r.ok());
    const RankStats& root = r.ranks[static_cast<size_t>(1 % n)];
    EXPECT_EQ(root.bytes_sent, 2 * (count - 4) * kElem) << "N=" << n;
    EXPECT_EQ(root.messages_received, 0u);
    // The root's ring sends read its input and need no scatter first, and a
    // rank at depth d of the scatter tree is at least d hops down the ring:
    // the scatter hides behind the ring's N-1 messages on the latency path
    // (in lock-step rounds it is ceil(log2 N) + N - 1).
    EXPECT_EQ(r.critical_path, static_cast<size_t>(n - 1)) << "N=" << n;
  }
}

}  // namespace
}  // namespace chorus
