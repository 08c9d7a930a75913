// The simulator reading each rank's Program when it reaches it
// (ProgramSource, algorithms/simulate.h): every registered algorithm gives
// the same Programs and the same run, op for op, as with all N Programs
// built first; each rank is asked for once, in order; and bad Programs are
// named as the matching module names them.
#include "algorithms/simulate.h"

#include "algorithms/algorithm.h"
#include "core/check.h"
#include "schedule/matching.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus {
namespace {

using B = ProgramBuilder;

const LinkParams kLink{"link", 2e-6, 25e9};
const LinkParams kInter{"inter", 10e-6, 5e9};

void expect_same_program(const Program& got, const Program& want, const std::string& what) {
  EXPECT_EQ(got.input_count, want.input_count) << what;
  EXPECT_EQ(got.output_count, want.output_count) << what;
  EXPECT_EQ(got.scratch_count, want.scratch_count) << what;
  EXPECT_EQ(got.window_count, want.window_count) << what;
  EXPECT_EQ(got.window_input, want.window_input) << what;
  EXPECT_EQ(got.window_output, want.window_output) << what;
  ASSERT_EQ(got.ops.size(), want.ops.size()) << what;
  for (size_t i = 0; i < got.ops.size(); ++i) {
    EXPECT_EQ(describe(got.ops[i]), describe(want.ops[i])) << what << " op " << i;
    EXPECT_EQ(got.ops[i].deps, want.ops[i].deps) << what << " op " << i;
  }
}

// Every field of the two runs, and every op's start and end, bit for bit.
void expect_same_run(const SimResult& got, const SimResult& want, const std::string& what) {
  EXPECT_EQ(got.time, want.time) << what;
  EXPECT_EQ(got.rank_time, want.rank_time) << what;
  EXPECT_EQ(got.ops, want.ops) << what;
  EXPECT_EQ(got.messages, want.messages) << what;
  EXPECT_EQ(got.gets, want.gets) << what;
  EXPECT_EQ(got.signals, want.signals) << what;
  EXPECT_EQ(got.hops, want.hops) << what;
  EXPECT_EQ(got.events, want.events) << what;
  EXPECT_EQ(got.bytes, want.bytes) << what;
  EXPECT_EQ(got.max_port_busy, want.max_port_busy) << what;
  EXPECT_EQ(got.max_link_busy, want.max_link_busy) << what;
  ASSERT_EQ(got.op_times.size(), want.op_times.size()) << what;
  for (size_t r = 0; r < got.op_times.size(); ++r) {
    ASSERT_EQ(got.op_times[r].size(), want.op_times[r].size()) << what << " rank " << r;
    for (size_t i = 0; i < got.op_times[r].size(); ++i) {
      EXPECT_EQ(got.op_times[r][i].start, want.op_times[r][i].start) << what;
      EXPECT_EQ(got.op_times[r][i].end, want.op_times[r][i].end) << what;
    }
  }
}

// A source over built Programs that records which ranks it was asked for.
class RecordingSource final : public ProgramSource {
 public:
  explicit RecordingSource(std::vector<Program> programs) : programs_(std::move(programs)) {}
  int nranks() const override { return static_cast<int>(programs_.size()); }
  const Program& program(int rank) override {
    asked.push_back(rank);
    return programs_[static_cast<size_t>(rank)];
  }
  std::vector<int> asked;

