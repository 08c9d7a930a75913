// Simulator tests: hand-checked small cases on every topology (single
// messages, port and link contention, forwarding, reduction cost), bad
// programs, and agreement of every closed form with the simulated time of the
// algorithm's actual Programs for N = 2..64 (the one-sided algorithms on
// shared windows, both staged and with the call's buffers in windows). The
// one-sided ops' own cases are in one_sided_sim_test.cc.
#include "sim/simulator.h"

#include "algorithms/algorithm.h"
#include "model/cost_model.h"
#include "sim/topology.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

namespace chorus {
namespace {

using B = ProgramBuilder;

constexpr double kAlpha = 2e-6;
constexpr double kBeta = 25e9;

const LinkParams kLink{"link", kAlpha, kBeta};
const LinkParams kInter{"inter", 10e-6, 5e9};

std::unique_ptr<Topology> topo(const char* name, int n) {
  return make_topology(name, n, kLink, kInter);
}

// Programs for n ranks; ops are added by the test.
struct Progs {
  explicit Progs(int n, size_t count = 1000) {
    for (int r = 0; r < n; ++r) builders.emplace_back(BufferCounts{count, count});
  }
  std::vector<Program> finish() {
    std::vector<Program> out;
    for (auto& b : builders) out.push_back(std::move(b).finish());
    return out;
  }
  std::vector<ProgramBuilder> builders;
};

SimResult run(std::vector<Program> programs, const Topology& t, int ports = 1, double gamma = 0) {
  return simulate(programs, t, SimOptions{ports, gamma, 1});
}

void expect_near_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 + 1e-9 * std::fabs(expected));
}

TEST(Simulator, OneMessageCostsAlphaPlusBytesOverBeta) {
  auto t = topo("switch", 2);
  Progs p(2);
  p.builders[0].send(1, B::input(0, 1000));
  p.builders[1].recv(0, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.time, kAlpha + 1000 / kBeta);
  EXPECT_EQ(r.messages, 1u);
  EXPECT_EQ(r.hops, 1u);
}

TEST(Simulator, ReceivePortContentionSerializesOnePortOnly) {
  for (int ports : {1, 2}) {
    auto t = topo("switch", 3);
    Progs p(3);
    p.builders[1].send(0, B::input(0, 1000));
    p.builders[2].send(0, B::input(0, 1000));
    p.builders[0].recv(1, B::output(0, 1000));
    p.builders[0].recv(2, B::output(0, 1000));
    const SimResult r = run(p.finish(), *t, ports);
    const double g = 1000 / kBeta;
    // One receive port: the second message waits for the first's b/beta (but
    // not for its alpha, which is latency). Two ports: both at once.
    expect_near_rel(r.time, ports == 1 ? kAlpha + 2 * g : kAlpha + g);
  }
}

TEST(Simulator, SendPortContention) {
  auto t = topo("switch", 3);
  Progs p(3);
  p.builders[0].send(1, B::input(0, 500));
  p.builders[0].send(2, B::input(0, 1000));
  p.builders[1].recv(0, B::output(0, 500));
  p.builders[2].recv(0, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.rank_time[1], kAlpha + 500 / kBeta);
  expect_near_rel(r.rank_time[2], kAlpha + 1500 / kBeta);
}

TEST(Simulator, DependencyChainsAndReductionCost) {
  auto t = topo("switch", 2);
  Progs p(2);
  const double gamma = 1e-9;
  // Exchange, then reduce what arrived: alpha + g + gamma b, then a local
  // reduce of 1000 more and a copy that costs nothing.
  for (int r = 0; r < 2; ++r) {
    auto& b = p.builders[static_cast<size_t>(r)];
    b.send(1 - r, B::input(0, 1000));
    OpIndex x = b.recv_reduce(1 - r, B::input(0, 1000), B::output(0, 1000));
    OpIndex y = b.reduce(B::input(0, 1000), B::output(0, 1000), {x});
    b.copy(B::output(0, 1000), B::output(0, 1000), {y});
  }
  const SimResult r = run(p.finish(), *t, 1, gamma);
  expect_near_rel(r.time, kAlpha + 1000 / kBeta + 2 * gamma * 1000);
}

