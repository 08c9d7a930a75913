// The hierarchical algorithms (hier_*): what crosses the network. Counted
// from their Programs: the bytes each host sends to and receives from other
// hosts, against what the algorithm files state (2(H-1)/H M per host for the
// AllReduce, (H-1)/H M for AllGather and ReduceScatter, M into each host for
// the Broadcast), on even and uneven hosts; and the host arithmetic they
// share (schedule/rank_math.h: HostGroups).
#include "algorithms/algorithm.h"
#include "schedule/rank_math.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

namespace chorus {
namespace {

struct HostBytes {
  std::vector<double> out, in;  // per host
};

// Bytes of every message that crosses hosts, by sending and receiving host.
HostBytes across_hosts(const Algorithm& a, const CollectiveSpec& spec) {
  const std::vector<int>& host_of = *spec.host_of;
  const HostGroups g = host_groups(host_of);
  HostBytes b{std::vector<double>(static_cast<size_t>(g.host_count()), 0),
              std::vector<double>(static_cast<size_t>(g.host_count()), 0)};
  const std::vector<Program> programs = build_all(a, spec);
  for (size_t r = 0; r < programs.size(); ++r)
    for (const Op& op : programs[r].ops) {
      if (op.kind != OpKind::send) continue;
      const int from = g.host[r];
      const int to = g.host[static_cast<size_t>(op.peer)];
      if (from == to) continue;
      const double bytes = static_cast<double>(op.src.count * spec.elem_size);
      b.out[static_cast<size_t>(from)] += bytes;
      b.in[static_cast<size_t>(to)] += bytes;
    }
  return b;
}

CollectiveSpec spec_on(Collective c, const std::vector<int>& hosts, size_t count) {
  CollectiveSpec spec{c, static_cast<int>(hosts.size()), 0, count, 4, 0};
  spec.host_of = std::make_shared<const std::vector<int>>(hosts);
  return spec;
}

const Algorithm& algo(Collective c, const char* name) {
  const Algorithm* a = find_algorithm(c, name);
  EXPECT_NE(a, nullptr) << name;
  return *a;
}

TEST(HostGroups, GroupsRanksAndSpreadsParts) {
  const HostGroups g = host_groups(std::vector<int>{5, 5, 2, 5, 2});
  ASSERT_EQ(g.host_count(), 2);
  EXPECT_EQ(g.ranks[0], (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(g.ranks[1], (std::vector<int>{2, 4}));
  EXPECT_EQ(g.host, (std::vector<int>{0, 0, 1, 0, 1}));
  EXPECT_EQ(g.local, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(g.widest, 3);
  // Host 1 (2 ranks) spreads 3 parts: floor(s * 2 / 3) = 0, 0, 1.
  EXPECT_EQ(g.part_owner(1, 0, 3), 0);
  EXPECT_EQ(g.part_owner(1, 1, 3), 0);
  EXPECT_EQ(g.part_owner(1, 2, 3), 1);
  EXPECT_EQ(g.first_part(1, 1, 3), 2);
  EXPECT_EQ(g.part_count(1, 0, 3), 2);
  EXPECT_EQ(g.part_count(1, 1, 3), 1);
  // Every part has exactly one owner, on every host, for any part count.
  for (int parts = 1; parts <= 7; ++parts)
    for (int h = 0; h < g.host_count(); ++h) {
      int total = 0;
      for (int i = 0; i < g.size_of(h); ++i) total += g.part_count(h, i, parts);
      EXPECT_EQ(total, parts);
    }
  // Proxies: the rank itself on its own host, else the owner of its local
  // index's part of widest.
  EXPECT_EQ(g.proxy(0, 3), 3);
  EXPECT_EQ(g.proxy(1, 3), 4);  // local 2 of 3 on a host of 2: floor(2 * 2 / 3) = 1
  EXPECT_EQ(g.proxy(1, 0), 2);
  EXPECT_EQ(consecutive_hosts(7, 3), (std::vector<int>{0, 0, 0, 1, 1, 1, 2}));
  EXPECT_EQ(hosts_of_sizes(std::vector<int>{3, 1}), (std::vector<int>{0, 0, 0, 1}));
  EXPECT_THROW(host_groups(std::vector<int>{0, -1}), Error);
}

TEST(HierTwoLevel, AllReduceCrossesEachHostsLinkWith2HMinus1OverHM) {
  for (int per_host : {2, 4})
    for (int hosts : {2, 3, 4}) {
      const int n = per_host * hosts;
      const size_t count = size_t{12} * 1024 * static_cast<size_t>(n);
      const CollectiveSpec spec =
          spec_on(Collective::allreduce, consecutive_hosts(n, per_host), count);
      const double m = static_cast<double>(count * 4);
      const HostBytes b = across_hosts(algo(Collective::allreduce, "hier_two_level"), spec);
      for (int h = 0; h < hosts; ++h) {
        EXPECT_DOUBLE_EQ(b.out[static_cast<size_t>(h)], 2.0 * (hosts - 1) / hosts * m)
            << hosts << " hosts x " << per_host << ", host " << h;
        EXPECT_DOUBLE_EQ(b.in[static_cast<size_t>(h)], 2.0 * (hosts - 1) / hosts * m);
      }
      // The flat ring over the same layout sends about 2 (N-1)/N M per rank,
      // and a host's ranks cross to the next host once per step: more than
      // the two-level form wherever a host has several ranks.
      const HostBytes ring = across_hosts(algo(Collective::allreduce, "ring"), spec);
      EXPECT_LT(b.out[0], ring.out[0] * 1.0001);
    }
}

TEST(HierTwoLevel, GatherAndScatterCrossWithHMinus1OverHM) {
  for (const std::vector<int>& hosts :
       {consecutive_hosts(8, 4), consecutive_hosts(8, 2), consecutive_hosts(6, 3)}) {
    const HostGroups g = host_groups(hosts);
    const int h = g.host_count();
    const size_t c = 1000;
    const double m = static_cast<double>(c * 4 * hosts.size());
    for (Collective coll : {Collective::allgather, Collective::reduce_scatter}) {
      const HostBytes b = across_hosts(algo(coll, "hier_two_level"), spec_on(coll, hosts, c));
      for (int k = 0; k < h; ++k) {
        EXPECT_DOUBLE_EQ(b.out[static_cast<size_t>(k)], (h - 1.0) / h * m) << to_string(coll);
        EXPECT_DOUBLE_EQ(b.in[static_cast<size_t>(k)], (h - 1.0) / h * m) << to_string(coll);
      }
    }
  }
}

TEST(HierTwoLevel, BroadcastEntersEveryHostOnce) {
  const std::vector<int> hosts = hosts_of_sizes(std::vector<int>{3, 1, 2, 2});
  for (int root : {0, 2, 3, 7}) {
    CollectiveSpec spec = spec_on(Collective::broadcast, hosts, 4096);
    spec.root = root;
    const HostBytes b = across_hosts(algo(Collective::broadcast, "hier_two_level"), spec);
    const int root_host = host_groups(hosts).host[static_cast<size_t>(root)];
    for (size_t k = 0; k < b.in.size(); ++k)
      EXPECT_DOUBLE_EQ(b.in[k], static_cast<int>(k) == root_host ? 0.0 : 4096.0 * 4)
          << "root " << root << ", host " << k;
  }
}

TEST(HierLeader, OnlyLeadersCrossHosts) {
  const std::vector<int> hosts = hosts_of_sizes(std::vector<int>{3, 1, 4});
  const CollectiveSpec spec = spec_on(Collective::allreduce, hosts, 100);
  const std::vector<Program> programs = build_all(algo(Collective::allreduce, "hier_leader"), spec);
  const HostGroups g = host_groups(hosts);
  for (size_t r = 0; r < programs.size(); ++r)
    for (const Op& op : programs[r].ops)
      if (op.kind == OpKind::send && g.host[static_cast<size_t>(op.peer)] != g.host[r]) {
        EXPECT_EQ(g.local[r], 0) << "rank " << r << " is no leader";
        EXPECT_EQ(g.local[static_cast<size_t>(op.peer)], 0);
      }
}

}  // namespace
}  // namespace chorus
