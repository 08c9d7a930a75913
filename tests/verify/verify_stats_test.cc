// The verifier's per-rank counts against the seeds' formulas: messages and
// bytes each rank sends, elements it reduces, and the number of steps (the
// distinct step numbers, and the latency depth of the schedule when every
// message takes one unit of time).
#include "algorithms/algorithm.h"
#include "analysis/verify_algorithm.h"
#include "schedule/rank_math.h"
#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus {
namespace {

constexpr size_t kElem = 4;

// Verifies `name` at N ranks, count elements; skips when the algorithm is not
// registered or declines the case.
VerifyResult run(Collective c, std::string_view name, int n, size_t count, int root = 0) {
  const Algorithm* a = find_algorithm(c, name);
  if (a == nullptr) return VerifyResult{false, "not registered", {}, {}, 0, 0, false};
  VerifyResult r = verify(*a, {c, n, 0, count, kElem, root});
  if (r.error) ADD_FAILURE() << r.error->message;
  return r;
}

// Every case these tests name is one the algorithm must serve.
#define ASSERT_SUPPORTED(r) ASSERT_TRUE((r).supported) << (r).reason

size_t log2_exact(int n) {
  return static_cast<size_t>(floor_log2(n));
}
size_t clog2(int n) {
  return static_cast<size_t>(ceil_log2(n));
}

// Ring AllReduce: 2(N-1) steps, each rank sends 2(N-1) messages of M/N, and
// reduces (N-1)/N of the vector.
TEST(VerifyStats, RingAllReduce) {
  for (int n : {2, 3, 5, 8, 16, 33}) {
    const auto un = static_cast<size_t>(n);
    const size_t count = 12 * un;  // divisible: every chunk is M/N
    const VerifyResult r = run(Collective::allreduce, "ring", n, count);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, 2 * (un - 1)) << "N=" << n;
    for (const RankStats& s : r.ranks) {
      EXPECT_EQ(s.messages_sent, 2 * (un - 1));
      EXPECT_EQ(s.messages_received, 2 * (un - 1));
      EXPECT_EQ(s.bytes_sent, 2 * (un - 1) * (count / un) * kElem);
      EXPECT_EQ(s.elements_reduced, (un - 1) * (count / un));
      EXPECT_EQ(s.distinct_steps, 2 * (un - 1));
    }
  }
}

// Uneven split: chunks differ by at most one element, so a rank sends within
// 2(N-1) elements of 2(N-1)/N M, and the whole ring moves exactly 2(N-1) M.
TEST(VerifyStats, RingAllReduceUnevenCount) {
  const int n = 7;
  const size_t count = 1031;
  const VerifyResult r = run(Collective::allreduce, "ring", n, count);
  ASSERT_SUPPORTED(r);
  size_t total = 0;
  for (const RankStats& s : r.ranks) {
    const double ideal = 2.0 * (n - 1) * static_cast<double>(count) / n * kElem;
    EXPECT_NEAR(static_cast<double>(s.bytes_sent), ideal, 2.0 * (n - 1) * kElem);
    total += s.bytes_sent;
  }
  EXPECT_EQ(total, 2 * (n - 1) * count * kElem);
}

// Bidirectional ring: the same bytes as the ring, in about half the steps (the
// seed's N; floor(N/2) per phase, so N-1 for odd N).
TEST(VerifyStats, BidirRingAllReduce) {
  for (int n : {2, 3, 4, 5, 8, 9, 16}) {
    const auto un = static_cast<size_t>(n);
    const size_t count = 24 * un;
    const VerifyResult r = run(Collective::allreduce, "bidir_ring", n, count);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, 2 * (un / 2)) << "N=" << n;
    EXPECT_LE(r.critical_path, un);
    for (const RankStats& s : r.ranks)
      EXPECT_EQ(s.bytes_sent, 2 * (un - 1) * (count / un) * kElem) << "N=" << n;
  }
}

// Recursive halving-doubling, N = 2^k: 2 log2 N messages, bandwidth-optimal
// 2(N-1)/N M bytes per rank.
TEST(VerifyStats, HalvingDoublingPowerOfTwo) {
  for (int n : {2, 4, 8, 16, 64}) {
    const auto un = static_cast<size_t>(n);
    const size_t count = 8 * un;
    const VerifyResult r = run(Collective::allreduce, "halving_doubling", n, count);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, 2 * log2_exact(n)) << "N=" << n;
    for (const RankStats& s : r.ranks) {
      EXPECT_EQ(s.messages_sent, 2 * log2_exact(n)) << "N=" << n;
      EXPECT_EQ(s.bytes_sent, 2 * (un - 1) * (count / un) * kElem) << "N=" << n;
    }
  }
}