TEST(Simulator, ReceiveStartedLateCompletesWhenStarted) {
  auto t = topo("switch", 2);
  Progs p(2);
  p.builders[0].send(1, B::input(0, 0));
  p.builders[0].send(1, B::input(0, 1000));
  // Rank 1 receives the second message only after it has sent a big one back.
  OpIndex r0 = p.builders[1].recv(0, B::output(0, 0));
  OpIndex s = p.builders[1].send(0, B::input(0, 1000), {r0});
  p.builders[1].recv(0, B::output(0, 1000), {s});
  p.builders[0].recv(1, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  // 0-byte message arrives at alpha; rank 1's send ends at 2 alpha + g; the
  // second message had arrived at alpha + g, so rank 1 is done at 2 alpha + g.
  expect_near_rel(r.rank_time[1], 2 * kAlpha + 1000 / kBeta);
}

TEST(Simulator, RingForwardsHopByHop) {
  auto t = topo("ring", 8);
  Progs p(8);
  p.builders[0].send(3, B::input(0, 1000));  // 3 hops to the right
  p.builders[3].recv(0, B::output(0, 1000));
  p.builders[1].send(6, B::input(0, 1000));  // 3 hops to the left: 1 0 7 6
  p.builders[6].recv(1, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  const double hop = kAlpha + 1000 / kBeta;
  expect_near_rel(r.rank_time[3], 3 * hop);
  expect_near_rel(r.rank_time[6], 3 * hop);
  EXPECT_EQ(r.hops, 6u);
}

TEST(Simulator, RingLinkContentionEvenWithTwoPorts) {
  auto t = topo("ring", 5);
  Progs p(5);
  p.builders[0].send(2, B::input(0, 1000));  // 0 -> 1 -> 2
  p.builders[0].send(1, B::input(0, 1000));  // 0 -> 1, same link
  p.builders[2].recv(0, B::output(0, 1000));
  p.builders[1].recv(0, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t, 2);
  const double g = 1000 / kBeta;
  // Two send ports, but one link 0 -> 1: the second message waits for it.
  expect_near_rel(r.rank_time[1], kAlpha + 2 * g);
  expect_near_rel(r.rank_time[2], 2 * (kAlpha + g));
  EXPECT_NEAR(r.max_link_busy, 2 * g, 1e-18);
}

TEST(Simulator, HypercubeRoutesStayInsideNonPowerOfTwo) {
  auto t = topo("hypercube", 6);
  std::vector<Hop> hops;
  t->route(5, 2, hops);  // 101 -> 100 -> 000 -> 010
  ASSERT_EQ(hops.size(), 3u);
  for (const Hop& h : hops) {
    EXPECT_LT(h.to, 6);
    EXPECT_EQ(__builtin_popcount(static_cast<unsigned>(h.from ^ h.to)), 1);
  }
  EXPECT_EQ(hops.back().to, 2);
  auto t8 = topo("hypercube", 8);
  Progs p(8);
  p.builders[0].send(7, B::input(0, 1000));
  p.builders[7].recv(0, B::output(0, 1000));
  expect_near_rel(run(p.finish(), *t8).time, 3 * (kAlpha + 1000 / kBeta));
}

TEST(Simulator, HierSharesTheHostInterface) {
  auto t = topo("hier:2", 4);
  Progs p(4);
  p.builders[0].send(2, B::input(0, 1000));  // host 0 -> host 1
  p.builders[1].send(3, B::input(0, 1000));  // host 0 -> host 1, same NICs
  p.builders[2].send(3, B::input(0, 1000));  // within host 1
  p.builders[2].recv(0, B::output(0, 1000));
  p.builders[3].recv(1, B::output(0, 1000));
  p.builders[3].recv(2, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t, 2);
  const double gi = 1000 / kInter.beta;
  expect_near_rel(r.rank_time[2], std::max(kInter.alpha + gi, kAlpha + 1000 / kBeta));
  expect_near_rel(r.rank_time[3], kInter.alpha + 2 * gi);
}

TEST(Simulator, JsonTopologyUsesEachLinksParameters) {
  const char* text = R"({"nodes": 3, "links": [
      {"from": 0, "to": 1, "alpha": "1us", "beta": "1GB/s"},
      {"from": 1, "to": 2, "alpha": 3e-6, "beta": 2e9}]})";
  auto t = topology_from_json(text, "line", 3);
  Progs p(3);
  p.builders[0].send(2, B::input(0, 1000));
  p.builders[2].recv(0, B::output(0, 1000));
  p.builders[2].send(1, B::input(0, 1000));
  p.builders[1].recv(2, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.rank_time[2], 1e-6 + 1000 / 1e9 + 3e-6 + 1000 / 2e9);
  expect_near_rel(r.rank_time[1], 3e-6 + 1000 / 2e9);
}