 private:
  std::vector<Program> programs_;
};

TEST(ProgramSource, EveryAlgorithmBuiltRankByRankIsBuiltAsAllAtOnce) {
  size_t compared = 0;
  for (const char* topology : {"switch", "hier:3", "ring"})
    for (int n : {2, 3, 4, 6, 8, 13}) {
      const auto topo = make_topology(topology, n, kLink, kInter);
      for (const Algorithm& a : all_algorithms()) {
        for (size_t count : {size_t{0}, size_t{7}, size_t{1000}}) {
          CollectiveSpec spec{a.collective, n, 0, count, 4, n > 2 ? 1 : 0};
          spec.windows = topo->one_host();
          if (std::vector<int> hosts = topo->rank_hosts(); !hosts.empty())
            spec.host_of = std::make_shared<const std::vector<int>>(std::move(hosts));
          if (!supported_everywhere(a, spec)) continue;
          const std::string what = str_cat(to_string(a.collective), "(", a.name, ") N=", n,
                                           " count=", count, " on ", topology);
          const std::vector<Program> all = build_all(a, spec);
          AlgorithmPrograms lazy(a, spec);
          for (int r = n; r-- > 0;)  // in any order
            expect_same_program(lazy.program(r), all[static_cast<size_t>(r)],
                                str_cat(what, " rank ", r));
          SimOptions o{1, 1e-10, 4};
          o.record_ops = true;
          expect_same_run(simulate_algorithm(a, spec, *topo, o), simulate(all, *topo, o), what);
          ++compared;
        }
      }
    }
  EXPECT_GT(compared, 500u);
}

// A rank's shape, renamed, is its own Program but for the regions; where
// the algorithm declares classes, the whole run is the same as with every
// Program built.
TEST(ProgramSource, ARanksClassProgramRenamedIsItsOwnButForRegions) {
  size_t classed = 0;
  for (const Algorithm& a : all_algorithms()) {
    if (a.rank_class == nullptr) continue;
    for (int n : {2, 3, 4, 5, 8, 12, 16, 64})
      for (size_t count : {size_t{0}, size_t{7}, size_t{64}, size_t{960}, size_t{4096}})
        for (bool average : {false, true}) {
          CollectiveSpec spec{a.collective, n, 0, count, 4, 0};
          spec.average = average && a.collective != Collective::allgather;
          if (!supported_everywhere(a, spec)) continue;
          const std::string what =
              str_cat(to_string(a.collective), "(", a.name, ") N=", n, " count=", count);
          const std::vector<Program> all = build_all(a, spec);
          AlgorithmPrograms lazy(a, spec);
          for (int r = 0; r < n; ++r) {
            PeerRename rename;
            const Program& shape = lazy.shape(r, rename);
            const Program& own = all[static_cast<size_t>(r)];
            if (rename.how != PeerRename::How::same) ++classed;
            ASSERT_EQ(shape.ops.size(), own.ops.size()) << what << " rank " << r;
            for (size_t i = 0; i < own.ops.size(); ++i) {
              const Op& x = shape.ops[i];
              const Op& y = own.ops[i];
              const std::string at = str_cat(what, " rank ", r, " op ", i);
              EXPECT_EQ(x.kind, y.kind) << at;
              EXPECT_EQ(op_count(x), op_count(y)) << at;
              EXPECT_EQ(x.deps, y.deps) << at;
              EXPECT_EQ(x.step, y.step) << at;
              EXPECT_EQ(x.flag, y.flag) << at;
              EXPECT_EQ(x.peer < 0 ? x.peer : rename(x.peer), y.peer) << at;
            }
          }
          const auto topo = make_topology("switch", n, kLink, kLink);
          SimOptions o{1, 1e-10, 4};
          o.record_ops = true;
          expect_same_run(simulate_algorithm(a, spec, *topo, o), simulate(all, *topo, o), what);
        }
  }
  // Ring at every N with counts a multiple of N, halving-doubling at N = 2^k.
  EXPECT_GT(classed, 1000u);
}

// A source that says the first `shared` ranks have one shape (true of the
// ring: the same kinds, counts and deps at every rank).
class SharedShapes final : public ProgramSource {
 public:
  SharedShapes(std::vector<Program> programs, int shared)
      : programs_(std::move(programs)), shared_(shared) {}
  int nranks() const override { return static_cast<int>(programs_.size()); }
  const Program& program(int rank) override { return programs_[static_cast<size_t>(rank)]; }
  const Program& shape(int rank, PeerRename& rename) override {
    rename = PeerRename{};
    rename.shape = rank < shared_ ? 7 : -1;
    return program(rank);
  }

