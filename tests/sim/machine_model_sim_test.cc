// The simulator on the fitted machine model: hand-computed cases of each term
// (the host memory resource, half-duplex engines, shared cores, size-dependent
// per-byte time, local work priced by the compute rates), and hosts in hier:K
// and JSON topologies.
#include "sim/simulator.h"

#include "model/machine_model.h"
#include "sim/topology.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>

namespace chorus {
namespace {

using B = ProgramBuilder;

constexpr double kAlpha = 1e-6;
constexpr double kBeta = 1e9;  // 1 ms per MB
constexpr size_t kBytes = 1'000'000;

void expect_near_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 + 1e-9 * std::fabs(expected));
}

// Every rank r sends kBytes to r ^ 1 and receives as much from it.
std::vector<Program> exchange(int n) {
  std::vector<Program> out;
  for (int r = 0; r < n; ++r) {
    ProgramBuilder b(BufferCounts{kBytes, kBytes});
    b.send(r ^ 1, B::input(0, kBytes));
    b.recv(r ^ 1, B::output(0, kBytes));
    out.push_back(std::move(b).finish());
  }
  return out;
}

SimResult run(const std::vector<Program>& programs, const Topology& t, const SimOptions& o = {}) {
  return simulate(programs, t, o);
}

TEST(MachineSim, HostMemoryIsSharedByTransfersInRequestOrder) {
  // Two messages of 1 MB at once, 4 bytes of memory traffic per byte, a host
  // memory of 2 GB/s: each books 2 ms of memory. 0 -> 1 books it from alpha
  // to alpha + 2 ms; 1 -> 0 waits for it and ends at alpha + 4 ms. Its ports
  // alone would have taken 1 ms.
  LinkParams link("shm", kAlpha, kBeta);
  link.mem_traffic = 4;
  const auto t = make_topology("switch", 2, link, link, HostParams{2e9, 0});
  ASSERT_TRUE(t->has_hosts());
  SimOptions o;
  o.record_ops = true;
  const SimResult r = run(exchange(2), *t, o);
  expect_near_rel(r.op_times[1][1].end, kAlpha + 2e-3);  // rank 1's receive
  expect_near_rel(r.op_times[0][1].end, kAlpha + 4e-3);  // rank 0's
  expect_near_rel(r.time, kAlpha + 4e-3);
  // Without hosts the same link is the seeds' model: 1 ms.
  const auto plain = make_topology("switch", 2, link, link);
  EXPECT_FALSE(plain->has_hosts());
  expect_near_rel(run(exchange(2), *plain).time, kAlpha + 1e-3);
}

TEST(MachineSim, HalfDuplexEnginesTakeTurns) {
  // 0 -> 1 holds both engines for 1 ms; 1 -> 0 starts when they are free.
  LinkParams link("shm", kAlpha, kBeta);
  link.half_duplex = true;
  const auto t = make_topology("switch", 2, link, link);
  const SimResult r = run(exchange(2), *t);
  expect_near_rel(r.time, kAlpha + 2e-3);
  link.half_duplex = false;
  expect_near_rel(run(exchange(2), *make_topology("switch", 2, link, link)).time, kAlpha + 1e-3);
}

TEST(MachineSim, RanksShareTheirHostsCores) {
  // Four ranks on one host of 2 cores, half duplex: 0 <-> 1 and 2 <-> 3. Each
  // hop takes two cores (one per end), so the four hops of 1 ms run one at a
  // time.
  LinkParams link("shm", kAlpha, kBeta);
  link.half_duplex = true;
  const auto two = make_topology("switch", 4, link, link, HostParams{0, 2});
  expect_near_rel(run(exchange(4), *two).time, kAlpha + 4e-3);
  // With 4 cores the pairs run side by side.
  const auto four = make_topology("switch", 4, link, link, HostParams{0, 4});
  expect_near_rel(run(exchange(4), *four).time, kAlpha + 2e-3);
}

TEST(MachineSim, PerByteTimeFollowsTheCurve) {
  LinkParams link("shm", kAlpha, kBeta);
  link.curve = {{{1000, 1e-10}, {1'000'000, 1e-9}}};
  const auto t = make_topology("switch", 2, link, link);
  std::vector<Program> p;
  for (int r = 0; r < 2; ++r) {
    ProgramBuilder b(BufferCounts{kBytes, kBytes});
    if (r == 0) b.send(1, B::input(0, 1000));
    if (r == 1) b.recv(0, B::output(0, 1000));
    p.push_back(std::move(b).finish());
  }
  expect_near_rel(run(p, *t).time, kAlpha + 1000 * 1e-10);
  expect_near_rel(run(exchange(2), *t).time, kAlpha + 1e-3);
}

TEST(MachineSim, LocalWorkIsPricedByTheComputeRatesOnTheEngine) {
  // Rank 0: copy 1 MB (1 ns/B), then reduce 1 MB (3 ns/B); rank 1 idle. The
  // host memory of 1 GB/s holds the copy's 2 MB of traffic for 2 ms: the
  // copy ends at 2 ms, the reduce (3 MB of traffic, 3 ms) at 5 ms.
  const RateCurve copy{{{1000, 1e-9}}};
  const RateCurve kernel{{{1000, 3e-9}}};
  LinkParams link("shm", kAlpha, kBeta);
  const auto t = make_topology("switch", 2, link, link, HostParams{1e9, 0});
  std::vector<Program> p;
  {
    ProgramBuilder b(BufferCounts{kBytes, kBytes});
    const OpIndex c = b.copy(B::input(0, kBytes), B::output(0, kBytes));
    b.reduce(B::input(0, kBytes), B::output(0, kBytes), {c});
    p.push_back(std::move(b).finish());
    p.push_back(ProgramBuilder(BufferCounts{kBytes, kBytes}).finish());
  }
  SimOptions o;
  o.copy = &copy;
  o.kernel = &kernel;
  o.record_ops = true;
  const SimResult r = run(p, *t, o);
  expect_near_rel(r.op_times[0][0].end, 2e-3);
  expect_near_rel(r.op_times[0][1].end, 5e-3);
  // Without the host's memory limit: 1 ms and 1 + 3 ms.
  const auto free = make_topology("switch", 2, link, link);
  const SimResult f = run(p, *free, o);
  expect_near_rel(f.op_times[0][0].end, 1e-3);
  expect_near_rel(f.op_times[0][1].end, 4e-3);
}