TEST(Simulator, BadTopologiesAreErrors) {
  EXPECT_THROW(topo("torus", 4), Error);
  EXPECT_THROW(topo("hier:0", 4), Error);
  EXPECT_THROW(topo("hier:x", 4), Error);
  EXPECT_THROW(topo("missing-file.json", 4), Error);
  EXPECT_THROW(topology_from_json("{", "bad", 2), Error);
  EXPECT_THROW(topology_from_json(R"({"nodes": 3, "links": []})", "n", 2), Error);
  EXPECT_THROW(topology_from_json(R"({"nodes": 2, "links": [{"from": 0, "to": 5,
      "alpha": 1, "beta": 1}]})",
                                  "oob", 2),
               Error);
  // Disconnected: building works, routing names the pair.
  auto t = topology_from_json(R"({"nodes": 3, "links": [{"from": 0, "to": 1,
      "alpha": "1us", "beta": "1GB/s"}]})",
                              "split", 3);
  std::vector<Hop> hops;
  try {
    t->route(0, 2, hops);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no route from node 0 to node 2"), std::string::npos);
  }
}

TEST(Simulator, DeadlockAndMismatchAreErrors) {
  auto t = topo("switch", 2);
  {
    Progs p(2);
    for (int r = 0; r < 2; ++r) {
      auto& b = p.builders[static_cast<size_t>(r)];
      OpIndex x = b.recv(1 - r, B::output(0, 10));
      b.send(1 - r, B::input(0, 10), {x});
    }
    try {
      run(p.finish(), *t);
      FAIL() << "expected a deadlock error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::internal);
      EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos);
    }
  }
  {
    Progs p(2);
    p.builders[0].send(1, B::input(0, 10));
    p.builders[1].recv(0, B::output(0, 11));
    EXPECT_THROW(run(p.finish(), *t), Error);
  }
  {
    Progs p(3);
    EXPECT_THROW(run(p.finish(), *t), Error);  // 3 programs, 2-rank topology
  }
}

// --- hosts ---------------------------------------------------------------------

// The hierarchical algorithms take their hosts from the topology (rank_hosts,
// as sim_sweep hands them on): hier:K's consecutive hosts, a JSON topology's
// "hosts" (uneven here), make_host_topology's layout.
TEST(Simulator, HierAlgorithmsRunOnTheTopologysHosts) {
  const LinkParams intra{"intra", 1e-6, 10e9};
  const LinkParams inter{"inter", 50e-6, 62.5e6};
  const auto json = topology_from_json(
      R"({"nodes": 4, "hosts": [[0, 1, 2], [3]],
          "links": [{"from": 0, "to": 1, "alpha": "1us", "beta": "10GB/s", "duplex": true},
                    {"from": 1, "to": 2, "alpha": "1us", "beta": "10GB/s", "duplex": true},
                    {"from": 0, "to": 2, "alpha": "1us", "beta": "10GB/s", "duplex": true},
                    {"from": 2, "to": 3, "alpha": "50us", "beta": "62.5MB/s", "duplex": true}]})",
      "uneven.json", 4);
  EXPECT_EQ(json->rank_hosts(), (std::vector<int>{0, 0, 0, 1}));
  const auto hier4 = make_topology("hier:4", 8, intra, inter);
  EXPECT_EQ(hier4->rank_hosts(), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  const auto mixed = make_host_topology({0, 1, 0, 1, 1}, intra, inter);
  EXPECT_EQ(mixed->rank_hosts(), (std::vector<int>{0, 1, 0, 1, 1}));
  EXPECT_EQ(make_topology("switch", 3, intra, inter)->rank_hosts(), (std::vector<int>{0, 0, 0}));
  size_t ran = 0;
  for (const Topology* t : {json.get(), hier4.get(), mixed.get()})
    for (const Algorithm& a : all_algorithms()) {
      if (a.name.substr(0, 5) != "hier_") continue;
      CollectiveSpec spec{a.collective, t->nranks(), 0, 4096, 4, 0};
      spec.host_of = std::make_shared<const std::vector<int>>(t->rank_hosts());
      ASSERT_TRUE(supports(a, spec)) << a.name << " on " << t->name();
      const SimResult r = simulate(build_all(a, spec), *t, SimOptions{1, 1e-10, 4});
      EXPECT_GT(r.time, 0) << a.name << " on " << t->name();
      EXPECT_TRUE(std::isfinite(r.time));
      ++ran;
    }
  EXPECT_EQ(ran, 15u);
  // 16 MiB on 2 hosts of 4 behind 500 Mbit/s links: the two-level AllReduce
  // sends M across each host's link, the ring 14 steps of M/8 (ranks 3 and 7
  // cross at every step): 1.75 times the bytes.
  CollectiveSpec big{Collective::allreduce, 8, 0, size_t{4} << 20, 4, 0};
  big.host_of = std::make_shared<const std::vector<int>>(hier4->rank_hosts());
  const double hier =
      simulate(build_all(*find_algorithm(Collective::allreduce, "hier_two_level"), big), *hier4,
               SimOptions{1, 1e-10, 4})
          .time;
  const double ring = simulate(build_all(*find_algorithm(Collective::allreduce, "ring"), big),
                               *hier4, SimOptions{1, 1e-10, 4})
                          .time;
  EXPECT_LT(hier, ring / 1.5);
}