// Non-power-of-two: r = N - 2^floor(log2 N) extra ranks fold in first and get
// the result back last, two more steps than the core's 2 log2 P.
TEST(VerifyStats, HalvingDoublingFold) {
  for (int n : {3, 5, 6, 7, 12}) {
    const VerifyResult r = run(Collective::allreduce, "halving_doubling", n, 10 * n);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, 2 * log2_exact(n) + 2) << "N=" << n;
  }
}

// Recursive doubling: log2 N exchanges of the whole vector.
TEST(VerifyStats, RecursiveDoublingAllReduce) {
  for (int n : {2, 4, 8, 32}) {
    const size_t count = 10;
    const VerifyResult r = run(Collective::allreduce, "recursive_doubling", n, count);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, log2_exact(n));
    for (const RankStats& s : r.ranks) {
      EXPECT_EQ(s.messages_sent, log2_exact(n));
      EXPECT_EQ(s.bytes_sent, log2_exact(n) * count * kElem);
    }
  }
}

// Reduce + Broadcast (the seed's naive AllReduce): 2 ceil(log2 N) steps.
TEST(VerifyStats, ReduceBroadcastAllReduce) {
  for (int n : {2, 4, 8, 16}) {
    const VerifyResult r = run(Collective::allreduce, "reduce_broadcast", n, 40);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, 2 * clog2(n)) << "N=" << n;
    EXPECT_EQ(r.total_messages, 2 * static_cast<size_t>(n - 1));
  }
}

// Double binary tree, N = 2^k, one segment per tree: reduce up and broadcast
// down two trees of height log2 N side by side, 2 log2 N steps (the seed's
// 2 log2 N alpha); a rank sends at most 4 messages (up and down, per tree).
TEST(VerifyStats, DoubleBinaryTree) {
  for (int n : {2, 4, 8, 16, 64, 256}) {
    const VerifyResult r = run(Collective::allreduce, "double_binary_tree", n, 4 * n);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, 2 * log2_exact(n)) << "N=" << n;
    for (const RankStats& s : r.ranks) EXPECT_LE(s.messages_sent, 4u) << "N=" << n;
  }
}

// Ring AllGather / ReduceScatter: N-1 steps of one block each.
TEST(VerifyStats, RingAllGatherAndReduceScatter) {
  for (int n : {2, 3, 6, 17}) {
    const auto un = static_cast<size_t>(n);
    const size_t c = 9;
    const VerifyResult ag = run(Collective::allgather, "ring", n, c);
    ASSERT_SUPPORTED(ag);
    EXPECT_EQ(ag.critical_path, un - 1);
    for (const RankStats& s : ag.ranks) {
      EXPECT_EQ(s.messages_sent, un - 1);
      EXPECT_EQ(s.bytes_sent, (un - 1) * c * kElem);
      EXPECT_EQ(s.elements_reduced, 0u);
    }
    const VerifyResult rs = run(Collective::reduce_scatter, "ring", n, c);
    ASSERT_SUPPORTED(rs);
    EXPECT_EQ(rs.critical_path, un - 1);
    for (const RankStats& s : rs.ranks) {
      EXPECT_EQ(s.messages_sent, un - 1);
      EXPECT_EQ(s.bytes_sent, (un - 1) * c * kElem);
      EXPECT_EQ(s.elements_reduced, (un - 1) * c);
    }
  }
}

// Log-step AllGathers: Bruck (any N) and recursive doubling (N = 2^k) both take
// ceil(log2 N) steps and send (N-1) blocks per rank.
TEST(VerifyStats, LogStepAllGathers) {
  for (int n : {2, 4, 5, 7, 16}) {
    const auto un = static_cast<size_t>(n);
    const size_t c = 5;
    for (std::string_view name : {"bruck", "recursive_doubling"}) {
      const Algorithm* a = find_algorithm(Collective::allgather, name);
      if (a == nullptr || !supports(*a, {Collective::allgather, n, 0, c, kElem, 0})) continue;
      const VerifyResult r = run(Collective::allgather, name, n, c);
      EXPECT_EQ(r.critical_path, clog2(n)) << name << " N=" << n;
      for (const RankStats& s : r.ranks) {
        EXPECT_EQ(s.messages_sent, clog2(n)) << name << " N=" << n;
        EXPECT_EQ(s.bytes_sent, (un - 1) * c * kElem) << name << " N=" << n;
      }
    }
  }
}

// Recursive halving ReduceScatter, N = 2^k: log2 N steps, (N-1)/N M bytes.
TEST(VerifyStats, RecursiveHalvingReduceScatter) {
  for (int n : {2, 4, 8, 32}) {
    const auto un = static_cast<size_t>(n);
    const size_t c = 6;
    const VerifyResult r = run(Collective::reduce_scatter, "recursive_halving", n, c);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, log2_exact(n));
    for (const RankStats& s : r.ranks) {
      EXPECT_EQ(s.messages_sent, log2_exact(n));
      EXPECT_EQ(s.bytes_sent, (un - 1) * c * kElem);
    }
  }
}

