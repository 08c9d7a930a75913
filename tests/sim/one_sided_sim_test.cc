// The simulator's model of one-sided ops, on small hand-computed cases: a get
// is a transfer from the peer that holds only the reader's receive port (its
// engine on a half-duplex class), get_reduce adds the reduction, a signal
// holds no port and reaches its peer after alpha, a wait completes when both
// it has started and its signal has arrived; flags match per (signalling
// rank, flag); a fitted flag_alpha replaces alpha for signals and gets (not
// messages); bad one-sided programs are errors; and which topologies put
// every rank on one host (and so share windows).
#include "sim/simulator.h"

#include "model/machine_model.h"
#include "sim/topology.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace chorus {
namespace {

using B = ProgramBuilder;

// 1000 bytes take 1 us at kBeta: every time below is a whole microsecond.
constexpr double kAlpha = 1e-6;
constexpr double kBeta = 1e9;
constexpr double kUs = 1e-6;
const LinkParams kLink{"link", kAlpha, kBeta};

struct Progs {
  explicit Progs(int n, size_t count = 4000) {
    for (int r = 0; r < n; ++r) builders.emplace_back(BufferCounts{count, count});
  }
  B& operator[](int r) { return builders[static_cast<size_t>(r)]; }
  std::vector<Program> finish() {
    std::vector<Program> out;
    for (auto& b : builders) out.push_back(std::move(b).finish());
    return out;
  }
  std::vector<ProgramBuilder> builders;
};

SimResult run(std::vector<Program> programs, const Topology& t, SimOptions o = {}) {
  o.record_ops = true;
  return simulate(programs, t, o);
}

void expect_near_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-15 + 1e-9 * std::fabs(expected));
}

