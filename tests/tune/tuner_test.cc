// Tuner tests: the pick is the least predicted time, all ranks agree, the
// per-call option overrides it, an unknown name is an error listing the known
// ones, the log names every candidate once per size class, the tuning file
// round-trips, calibration fits alpha and beta and agrees on the maximum.
#include "tune/tuner.h"
#include "transport/inproc/inproc_transport.h"
#include "tune/calibration.h"
#include "tune/selector.h"

#include "engine/communicator_impl.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace chorus {
namespace {

CollectiveSpec spec_of(Collective c, int n, size_t count, int rank = 0) {
  return CollectiveSpec{c, n, rank, count, 4, 0};
}

// The seed's cost table, worked by hand for N = 8 and one port:
//   tiny messages (4 B, alpha 10 us): the latency term decides. AllReduce:
//     recursive_doubling 3 alpha; halving_doubling and reduce_broadcast
//     6 alpha; ring 14 alpha. Broadcast: binomial 3 alpha; chain 7 alpha.
//     AllGather: recursive_doubling and bruck 3 alpha (a tie: the earlier
//     registered, recursive_doubling).
//   64 MiB (alpha 1 us, beta 1 GB/s): the bandwidth term decides. AllReduce:
//     ring and halving_doubling 2 (7/8) M/beta = 117 ms (within the margin: the
//     earlier, ring), recursive_doubling 3 M/beta, reduce_broadcast 6 M/beta.
//     Broadcast: pipelined_chain M/beta + 6 s/beta = 67 ms against binomial
//     3 M/beta = 201 ms.
TEST(Tuner, PicksBySeedsCostTable) {
  const int n = 8;
  Tuner tiny(n, CostParams{10e-6, 1e9, 0, 1});
  EXPECT_EQ(tiny.pick(spec_of(Collective::allreduce, n, 1))->name, "recursive_doubling");
  EXPECT_EQ(tiny.pick(spec_of(Collective::broadcast, n, 1))->name, "binomial");
  EXPECT_EQ(tiny.pick(spec_of(Collective::allgather, n, 1))->name, "recursive_doubling");
  Tuner large(n, CostParams{1e-6, 1e9, 0, 1});
  const size_t floats = (size_t{64} << 20) / 4;
  EXPECT_EQ(large.pick(spec_of(Collective::allreduce, n, floats))->name, "ring");
  EXPECT_EQ(large.pick(spec_of(Collective::broadcast, n, floats))->name, "pipelined_chain");
}

TEST(Tuner, PicksOnlyAmongTheCandidatesItIsGiven) {
  const int n = 8;
  Tuner tuner(n, CostParams{10e-6, 1e9, 0, 1});
  const CollectiveSpec spec = spec_of(Collective::allreduce, n, 1);
  // Given only ring (14 alpha) and halving_doubling (6 alpha), the tuner
  // takes halving_doubling, though recursive_doubling (3 alpha) would win.
  const Algorithm* hd = find_algorithm(Collective::allreduce, "halving_doubling");
  const Algorithm* ring = find_algorithm(Collective::allreduce, "ring");
  const Algorithm* given[] = {ring, hd};
  EXPECT_EQ(tuner.pick(spec, given), hd);
  EXPECT_EQ(tuner.pick(spec, std::span<const Algorithm* const>{}), nullptr);
}

// At N = 2 the bandwidth algorithms are predicted within a few percent of
// each other for large messages; the tuner keeps the first, ring, instead of
// the segmented tree (predicted about 3% faster, slower in practice).
TEST(Tuner, ANearTieKeepsTheEarlierCandidate) {
  Tuner tuner(2, CostParams{7e-6, 4.6e8, 1e-10, 1});
  const CollectiveSpec spec = spec_of(Collective::allreduce, 2, size_t{1} << 18);
  const Algorithm* ring = find_algorithm(Collective::allreduce, "ring");
  const Algorithm* tree = find_algorithm(Collective::allreduce, "double_binary_tree");
  ASSERT_NE(ring, nullptr);
  ASSERT_NE(tree, nullptr);
  const double t_ring = tuner.predict(*ring, spec), t_tree = tuner.predict(*tree, spec);
  ASSERT_LT(t_tree, t_ring);                           // the tree is predicted faster ...
  ASSERT_GT(t_tree, t_ring * (1 - kTunerPickMargin));  // ... but by less than the margin
  EXPECT_EQ(tuner.pick(spec)->name, "ring");
}

TEST(Tuner, AlltoallCrossesOverFromBruckToPairwise) {
  const int n = 16;
  // Latency-bound: ceil(log2 N) steps beat N-1.
  Tuner slow_start(n, CostParams{100e-6, 25e9, 0, 1});
  EXPECT_EQ(slow_start.pick(spec_of(Collective::alltoall, n, 1))->name, "bruck");
  // Bandwidth-bound: pairwise moves each block once, Bruck about log2(N)/2 times.
  Tuner fast_start(n, CostParams{0, 1e9, 0, 1});
  EXPECT_EQ(fast_start.pick(spec_of(Collective::alltoall, n, 1 << 16))->name, "pairwise");
}

TEST(Tuner, LogsEveryCandidateOncePerSizeClass) {
  Tuner tuner(16, CostParams{100e-6, 25e9, 0, 1});
  std::vector<std::string> lines;
  tuner.set_log([&](const std::string& s) { lines.push_back(s); });
  tuner.pick(spec_of(Collective::alltoall, 16, 1));
  tuner.pick(spec_of(Collective::alltoall, 16, 1));  // cached
  tuner.pick(spec_of(Collective::alltoall, 16, 1 << 16));
  tuner.pick(spec_of(Collective::alltoall, 16, (1 << 16) - 1));  // same size class
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& l : lines) {
    EXPECT_NE(l.find("pairwise="), std::string::npos) << l;
    EXPECT_NE(l.find("bruck="), std::string::npos) << l;
    EXPECT_NE(l.find(" -> "), std::string::npos) << l;
  }
  EXPECT_NE(lines[0].find("-> bruck"), std::string::npos) << lines[0];
}