// Binomial Broadcast and Reduce: ceil(log2 N) rounds; the root sends (or
// receives) ceil(log2 N) messages of M; N-1 messages in all.
TEST(VerifyStats, BinomialTrees) {
  for (int n : {2, 3, 5, 8, 13, 64}) {
    for (int root : {0, n - 1}) {
      const size_t count = 11;
      const VerifyResult b = run(Collective::broadcast, "binomial", n, count, root);
      ASSERT_SUPPORTED(b);
      EXPECT_EQ(b.total_messages, static_cast<size_t>(n - 1));
      const RankStats& br = b.ranks[static_cast<size_t>(root)];
      EXPECT_EQ(br.messages_sent, clog2(n)) << "N=" << n << " root=" << root;
      EXPECT_EQ(br.distinct_steps, clog2(n));
      EXPECT_EQ(br.bytes_sent, clog2(n) * count * kElem);
      EXPECT_LE(b.critical_path, clog2(n));

      const VerifyResult rd = run(Collective::reduce, "binomial", n, count, root);
      ASSERT_SUPPORTED(rd);
      EXPECT_EQ(rd.total_messages, static_cast<size_t>(n - 1));
      EXPECT_EQ(rd.critical_path, clog2(n)) << "N=" << n << " root=" << root;
      const RankStats& rr = rd.ranks[static_cast<size_t>(root)];
      EXPECT_EQ(rr.messages_received, clog2(n));
      EXPECT_EQ(rr.elements_reduced, clog2(n) * count);
    }
  }
}

// Pipelined chain: every segment travels N-1 hops, and the segments do not
// wait for each other beyond channel order, so the latency depth stays N-1
// (the seed's (N-1+S-1) steps come from one port per rank, which is the
// simulator's business); each rank but the last forwards every segment.
TEST(VerifyStats, PipelinedChainBroadcast) {
  for (int n : {2, 5, 9}) {
    const size_t count = 1000;
    const Algorithm* a = find_algorithm(Collective::broadcast, "pipelined_chain");
    ASSERT_NE(a, nullptr) << "pipelined_chain not registered";
    // 100 elements of 4 bytes per segment: 10 segments.
    CollectiveSpec spec{Collective::broadcast, n, 0, count, kElem, 0, 400};
    const VerifyResult r = verify(*a, spec);
    ASSERT_TRUE(r.ok()) << (r.error ? r.error->message : r.reason);
    EXPECT_EQ(r.critical_path, static_cast<size_t>(n - 1)) << "N=" << n;
    EXPECT_EQ(r.total_messages, static_cast<size_t>(n - 1) * 10);
    size_t forwarders = 0;
    for (const RankStats& s : r.ranks) {
      if (s.messages_sent == 0) continue;
      ++forwarders;
      EXPECT_EQ(s.messages_sent, 10u);
      EXPECT_EQ(s.bytes_sent, count * kElem);
    }
    EXPECT_EQ(forwarders, static_cast<size_t>(n - 1));
  }
}

// Dissemination barrier: ceil(log2 N) rounds of one empty message.
TEST(VerifyStats, DisseminationBarrier) {
  for (int n : {1, 2, 3, 8, 9, 100}) {
    const VerifyResult r = run(Collective::barrier, "dissemination", n, 0);
    ASSERT_SUPPORTED(r);
    EXPECT_EQ(r.critical_path, clog2(n));
    for (const RankStats& s : r.ranks) {
      EXPECT_EQ(s.messages_sent, clog2(n));
      EXPECT_EQ(s.bytes_sent, 0u);
    }
  }
}

// AllToAll: pairwise takes N-1 steps of one block, Bruck ceil(log2 N) steps.
TEST(VerifyStats, AllToAll) {
  for (int n : {2, 3, 8, 10}) {
    const auto un = static_cast<size_t>(n);
    const size_t c = 3;
    const VerifyResult p = run(Collective::alltoall, "pairwise", n, c);
    ASSERT_SUPPORTED(p);
    EXPECT_EQ(p.critical_path, un - 1);
    for (const RankStats& s : p.ranks) EXPECT_EQ(s.bytes_sent, (un - 1) * c * kElem);
    const VerifyResult b = run(Collective::alltoall, "bruck", n, c);
    ASSERT_SUPPORTED(b);
    EXPECT_EQ(b.critical_path, clog2(n));
    for (const RankStats& s : b.ranks) EXPECT_EQ(s.messages_sent, clog2(n));
  }
}

}  // namespace
}  // namespace chorus