TEST(MachineSim, AReceiveThatReducesPaysTheKernelsExcessOverACopy) {
  // 1 MB arrives at alpha + 1 ms; the kernel (3 ns/B) less the copy
  // (1 ns/B) adds 2 ms on the receiver's engine.
  const RateCurve copy{{{1000, 1e-9}}};
  const RateCurve kernel{{{1000, 3e-9}}};
  const LinkParams link("shm", kAlpha, kBeta);
  const auto t = make_topology("switch", 2, link, link);
  std::vector<Program> p;
  for (int r = 0; r < 2; ++r) {
    ProgramBuilder b(BufferCounts{kBytes, kBytes});
    if (r == 0) b.send(1, B::input(0, kBytes));
    if (r == 1) b.recv_reduce(0, B::input(0, kBytes), B::output(0, kBytes));
    p.push_back(std::move(b).finish());
  }
  SimOptions o;
  o.copy = &copy;
  o.kernel = &kernel;
  expect_near_rel(run(p, *t, o).time, kAlpha + 1e-3 + 2e-3);
}

TEST(MachineSim, LocalWorkRunsOnTheCpuWhichOnlyHalfDuplexHopsShare) {
  // Rank 1 receives A (1 MB, alpha .. alpha + 1 ms), then reduces 1 MB
  // (3 ms on the kernel) and sends C (1 MB) back, both after A. On a full
  // duplex class the reduction does not hold the port: C ends at
  // 2 alpha + 2 ms, the reduction at alpha + 4 ms. On a class whose hops take
  // turns the hop's CPUs move the bytes, so C and the reduction run one
  // after the other: 1 + 3 ms after A at least.
  const RateCurve copy{{{1000, 1e-9}}};
  const RateCurve kernel{{{1000, 3e-9}}};
  auto programs = [] {
    std::vector<Program> p;
    ProgramBuilder b0(BufferCounts{kBytes, kBytes});
    b0.send(1, B::input(0, kBytes));
    b0.recv(1, B::output(0, kBytes));
    p.push_back(std::move(b0).finish());
    ProgramBuilder b1(BufferCounts{kBytes, kBytes});
    const OpIndex a = b1.recv(0, B::output(0, kBytes));
    b1.reduce(B::input(0, kBytes), B::output(0, kBytes), {a});
    b1.send(0, B::input(0, kBytes), {a});
    p.push_back(std::move(b1).finish());
    return p;
  };
  SimOptions o;
  o.copy = &copy;
  o.kernel = &kernel;
  o.record_ops = true;
  LinkParams link("tcp", kAlpha, kBeta);
  const SimResult full = run(programs(), *make_topology("switch", 2, link, link), o);
  expect_near_rel(full.op_times[0][1].end, 2 * kAlpha + 2e-3);  // C received
  expect_near_rel(full.op_times[1][1].end, kAlpha + 4e-3);      // the reduction
  expect_near_rel(full.time, kAlpha + 4e-3);
  link.half_duplex = true;
  const SimResult turns = run(programs(), *make_topology("switch", 2, link, link), o);
  EXPECT_GE(turns.time, kAlpha + 5e-3 - 1e-12);
}

TEST(MachineSim, HierHostsAndJsonHostsCarryTheResource) {
  LinkParams link("intra", kAlpha, kBeta);
  link.mem_traffic = 4;
  const auto h = make_topology("hier:2", 4, link, link, HostParams{2e9, 0});
  ASSERT_EQ(h->host_count(), 2u);
  EXPECT_EQ(h->host_of(1), 0);
  EXPECT_EQ(h->host_of(2), 1);
  // Each host's pair exchanges on its own memory: 4 ms as on one host of two.
  expect_near_rel(run(exchange(4), *h).time, kAlpha + 4e-3);

  const auto j = topology_from_json(
      R"({"nodes": 2, "links": [{"from": 0, "to": 1, "alpha": "1us", "beta": "1GB/s",
          "mem_traffic": 4}], "hosts": [[0, 1]], "memory": "2GB/s", "cores": 2})",
      "j", 2);
  ASSERT_TRUE(j->has_hosts());
  EXPECT_EQ(j->host(0).cores, 2);
  expect_near_rel(run(exchange(2), *j).time, kAlpha + 4e-3);
  // Two hosts of one rank each: each hop's traffic is split between them.
  const auto split = topology_from_json(
      R"({"nodes": 2, "links": [{"from": 0, "to": 1, "alpha": "1us", "beta": "1GB/s",
          "mem_traffic": 4}], "hosts": [[0], [1]], "memory": "2GB/s"})",
      "split", 2);
  expect_near_rel(run(exchange(2), *split).time, kAlpha + 2e-3);
  EXPECT_THROW(topology_from_json(R"({"nodes": 2, "links": [], "hosts": [[0, 1], [1]]})", "dup", 2),
               Error);
  EXPECT_THROW(topology_from_json(R"({"nodes": 2, "links": [], "hosts": [[0, 5]]})", "range", 2),
               Error);
}

}  // namespace
}  // namespace chorus