// A tuner that prefers Bruck (large alpha), installed on in-process ranks.
void install_bruck_leaning_tuner(Communicator& comm) {
  detail::impl_of(comm).set_selector(std::make_unique<Selector>(
      detail::impl_of(comm).config(),
      std::make_unique<Tuner>(comm.size(), CostParams{100e-6, 25e9, 0, 1})));
}

TEST(Tuner, CallOptionOverridesThePickAndUnknownNamesAreErrors) {
  testing::run_ranks(4, [](Communicator& comm) {
    install_bruck_leaning_tuner(comm);
    const CollectiveSpec spec = spec_of(Collective::alltoall, 4, 1, comm.rank());
    EXPECT_EQ(detail::impl_of(comm).choose(spec, {}).name, "bruck");
    CallOptions named;
    named.algorithm = "pairwise";
    EXPECT_EQ(detail::impl_of(comm).choose(spec, named).name, "pairwise");
    CallOptions unknown;
    unknown.algorithm = "no_such_algorithm";
    try {
      detail::impl_of(comm).choose(spec, unknown);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      const std::string what = e.what();
      EXPECT_NE(what.find("no_such_algorithm"), std::string::npos) << what;
      EXPECT_NE(what.find("known: pairwise, bruck"), std::string::npos) << what;
    }
  });
}