// The message of an Error the run throws, and that it has `code`.
std::string error_of(std::vector<Program> programs, const Topology& t, ErrorCode code) {
  try {
    simulate(programs, t, SimOptions{});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return {};
}

TEST(OneSidedSim, AGetHoldsOnlyTheReadersReceivePort) {
  // Rank 1 reads 1000 bytes of rank 0 while rank 0 sends 1000 bytes to rank
  // 2, one port each: the get does not take rank 0's send port, so both end
  // at alpha + 1 us (2 us). Were the get a message, rank 0's send would wait
  // for it and end at 3 us.
  auto t = make_topology("switch", 3, kLink, kLink);
  Progs p(3);
  p[1].get(0, B::input(0, 1000), B::output(0, 1000));
  p[0].send(2, B::input(0, 1000));
  p[2].recv(0, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.op_times[1][0].start, 0);
  expect_near_rel(r.op_times[1][0].end, 2 * kUs);
  expect_near_rel(r.rank_time[2], 2 * kUs);
  expect_near_rel(r.time, 2 * kUs);
  EXPECT_EQ(r.gets, 1u);
  EXPECT_EQ(r.messages, 1u);
  EXPECT_EQ(r.hops, 2u);
  EXPECT_DOUBLE_EQ(r.bytes, 2000);
}

TEST(OneSidedSim, GetsQueueAtTheReadersReceivePorts) {
  // Rank 0 reads 1000 bytes from each of ranks 1 and 2 at once. One receive
  // port: the second read waits for the first's 1 us (not its alpha):
  // 1 + 1 + 1 = 3 us. Two ports: both at once, 2 us.
  for (int ports : {1, 2}) {
    auto t = make_topology("switch", 3, kLink, kLink);
    Progs p(3);
    p[0].get(1, B::input(0, 1000), B::output(0, 1000));
    p[0].get(2, B::input(0, 1000), B::output(1000, 1000));
    const SimResult r = run(p.finish(), *t, SimOptions{ports, 0, 1});
    expect_near_rel(r.op_times[0][0].end, 2 * kUs);
    expect_near_rel(r.op_times[0][1].end, ports == 1 ? 3 * kUs : 2 * kUs);
  }
  // A get and a message share the receive port too: rank 0's get (started
  // first) holds it from 1 to 2 us, rank 2's message then 2 to 3 us.
  auto t = make_topology("switch", 3, kLink, kLink);
  Progs p(3);
  p[0].get(1, B::input(0, 1000), B::output(0, 1000));
  p[0].recv(2, B::output(1000, 1000));
  p[2].send(0, B::input(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.op_times[0][0].end, 2 * kUs);
  expect_near_rel(r.op_times[0][1].end, 3 * kUs);
  // The sender's port was free all along: its send ended with the hop.
  expect_near_rel(r.op_times[2][0].end, 3 * kUs);
}

TEST(OneSidedSim, GetReduceAddsTheReduction) {
  // gamma 1 ns/B: 2000 bytes reduce in 2 us after alpha + 2 us of transfer.
  auto t = make_topology("switch", 2, kLink, kLink);
  Progs p(2);
  p[0].get_reduce(1, B::input(0, 2000), B::output(0, 2000), B::output(0, 2000));
  const SimResult r = run(p.finish(), *t, SimOptions{1, 1e-9, 1});
  expect_near_rel(r.time, 1 * kUs + 2 * kUs + 2 * kUs);
  // Elements of 4 bytes: 8000 bytes, 8 us each way.
  Progs q(2);
  q[0].get_reduce(1, B::input(0, 2000), B::output(0, 2000), B::output(0, 2000));
  expect_near_rel(run(q.finish(), *t, SimOptions{1, 1e-9, 4}).time, 17 * kUs);
}

TEST(OneSidedSim, SignalsHoldNoPortAndWaitsMatchTheirFlag) {
  // Rank 0: a 1000-byte send to rank 1 and, at the same instant, flag 0 to
  // rank 1; then a 3000-byte reduce (gamma 1 ns/B: 3 us) and flag 1.
  // Rank 1 waits for flag 1 first in program order, then receives, then waits
  // for flag 0 after the receive.
  //   flag 0 is raised at 0 (the send's port does not delay it), arrives at
  //   1 us; the wait for it starts after the receive (2 us): done at 2 us.
  //   flag 1 is raised at 3 us, arrives at 4 us: its wait ends then.
  auto t = make_topology("switch", 2, kLink, kLink);
  Progs p(2);
  p[0].send(1, B::input(0, 1000));
  p[0].signal(1, 0);
  const OpIndex red = p[0].reduce(B::input(0, 3000), B::output(0, 3000));
  p[0].signal(1, 1, {red});
  p[1].wait(0, 1);
  const OpIndex recv = p[1].recv(0, B::output(0, 1000));
  p[1].wait(0, 0, {recv});
  const SimResult r = run(p.finish(), *t, SimOptions{1, 1e-9, 1});
  expect_near_rel(r.op_times[0][1].start, 0);  // the signal is done at once
  expect_near_rel(r.op_times[0][1].end, 0);
  expect_near_rel(r.op_times[0][3].end, 3 * kUs);
  expect_near_rel(r.op_times[1][0].end, 4 * kUs);
  expect_near_rel(r.op_times[1][1].end, 2 * kUs);
  expect_near_rel(r.op_times[1][2].start, 2 * kUs);
  expect_near_rel(r.op_times[1][2].end, 2 * kUs);
  expect_near_rel(r.rank_time[0], 3 * kUs);
  expect_near_rel(r.rank_time[1], 4 * kUs);
  EXPECT_EQ(r.signals, 2u);
  EXPECT_EQ(r.hops, 1u);  // the message only
}

TEST(OneSidedSim, AWaitAfterItsDepsCompletesAtTheSignal) {
  // The handshake of a one-sided Program, N = 2: each rank raises flag 0 at
  // once, waits for the other's, then reads 1000 bytes of it: alpha for the
  // flag, then alpha + 1 us for the get: 3 us; then flag 2 after the read
  // and a wait for the other's: 4 us.
  auto t = make_topology("switch", 2, kLink, kLink);
  Progs p(2);
  for (int r = 0; r < 2; ++r) {
    p[r].signal(1 - r, 0);
    const OpIndex w = p[r].wait(1 - r, 0);
    const OpIndex g = p[r].get(1 - r, B::input(0, 1000), B::output(0, 1000), {w});
    p[r].signal(1 - r, 2, {g});
    p[r].wait(1 - r, 2);
  }
  const SimResult r = run(p.finish(), *t);
  for (int k = 0; k < 2; ++k) {
    const auto& ops = r.op_times[static_cast<size_t>(k)];
    expect_near_rel(ops[1].end, 1 * kUs);
    expect_near_rel(ops[2].start, 1 * kUs);
    expect_near_rel(ops[2].end, 3 * kUs);
    expect_near_rel(ops[4].end, 4 * kUs);
  }
  expect_near_rel(r.time, 4 * kUs);
}

TEST(OneSidedSim, MultiHopRoutesForwardGetsAndAddUpSignalAlphas) {
  // Ring of 8: rank 3 reads 1000 bytes of rank 0 over 0 -> 1 -> 2 -> 3, each
  // hop alpha + 1 us: 6 us. Rank 0's flag to rank 5 crosses 0 -> 7 -> 6 -> 5:
  // 3 alphas.
  auto t = make_topology("ring", 8, kLink, kLink);
  Progs p(8);
  p[3].get(0, B::input(0, 1000), B::output(0, 1000));
  p[0].signal(5, 1);
  p[5].wait(0, 1);
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.rank_time[3], 6 * kUs);
  expect_near_rel(r.rank_time[5], 3 * kUs);
  EXPECT_EQ(r.hops, 3u);
}

// kLink with a fitted flag_alpha of a quarter of alpha.
constexpr double kFlagAlpha = 0.25e-6;
LinkParams with_flag_alpha(double flag_alpha) {
  LinkParams l = kLink;
  l.flag_alpha = flag_alpha;
  return l;
}

TEST(OneSidedSim, AFittedFlagAlphaPricesSignalsAndGetsButNotMessages) {
  // flag_alpha 0.25 us, alpha 1 us. Rank 0 raises flag 0 at rank 1 at once
  // and sends rank 2 1000 bytes; rank 1 waits for the flag, then reads 1000
  // bytes of rank 0.
  //   the flag arrives at 0.25 us (not 1 us): the wait ends then;
  //   the get starts at 0.25 us and holds rank 1's receive port from 0.5
  //   (its flag_alpha) to 1.5 us;
  //   the message still waits alpha: 1 to 2 us.
  auto t = make_topology("switch", 3, with_flag_alpha(kFlagAlpha), kLink);
  Progs p(3);
  p[0].signal(1, 0);
  p[0].send(2, B::input(0, 1000));
  const OpIndex w = p[1].wait(0, 0);
  p[1].get(0, B::input(0, 1000), B::output(0, 1000), {w});
  p[2].recv(0, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.op_times[1][0].end, 0.25 * kUs);
  expect_near_rel(r.op_times[1][1].start, 0.25 * kUs);
  expect_near_rel(r.op_times[1][1].end, 1.5 * kUs);
  expect_near_rel(r.rank_time[2], 2 * kUs);
  expect_near_rel(r.time, 2 * kUs);
}

TEST(OneSidedSim, AGetIsFlagAlphaPlusItsBytesAtTheCurvesRate) {
  // A curve of 2 ns/B replaces 1/beta: a get of 1000 bytes is 0.25 + 2 us,
  // a get_reduce of 2000 bytes (gamma 1 ns/B) 0.25 + 4 + 2 us.
  LinkParams l = with_flag_alpha(kFlagAlpha);
  l.curve = {{{1000, 2e-9}}};
  auto t = make_topology("switch", 2, l, l);
  {
    Progs p(2);
    p[1].get(0, B::input(0, 1000), B::output(0, 1000));
    expect_near_rel(run(p.finish(), *t).time, 2.25 * kUs);
  }
  {
    Progs p(2);
    p[0].get_reduce(1, B::input(0, 2000), B::output(0, 2000), B::output(0, 2000));
    expect_near_rel(run(p.finish(), *t, SimOptions{1, 1e-9, 1}).time, 6.25 * kUs);
  }
  // Two gets at once on one receive port: the second waits for the first's
  // bytes, not for another flag_alpha: 0.25 to 2.25, then 2.25 to 4.25 us.
  Progs p(3);
  p[0].get(1, B::input(0, 1000), B::output(0, 1000));
  p[0].get(2, B::input(0, 1000), B::output(1000, 1000));
  auto three = make_topology("switch", 3, l, l);
  const SimResult r = run(p.finish(), *three);
  expect_near_rel(r.op_times[0][0].end, 2.25 * kUs);
  expect_near_rel(r.op_times[0][1].end, 4.25 * kUs);
}

TEST(OneSidedSim, FlagAlphaZeroIsFittedAndANegativeOneIsNot) {
  // The handshake of AWaitAfterItsDepsCompletesAtTheSignal: flag, get of
  // 1000 bytes, flag. flag_alpha 0: 0 + 1 + 0 = 1 us. Negative (not fitted)
  // or NaN: alpha stands in, 4 us as there.
  for (double fa : {0.0, -1.0, std::nan("")}) {
    auto t = make_topology("switch", 2, with_flag_alpha(fa), kLink);
    Progs p(2);
    for (int r = 0; r < 2; ++r) {
      p[r].signal(1 - r, 0);
      const OpIndex w = p[r].wait(1 - r, 0);
      const OpIndex g = p[r].get(1 - r, B::input(0, 1000), B::output(0, 1000), {w});
      p[r].signal(1 - r, 2, {g});
      p[r].wait(1 - r, 2);
    }
    expect_near_rel(run(p.finish(), *t).time, fa == 0 ? 1 * kUs : 4 * kUs);
  }
}

TEST(OneSidedSim, MultiHopRoutesTakeFlagAlphaPerHop) {
  // Ring of 8 as in MultiHopRoutesForwardGetsAndAddUpSignalAlphas, with
  // flag_alpha 0.25 us: the get's three hops take 0.25 + 1 us each, 3.75 us;
  // the flag's three hops 0.75 us. A message keeps alpha per hop: rank 4's
  // 1000 bytes to rank 6 (4 -> 5 -> 6, links no one else uses) take
  // 2 (1 + 1) = 4 us.
  auto t = make_topology("ring", 8, with_flag_alpha(kFlagAlpha), kLink);
  Progs p(8);
  p[3].get(0, B::input(0, 1000), B::output(0, 1000));
  p[0].signal(5, 1);
  p[5].wait(0, 1);
  p[4].send(6, B::input(0, 1000));
  p[6].recv(4, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.rank_time[3], 3.75 * kUs);
  expect_near_rel(r.rank_time[5], 0.75 * kUs);
  expect_near_rel(r.rank_time[6], 4 * kUs);
}

TEST(OneSidedSim, BadOneSidedProgramsAreErrors) {
  auto t = make_topology("switch", 2, kLink, kLink);
  {
    Progs p(2);
    p[1].wait(0, 0);  // rank 0 raises no flag
    EXPECT_NE(error_of(p.finish(), *t, ErrorCode::invalid_argument).find("no matching signal"),
              std::string::npos);
  }
  {
    Progs p(2);
    p[0].signal(1, 0);
    p[0].signal(1, 1);
    p[1].wait(0, 0);
    p[1].wait(0, 0);  // one signal, two waits
    EXPECT_NE(error_of(p.finish(), *t, ErrorCode::invalid_argument).find("already waits"),
              std::string::npos);
  }
  {
    Progs p(2);
    p[0].signal(1, 3);
    p[0].signal(1, 3);
    p[1].wait(0, 3);
    EXPECT_NE(error_of(p.finish(), *t, ErrorCode::invalid_argument).find("already raised"),
              std::string::npos);
  }
  {
    Progs p(2);
    p[0].signal(1, kMaxFlags);
    p[1].wait(0, kMaxFlags);
    EXPECT_NE(error_of(p.finish(), *t, ErrorCode::invalid_argument).find("flag 8"),
              std::string::npos);
  }
  for (int peer : {0, 2, -1}) {
    Progs p(2);
    p[0].get(peer, B::input(0, 10), B::output(0, 10));
    EXPECT_NE(error_of(p.finish(), *t, ErrorCode::invalid_argument).find("or itself"),
              std::string::npos)
        << peer;
  }
  {
    // Each rank waits for the other's flag before raising its own.
    Progs p(2);
    for (int r = 0; r < 2; ++r) {
      const OpIndex w = p[r].wait(1 - r, 0);
      p[r].signal(1 - r, 0, {w});
    }
    const std::string e = error_of(p.finish(), *t, ErrorCode::internal);
    EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
    EXPECT_NE(e.find("its signal never arrived"), std::string::npos) << e;
  }
  {
    // A flag nobody waits for is no error: it costs nothing.
    Progs p(2);
    p[0].signal(1, 0);
    const SimResult r = run(p.finish(), *t);
    EXPECT_EQ(r.signals, 1u);
    EXPECT_DOUBLE_EQ(r.time, 0);
  }
}

TEST(OneSidedSim, OnAHalfDuplexClassAGetRunsOnTheReadersEngine) {
  // Every class takes turns: rank 0's get of 1000 bytes from rank 1 holds
  // rank 0's engine from 1 to 2 us, so rank 0's send to rank 2 (requested at
  // 0) runs from 2 to 3 us. Rank 1's engine is free: its send to rank 3 runs
  // from 1 to 2 us.
  LinkParams shm("shm", kAlpha, kBeta);
  shm.half_duplex = true;
  auto t = make_topology("switch", 4, shm, shm);
  Progs p(4);
  p[0].get(1, B::input(0, 1000), B::output(0, 1000));
  p[0].send(2, B::input(0, 1000));
  p[1].send(3, B::input(0, 1000));
  p[2].recv(0, B::output(0, 1000));
  p[3].recv(1, B::output(0, 1000));
  const SimResult r = run(p.finish(), *t);
  expect_near_rel(r.op_times[0][0].end, 2 * kUs);
  expect_near_rel(r.rank_time[2], 3 * kUs);
  expect_near_rel(r.rank_time[3], 2 * kUs);
}

TEST(OneSidedSim, AGetBooksACopysMemoryTrafficOnTheHost) {
  // One host of 1 GB/s memory; the class moves 4 bytes of memory per byte.
  // A message of 1000 bytes books 4000 bytes (4 us) from alpha: 5 us. A get
  // reads the peer's memory and writes the reader's, 2000 bytes: 3 us.
  LinkParams shm("shm", kAlpha, kBeta);
  shm.mem_traffic = 4;
  auto t = make_topology("switch", 2, shm, shm, HostParams{1e9, 0});
  ASSERT_TRUE(t->has_hosts());
  {
    Progs p(2);
    p[0].send(1, B::input(0, 1000));
    p[1].recv(0, B::output(0, 1000));
    expect_near_rel(run(p.finish(), *t).time, 5 * kUs);
  }
  {
    Progs p(2);
    p[1].get(0, B::input(0, 1000), B::output(0, 1000));
    expect_near_rel(run(p.finish(), *t).time, 3 * kUs);
  }
  {
    // Two gets at once book the memory one after the other: 1 to 3 us, then
    // 3 to 5 us.
    Progs p(2);
    p[0].get(1, B::input(0, 1000), B::output(0, 1000));
    p[1].get(0, B::input(0, 1000), B::output(0, 1000));
    const SimResult r = run(p.finish(), *t);
    expect_near_rel(r.rank_time[0], 3 * kUs);
    expect_near_rel(r.rank_time[1], 5 * kUs);
  }
}

TEST(OneSidedSim, AGetThatReducesPaysTheKernelsExcessOverACopy) {
  // Copy 1 ns/B, kernel 3 ns/B: after the 1000 bytes arrive (2 us), the
  // reduction costs (3 - 1) ns/B x 1000 B = 2 us on the reader's engine.
  const RateCurve copy{{{1000, 1e-9}}};
  const RateCurve kernel{{{1000, 3e-9}}};
  auto t = make_topology("switch", 2, kLink, kLink);
  Progs p(2);
  p[0].get_reduce(1, B::input(0, 1000), B::output(0, 1000), B::output(0, 1000));
  SimOptions o;
  o.copy = &copy;
  o.kernel = &kernel;
  expect_near_rel(run(p.finish(), *t, o).time, 4 * kUs);
}

TEST(OneSidedSim, WhichTopologiesPutEveryRankOnOneHost) {
  EXPECT_TRUE(make_topology("switch", 8, kLink, kLink)->one_host());
  EXPECT_TRUE(make_topology("ring", 8, kLink, kLink)->one_host());
  EXPECT_TRUE(make_topology("hypercube", 8, kLink, kLink)->one_host());
  EXPECT_TRUE(make_topology("switch", 8, kLink, kLink, HostParams{1e10, 4})->one_host());
  EXPECT_TRUE(make_topology("hier:8", 8, kLink, kLink)->one_host());
  EXPECT_FALSE(make_topology("hier:4", 8, kLink, kLink)->one_host());
  EXPECT_FALSE(make_topology("hier:4", 8, kLink, kLink, HostParams{1e10, 4})->one_host());
  const char* links = R"("links": [{"from": 0, "to": 1, "alpha": "1us", "beta": "1GB/s"},
                                   {"from": 1, "to": 2, "alpha": "1us", "beta": "1GB/s"}])";
  EXPECT_FALSE(
      topology_from_json(std::string("{\"nodes\": 3, ") + links + "}", "bare", 3)->one_host());
  EXPECT_FALSE(topology_from_json(
                   std::string("{\"nodes\": 3, \"hosts\": [[0, 1], [2]], ") + links + "}", "two", 3)
                   ->one_host());
  EXPECT_TRUE(topology_from_json(
                  std::string("{\"nodes\": 3, \"hosts\": [[0, 1, 2]], ") + links + "}", "one", 3)
                  ->one_host());
  // The machine model's own grouping: two hosts of a switch are two hosts.
  auto t = make_topology("switch", 4, kLink, kLink);
  t->set_hosts({0, 0, 1, 1}, {HostParams{}, HostParams{}});
  EXPECT_FALSE(t->one_host());
}

}  // namespace
}  // namespace chorus