// --- closed forms ---------------------------------------------------------------

struct Params {
  double alpha, beta, gamma;
};

// Element counts that split evenly for every algorithm at N ranks (blocks of
// N, and of the power-of-two core for the halving algorithms).
std::vector<size_t> even_counts(Collective c, int n) {
  const size_t unit = per_rank_blocks(c) ? 64 : static_cast<size_t>(n) * 64;
  return {unit, unit * 5, unit * 1024};
}

TEST(ClosedForms, SimulatorMatchesEveryFormula) {
  const Params params[] = {{2e-6, 25e9, 1e-10}, {5e-5, 1e9, 2e-9}};
  const size_t es = 4;
  size_t checked = 0;
  for (const Algorithm& a : all_algorithms())
    for (const ClosedForm& f : a.costs) {
      const size_t checked_before = checked;
      const Algorithm* algo = &a;
      std::vector<std::string> topologies;
      for (size_t i = 0, j; i < f.topologies.size(); i = j + 1) {
        j = f.topologies.find(' ', i);
        if (j == std::string_view::npos) j = f.topologies.size();
        topologies.emplace_back(f.topologies.substr(i, j - i));
      }
      for (int ports : {1, 2}) {
        if (f.ports != 0 && f.ports != ports) continue;
        for (int n = 2; n <= 64; ++n) {
          for (size_t count : even_counts(a.collective, n)) {
            if (a.collective == Collective::barrier && count != even_counts(a.collective, n)[0])
              continue;
            CollectiveSpec spec{a.collective, n, 0, count, es, 0};
            // The ranks share windows (one host), so that the one-sided
            // algorithms run too, staged (Input and Output are user buffers)
            // and with Input and Output in windows.
            spec.windows = true;
            if (!supports(*algo, spec)) continue;
            for (bool in_windows : {false, true}) {
              spec.window_buffers = in_windows;
              const auto programs = build_all(*algo, spec);
              if (in_windows && !programs[0].one_sided()) continue;
              for (const std::string& tn : topologies) {
                if (!closed_form_applies(f, tn, n, ports)) continue;
                for (const Params& pr : params) {
                  const LinkParams link{"link", pr.alpha, pr.beta};
                  auto t = make_topology(tn, n, link, link);
                  const double m = model_bytes(a.collective, n, count, es);
                  const CostParams cp{pr.alpha, pr.beta, pr.gamma, ports};
                  const Prediction want = f.at(n, m, cp);
                  if (!want.ok) {
                    EXPECT_FALSE(want.reason.empty());
                    continue;
                  }
                  const SimResult got = simulate(programs, *t, SimOptions{ports, pr.gamma, es});
                  EXPECT_NEAR(got.time, want.seconds, 1e-9 * want.seconds)
                      << to_string(a.collective) << "(" << a.name << ") N=" << n
                      << " count=" << count << " ports=" << ports << " topology=" << tn
                      << " alpha=" << pr.alpha << " window_buffers=" << in_windows;
                  ++checked;
                }
              }
            }
          }
        }
      }
      EXPECT_GE(checked, checked_before + 20)
          << to_string(a.collective) << "(" << a.name << ") was hardly ever compared";
    }
  EXPECT_GT(checked, 1000u);
}

TEST(ClosedForms, AlgorithmsWithoutAFormulaSaySo) {
  // Bruck's AllToAll charges packing copies the model has no term for.
  const Algorithm* bruck = find_algorithm(Collective::alltoall, "bruck");
  ASSERT_NE(bruck, nullptr);
  ASSERT_TRUE(bruck->costs.empty());
  const Prediction p = closed_form(*bruck, 4, 1024, {});
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.reason.find("no closed form"), std::string::npos);
}

}  // namespace
}  // namespace chorus