TEST(Tuner, EveryRankPicksTheSame) {
  const int n = 5;
  std::mutex mu;
  std::vector<std::vector<std::string>> picks(n);
  testing::run_ranks(n, [&](Communicator& comm) {
    install_bruck_leaning_tuner(comm);
    std::vector<std::string> mine;
    for (int ci = 0; ci < kCollectiveCount; ++ci)
      for (size_t count : {size_t{1}, size_t{4096}, size_t{1} << 18}) {
        const auto c = static_cast<Collective>(ci);
        mine.emplace_back(detail::impl_of(comm).choose(spec_of(c, n, count, comm.rank()), {}).name);
      }
    std::lock_guard lock(mu);
    picks[static_cast<size_t>(comm.rank())] = mine;
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(picks[static_cast<size_t>(r)], picks[0]) << "rank " << r;
}

TEST(Tuner, InstalledByDefaultAndCollectivesStillCorrect) {
  testing::run_ranks(3, [](Communicator& comm) {
    std::vector<int32_t> in(3 * 5), out(3 * 5);
    for (size_t i = 0; i < in.size(); ++i) in[i] = comm.rank() * 100 + static_cast<int>(i);
    // No algorithm named: the default tuner picks, and the result is right.
    comm.submit(Call::alltoall(in.data(), out.data(), 5, DataType::int32)).wait();
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 5; ++k)
        EXPECT_EQ(out[static_cast<size_t>(j * 5 + k)], j * 100 + comm.rank() * 5 + k);
  });
}

TEST(TuningFile, RoundTripsAndMerges) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("chorus_tuning_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tuning.json").string();
  TuningTable a;
  a.gamma = 2e-10;
  a.links["shm"] = {"shm", 1.5e-6, 8e9};
  write_tuning_file(path, a);
  TuningTable b;
  b.ports = 2;
  b.links["tcp"] = {"tcp", 30e-6, 1.2e9};
  write_tuning_file(path, b);  // keeps shm
  const TuningTable got = read_tuning_file(path);
  EXPECT_EQ(got.ports, 2);
  EXPECT_DOUBLE_EQ(got.gamma, kDefaultGamma);
  ASSERT_EQ(got.links.size(), 2u);
  EXPECT_DOUBLE_EQ(got.links.at("shm").alpha, 1.5e-6);
  EXPECT_DOUBLE_EQ(got.links.at("shm").beta, 8e9);
  EXPECT_DOUBLE_EQ(got.links.at("tcp").alpha, 30e-6);
  std::filesystem::remove_all(dir);
}

TEST(TuningFile, BadFilesAreClearErrors) {
  EXPECT_THROW(read_tuning_file("/nonexistent/chorus/tuning.json"), Error);
  for (
      const char* bad :
      {"{", "[]", R"({"format": "x", "version": 1, "links": {}})",
       R"({"format": "chorus-tuning", "version": 3, "links": {}})",
       R"({"format": "chorus-tuning", "version": 1})",
       R"({"format": "chorus-tuning", "version": 1, "links": {"shm": {"alpha_s": 1}}})",
       R"({"format": "chorus-tuning", "version": 1, "links": {"shm": {"alpha_s": 1, "beta_Bps": 0}}})",
       R"({"format": "chorus-tuning", "version": 1, "ports": 3, "links": {}})"}) {
    try {
      tuning_from_json(bad, "test file");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("test file"), std::string::npos);
    }
  }
}

// A tuning file of one rule that parses, with the value of `key` (a scalar
// of the file or of its rule; every key occurs once) replaced by `value`.
std::string one_rule_file_with(const std::string& key, const std::string& value) {
  std::string text = R"({"format": "chorus-tuning", "version": 1, "ports": 1, "links": {}, )"
                     R"("rules": [{"collective": "allreduce", "link": "shm", "ranks": 2, )"
                     R"("min_bytes": 0, "algorithm": "ring"}]})";
  const size_t at = text.find("\"" + key + "\": ") + key.size() + 4;
  return text.replace(at, text.find_first_of(",}", at) - at, value);
}