 private:
  std::vector<Program> programs_;
  int shared_;
};

// Ranks that share one shape keep one copy of their deps; a rank with a
// shape of its own, however late, changes nothing in the run.
TEST(ProgramSource, SharedShapesGiveTheSameRunAsOwnOnes) {
  const Algorithm& ring = *find_algorithm(Collective::allreduce, "ring");
  const int n = 9;
  const std::vector<Program> all = build_all(ring, {Collective::allreduce, n, 0, 900, 4, 0});
  const auto topo = make_topology("switch", n, kLink, kLink);
  SimOptions o{1, 1e-10, 4};
  o.record_ops = true;
  const SimResult want = simulate(all, *topo, o);
  for (int shared : {0, 1, 2, 5, n - 1, n}) {
    SharedShapes source(all, shared);
    expect_same_run(simulate(source, *topo, o), want, str_cat("shared by ", shared, " ranks"));
  }
}

TEST(ProgramSource, EachRankIsAskedForOnceInOrder) {
  const Algorithm& ring = *find_algorithm(Collective::allreduce, "ring");
  RecordingSource source(build_all(ring, {Collective::allreduce, 16, 0, 1 << 12, 4, 0}));
  const auto topo = make_topology("switch", 16, kLink, kLink);
  simulate(source, *topo, SimOptions{1, 0, 4});
  std::vector<int> in_order(16);
  for (int r = 0; r < 16; ++r) in_order[static_cast<size_t>(r)] = r;
  EXPECT_EQ(source.asked, in_order);
}

// What simulate throws for these Programs.
std::string error_of(std::vector<Program> programs) {
  const auto topo = make_topology("switch", static_cast<int>(programs.size()), kLink, kLink);
  RecordingSource source(std::move(programs));
  try {
    simulate(source, *topo, SimOptions{});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

// The matching module's first problem, as the simulator words it.
std::string matching_error(const std::vector<Program>& programs) {
  const FlatMatchResult m = match_programs_flat(programs);
  EXPECT_TRUE(m.error.has_value());
  return m.error ? "simulate: " + m.error->message : std::string();
}

std::vector<Program> finish(std::vector<ProgramBuilder>& builders) {
  std::vector<Program> out;
  for (auto& b : builders) out.push_back(std::move(b).finish());
  return out;
}

TEST(ProgramSource, BadProgramsAreNamedAsTheMatchingModuleNamesThem) {
  auto ranks = [](int n) {
    return std::vector<ProgramBuilder>(static_cast<size_t>(n),
                                       ProgramBuilder(BufferCounts{64, 64}));
  };
  {  // counts differ on the second of three messages
    auto b = ranks(2);
    for (size_t k : {size_t{4}, size_t{5}, size_t{6}}) b[0].send(1, B::input(0, k));
    for (size_t k : {size_t{4}, size_t{7}, size_t{6}}) b[1].recv(0, B::output(0, k));
    const auto p = finish(b);
    const std::string e = error_of(p);
    EXPECT_EQ(e, matching_error(p));
    EXPECT_NE(e.find("send #1 from rank 0 to rank 1"), std::string::npos) << e;
  }
  {  // a send without a receive, a receive without a send
    auto b = ranks(3);
    b[0].send(1, B::input(0, 4));
    b[0].send(1, B::input(0, 4));
    b[1].recv(0, B::output(0, 4));
    b[2].recv(1, B::output(0, 4));
    const auto p = finish(b);
    EXPECT_EQ(error_of(p), matching_error(p));
  }
  {  // a receive whose sender sends nothing at all
    auto b = ranks(3);
    b[2].recv(0, B::output(0, 4));
    const auto p = finish(b);
    EXPECT_EQ(error_of(p), matching_error(p));
  }
  {  // a peer out of range
    auto b = ranks(2);
    b[1].send(5, B::input(0, 4));
    const auto p = finish(b);
    EXPECT_EQ(error_of(p), matching_error(p));
  }
  {  // a bad dep at rank 0 and a mismatch at rank 2: the mismatch is named first
    auto b = ranks(3);
    b[0].copy(B::input(0, 4), B::output(0, 4), {3});
    b[1].send(2, B::input(0, 4));
    b[2].recv(1, B::output(0, 5));
    const auto p = finish(b);
    EXPECT_EQ(error_of(p), matching_error(p));
  }
  {  // the bad dep alone
    auto b = ranks(2);
    b[0].copy(B::input(0, 4), B::output(0, 4), {3});
    const std::string e = error_of(finish(b));
    EXPECT_NE(e.find("depends on op 3, which is not an earlier op"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace chorus