TEST(TuningFile, WrongTypesAndNumbersBeyondTheirTypesAreErrors) {
  EXPECT_NO_THROW(tuning_from_json(one_rule_file_with("ranks", "4"), "test file"));
  const std::pair<std::string, std::string> bad[] = {
      {"format", "5"},      {"version", "\"1\""}, {"version", "1e300"},  {"ports", "1e300"},
      {"collective", "36"}, {"link", "[]"},       {"algorithm", "null"}, {"ranks", "1e10"},
      {"min_bytes", "-1"},  {"min_bytes", "1e20"}};
  for (const auto& [key, value] : bad) {
    const std::string text = one_rule_file_with(key, value);
    try {
      tuning_from_json(text, "test file");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("test file"), std::string::npos);
    }
  }
}

TEST(Calibration, FitRecoversAlphaAndBetaFromTwoSizes) {
  // Half round trips of an exact alpha-beta link: alpha + bytes / beta.
  const double alpha = 3e-6, beta = 5e9;
  const size_t small = 8, large = 1 << 20;
  const LinkParams p = fit_link("shm", alpha + small / beta, alpha + large / beta, small, large);
  EXPECT_EQ(p.name, "shm");
  EXPECT_NEAR(p.alpha, alpha, 1e-15);
  EXPECT_NEAR(p.beta, beta, beta * 1e-9);
}

TEST(Calibration, FitSurvivesALargeMessageNoSlowerThanASmallOne) {
  // Timer noise: the large message looks faster. Then all of the small
  // message's time is charged to bytes: 1/beta = 10 us / 1 MiB, alpha 0.
  const LinkParams p = fit_link("tcp", 10e-6, 9e-6, 8, 1 << 20);
  EXPECT_NEAR(p.beta, (1 << 20) / 10e-6, 1e-3);
  EXPECT_GE(p.alpha, 0);
  EXPECT_LT(p.alpha, 10e-6);
}

TEST(Calibration, AgreeMaxGivesEveryRankTheElementwiseMaximum) {
  const int n = 5;
  auto world = make_inproc_world(n);
  std::vector<std::vector<double>> got(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto t = make_inproc_transport(world, r, std::chrono::microseconds{50});
      // Rank r's values: the first grows with r, the second shrinks, the
      // third peaks at rank 2.
      std::vector<double> v = {1.5 * r, 10.0 - r, r == 2 ? 7.0 : -1.0};
      agree_max(*t, v, Clock::now() + std::chrono::seconds(30));
      got[static_cast<size_t>(r)] = v;
    });
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(got[static_cast<size_t>(r)], (std::vector<double>{6.0, 10.0, 7.0})) << "rank " << r;
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// CHORUS_TUNING_FILE reaches the tuner of every communicator, and
// CHORUS_DEBUG=TUNING prints its candidates with the file's parameters.
TEST(TuningFile, UsedAtCreationAndLogged) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("chorus_tuning_env_" + std::to_string(::getpid()) + ".json"))
                               .string();
  TuningTable t;
  t.links["inproc"] = {"inproc", 7e-5, 3e9};
  write_tuning_file(path, t);
  ::setenv("CHORUS_TUNING_FILE", path.c_str(), 1);
  ::setenv("CHORUS_DEBUG", "TUNING", 1);
  ::testing::internal::CaptureStderr();
  testing::run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(4, 1.0f);
    comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    EXPECT_EQ(v[0], 2.0f);
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("tuning allreduce N=2 16 B (alpha 7e-05 s, beta 3e+09 B/s"), std::string::npos)
      << log;
  EXPECT_NE(log.find("ring="), std::string::npos) << log;
  // A missing file is a clear error at creation.
  ::setenv("CHORUS_TUNING_FILE", "/nonexistent/chorus-tuning.json", 1);
  try {
    testing::run_ranks(2, [](Communicator&) {});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/chorus-tuning.json"), std::string::npos);
  }
  ::unsetenv("CHORUS_TUNING_FILE");
  ::unsetenv("CHORUS_DEBUG");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chorus
