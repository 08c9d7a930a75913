// The fitted model in tuning files (version 2) and the calibration cache:
// written, read, kept apart by transport and rank count, invalidated when
// corrupt, and off when asked.
#include "tune/calibration_cache.h"

#include "core/check.h"
#include "transport/inproc/inproc_transport.h"
#include "tune/calibration.h"
#include "tune/tuning_file.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace chorus {
namespace {

TuningTable fitted_table() {
  TuningTable t;
  LinkParams shm("shm", 0.4e-6, 6e9);
  shm.curve = {{{4096, 5e-11}, {262144, 3e-11}, {16777216, 1.6e-10}}};
  shm.half_duplex = true;
  shm.half_duplex_from = 65536;
  shm.mem_traffic = 4;
  shm.call_overhead = 3e-7;
  shm.flag_alpha = 1.2e-7;
  t.links["shm"] = shm;
  t.links["tcp"] = LinkParams("tcp", 9e-6, 2e9);
  t.host = {30e9, 2};
  t.compute.copy = {{{65536, 2e-11}, {16777216, 1.5e-10}}};
  t.compute.kernels["float32.sum"] = {{{65536, 4e-11}, {16777216, 1.7e-10}}};
  t.gamma = 4e-11;
  return t;
}

TEST(TuningFileV2, RoundTripsTheFittedModel) {
  const TuningTable t = fitted_table();
  const std::string text = tuning_to_json(t);
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos) << text;
  const TuningTable back = tuning_from_json(text, "test");
  EXPECT_TRUE(back.fitted());
  const LinkParams& shm = back.links.at("shm");
  EXPECT_EQ(shm.curve, t.links.at("shm").curve);
  EXPECT_TRUE(shm.half_duplex);
  EXPECT_EQ(shm.half_duplex_from, 65536);
  EXPECT_EQ(shm.call_overhead, 3e-7);
  EXPECT_EQ(shm.mem_traffic, 4);
  EXPECT_EQ(shm.flag_alpha, 1.2e-7);
  EXPECT_TRUE(back.links.at("tcp").curve.empty());
  EXPECT_FALSE(back.links.at("tcp").half_duplex);
  // tcp has no flag_alpha: none is written, and it loads unfitted.
  EXPECT_EQ(text.find("flag_alpha_s"), text.rfind("flag_alpha_s")) << text;
  EXPECT_FALSE(back.links.at("tcp").flag_alpha_fitted());
  EXPECT_EQ(back.host, t.host);
  EXPECT_EQ(back.compute, t.compute);
}

TEST(TuningFileV2, VersionOneFilesStillLoadAsTheSeedsModel) {
  const TuningTable t = tuning_from_json(
      R"({"format": "chorus-tuning", "version": 1, "links": {"shm": {"alpha_s": 1e-6, "beta_Bps": 5e9}}})",
      "v1");
  EXPECT_FALSE(t.fitted());
  EXPECT_EQ(t.links.at("shm").beta, 5e9);
  EXPECT_FALSE(t.links.at("shm").flag_alpha_fitted());
  EXPECT_EQ(t.host, HostParams{});
  EXPECT_TRUE(t.compute.empty());
}

TEST(TuningFileV2, BadModelEntriesAreClearErrors) {
  auto bad = [](const std::string& link_extra, const std::string& top_extra = "") {
    const std::string text =
        R"({"format": "chorus-tuning", "version": 2, "links": {"shm": {"alpha_s": 1e-6, "beta_Bps": 5e9)" +
        link_extra + "}}" + top_extra + "}";
    try {
      tuning_from_json(text, "f");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(bad(R"(, "curve": [[4096, 1e-10], [1024, 1e-10]])").find("increasing"),
            std::string::npos);
  EXPECT_NE(bad(R"(, "curve": [[4096, -1]])").find("s_per_B >= 0"), std::string::npos);
  EXPECT_NE(bad(R"(, "curve": [4096])").find("pair"), std::string::npos);
  EXPECT_NE(bad(R"(, "half_duplex": 1)").find("half_duplex"), std::string::npos);
  EXPECT_NE(bad(R"(, "mem_traffic": -4)").find("mem_traffic"), std::string::npos);
  EXPECT_NE(bad(R"(, "flag_alpha_s": -1e-7)").find("flag_alpha_s must be >= 0"), std::string::npos);
  EXPECT_NE(bad(R"(, "flag_alpha_s": "fast")").find("flag_alpha_s"), std::string::npos);
  EXPECT_NE(bad("", R"(, "host": {"memory_Bps": -1})").find("memory_Bps"), std::string::npos);
  EXPECT_NE(bad("", R"(, "compute": {"kernels": [1]})").find("kernels"), std::string::npos);
  EXPECT_NE(tuning_to_json(fitted_table()).find("float32.sum"), std::string::npos);
}

// Host loads for the injected sampler: no real load in tests. Quiet: nothing
// but the job runs. Busy: far more runnable tasks than any host has cores.
HostLoad quiet_host() {
  return {0, 0.25};
}
HostLoad busy_host() {
  return {1e6, 50};
}

// Runs cached_model on n in-process ranks with the host's load from
// `sampler`; returns rank 0's result and checks that every rank got the same
// table.
CachedModel run_cache(int n, const Config& config, LoadSampler sampler = quiet_host) {
  auto world = make_inproc_world(n);
  std::vector<CachedModel> got(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto t = make_inproc_transport(world, r, std::chrono::microseconds{50});
      got[static_cast<size_t>(r)] =
          cached_model(*t, config, Clock::now() + std::chrono::seconds(120), sampler);
    });
  for (auto& th : threads) th.join();
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(tuning_to_json(got[static_cast<size_t>(r)].table), tuning_to_json(got[0].table))
        << "rank " << r;
    EXPECT_EQ(got[static_cast<size_t>(r)].from_cache, got[0].from_cache);
  }
  return got[0];
}

class CalibrationCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("chorus_cache_test_" + std::to_string(::getpid())))
               .string();
    std::filesystem::remove_all(dir_);
    config_.cache_dir = dir_ + "/chorus";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  Config config_;
};

TEST_F(CalibrationCache, WrittenThenReadAndKeptApartByRankCount) {
  const CachedModel first = run_cache(2, config_);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.path, cache_file(config_.cache_dir, "inproc", 2));
  // <dir>/<hostname>-<link>-n<N>.p<probes revision>.json
  EXPECT_EQ(first.path.rfind(config_.cache_dir + "/", 0), 0u) << first.path;
  EXPECT_NE(first.path.find(str_cat("-inproc-n2.p", kCalibrationProbes, ".json")),
            std::string::npos)
      << first.path;
  ASSERT_TRUE(std::filesystem::exists(first.path));
  const LinkParams& link = first.table.links.at("inproc");
  EXPECT_FALSE(link.curve.empty());
  EXPECT_GT(link.beta, 0);
  EXPECT_FALSE(first.table.compute.copy.empty());
  EXPECT_NE(first.table.compute.kernel(DataType::float64, ReduceOp::sum), nullptr);
  EXPECT_EQ(first.host_of, (std::vector<int>{0, 0}));
  // inproc ranks share memory: the flag ping-pong ran.
  EXPECT_TRUE(link.flag_alpha_fitted());

  const CachedModel second = run_cache(2, config_);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(tuning_to_json(second.table), tuning_to_json(first.table));

  // Another rank count is another entry, calibrated on its own.
  const CachedModel three = run_cache(3, config_);
  EXPECT_FALSE(three.from_cache);
  EXPECT_TRUE(three.table.links.at("inproc").flag_alpha_fitted());
  EXPECT_NE(three.path, first.path);
  EXPECT_TRUE(std::filesystem::exists(three.path));
  EXPECT_TRUE(std::filesystem::exists(first.path));
  // Another transport's name is another file too.
  EXPECT_NE(cache_file(config_.cache_dir, "shm", 2), first.path);
  EXPECT_NE(cache_file(config_.cache_dir, "tcp", 2), cache_file(config_.cache_dir, "shm", 2));
}

TEST_F(CalibrationCache, ACorruptFileIsIgnoredWithAWarningAndReplaced) {
  const std::string path = cache_file(config_.cache_dir, "inproc", 2);
  std::filesystem::create_directories(config_.cache_dir);
  for (const char* junk :
       {"{not json", R"({"format": "chorus-tuning", "version": 2, "links": {}})"}) {
    std::ofstream(path) << junk;
    ::testing::internal::CaptureStderr();
    const CachedModel m = run_cache(2, config_);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(m.from_cache) << junk;
    EXPECT_NE(log.find("ignoring the calibration cache"), std::string::npos) << log;
    EXPECT_NE(log.find(path), std::string::npos) << log;
    // Replaced by a valid one, which the next start-up uses.
    std::ifstream in(path);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    EXPECT_TRUE(tuning_from_json(text, "cache").fitted());
    EXPECT_TRUE(run_cache(2, config_).from_cache);
  }
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The entry's record of the load it was calibrated under.
CalibrationLoad stored_load(const std::string& path) {
  const TuningTable t = tuning_from_json(file_text(path), path);
  EXPECT_TRUE(t.calibration.has_value()) << path;
  return t.calibration.value_or(CalibrationLoad{});
}

TEST_F(CalibrationCache, ACalibrationRecordsTheLoadItRanUnder) {
  const CachedModel m = run_cache(2, config_, quiet_host);
  ASSERT_TRUE(m.table.calibration.has_value());
  const CalibrationLoad load = stored_load(m.path);
  EXPECT_EQ(load, *m.table.calibration);
  EXPECT_FALSE(load.provisional);
  EXPECT_EQ(load.others_running, 0);
  EXPECT_EQ(load.loadavg, 0.25);
  EXPECT_GE(load.cores, 1);
  EXPECT_GT(load.samples, 2);  // sampled all through the probes
}

TEST_F(CalibrationCache, ABusyHostsCalibrationIsStoredProvisionalAndUsedWhileBusy) {
  const CachedModel busy = run_cache(2, config_, busy_host);
  EXPECT_FALSE(busy.from_cache);
  ASSERT_TRUE(busy.table.calibration.has_value());
  EXPECT_TRUE(busy.table.calibration->provisional);
  const CalibrationLoad load = stored_load(busy.path);
  EXPECT_TRUE(load.provisional);
  EXPECT_EQ(load.others_running, 1e6 - 2);  // the job's two ranks not counted
  EXPECT_EQ(load.loadavg, 50);
  // A later job on a host still busy uses it as it is.
  const std::string text = file_text(busy.path);
  const CachedModel again = run_cache(2, config_, busy_host);
  EXPECT_TRUE(again.from_cache);
  EXPECT_FALSE(again.replaced_provisional);
  EXPECT_EQ(tuning_to_json(again.table), tuning_to_json(busy.table));
  EXPECT_EQ(file_text(busy.path), text);
}

TEST_F(CalibrationCache, AQuietStartReplacesAProvisionalEntry) {
  const CachedModel busy = run_cache(2, config_, busy_host);
  ASSERT_TRUE(stored_load(busy.path).provisional);
  const CachedModel quiet = run_cache(2, config_, quiet_host);
  EXPECT_FALSE(quiet.from_cache);
  EXPECT_TRUE(quiet.replaced_provisional);
  EXPECT_EQ(quiet.path, busy.path);
  EXPECT_FALSE(stored_load(quiet.path).provisional);
  // The quiet entry is the one the next job uses.
  const CachedModel next = run_cache(2, config_, quiet_host);
  EXPECT_TRUE(next.from_cache);
  EXPECT_EQ(tuning_to_json(next.table), tuning_to_json(quiet.table));
}

// The learned picks of a replaced provisional entry stay (the learner checks
// them early against its own calls); its corrections, relative to the model
// replaced, go. Every rank gets the same table.
TEST_F(CalibrationCache, AReplacedProvisionalEntryKeepsItsLearnedPicks) {
  const CachedModel busy = run_cache(2, config_, busy_host);
  TuningTable poisoned = busy.table;
  poisoned.learned = {
      {Collective::allreduce, DataType::float32, ReduceOp::sum, 16, false, "ring", 9e-5}};
  poisoned.corrections = {{Collective::allreduce, DataType::float32, 16, "ring", 3.0, 4}};
  std::ofstream(busy.path) << tuning_to_json(poisoned);
  const CachedModel quiet = run_cache(2, config_, quiet_host);  // checks ranks agree
  EXPECT_TRUE(quiet.replaced_provisional);
  EXPECT_EQ(quiet.table.learned, poisoned.learned);
  EXPECT_TRUE(quiet.table.corrections.empty());
  EXPECT_FALSE(stored_load(quiet.path).provisional);
}

// A derived communicator (split) uses a provisional entry as it is, also on a
// quiet host: its siblings, made at the same moment, would make a new
// calibration busy again.
TEST_F(CalibrationCache, ADerivedCommunicatorKeepsAProvisionalEntry) {
  const CachedModel busy = run_cache(2, config_, busy_host);
  ASSERT_TRUE(stored_load(busy.path).provisional);
  const std::string text = file_text(busy.path);
  Config derived = config_;
  derived.derived = true;
  const CachedModel child = run_cache(2, derived, quiet_host);
  EXPECT_TRUE(child.from_cache);
  EXPECT_FALSE(child.replaced_provisional);
  EXPECT_EQ(tuning_to_json(child.table), tuning_to_json(busy.table));
  EXPECT_EQ(file_text(busy.path), text);
}

TEST_F(CalibrationCache, AQuietEntryIsKeptByABusyJob) {
  const CachedModel quiet = run_cache(2, config_, quiet_host);
  ASSERT_FALSE(stored_load(quiet.path).provisional);
  const std::string text = file_text(quiet.path);
  const CachedModel busy = run_cache(2, config_, busy_host);
  EXPECT_TRUE(busy.from_cache);
  EXPECT_FALSE(busy.replaced_provisional);
  EXPECT_EQ(file_text(quiet.path), text);
  EXPECT_TRUE(run_cache(2, config_, quiet_host).from_cache);
}

TEST_F(CalibrationCache, AnEntryCalibratedByAnotherProbeRevisionIsNotUsed) {
  // Same host, link and N, another P: not this chorus's entry.
  const std::string old = cache_file(config_.cache_dir, "inproc", 2);
  const std::string older = old.substr(0, old.rfind(".p")) + ".p4.json";
  ASSERT_NE(old, older);
  std::filesystem::create_directories(config_.cache_dir);
  std::ofstream(older) << tuning_to_json(fitted_table());
  const CachedModel m = run_cache(2, config_, quiet_host);
  EXPECT_FALSE(m.from_cache);
  EXPECT_EQ(m.path, old);
  EXPECT_EQ(file_text(older), tuning_to_json(fitted_table()));
}

TEST(HostBusy, MoreRunnableTasksThanTheJobLeavesCoresFor) {
  // No samples: nothing known, quiet.
  EXPECT_FALSE(host_busy({}, 2, 2));
  // 2 cores, 2 ranks of the job: any other runnable task at the median is busy.
  EXPECT_FALSE(host_busy({2, 2, 2}, 2, 2));
  EXPECT_FALSE(host_busy({1, 2, 3}, 2, 2));  // median others 0
  EXPECT_TRUE(host_busy({3, 3, 2}, 2, 2));   // median others 1
  // A lone spike is not the median.
  EXPECT_FALSE(host_busy({2, 40, 2}, 2, 2));
  // 8 cores, 2 ranks: up to 6 others fit.
  EXPECT_FALSE(host_busy({8, 8, 8}, 2, 8));
  EXPECT_TRUE(host_busy({9, 9, 9}, 2, 8));
  // More ranks than cores: any other task is busy.
  EXPECT_TRUE(host_busy({5, 5}, 4, 2));
  EXPECT_FALSE(host_busy({4, 3}, 4, 2));
  EXPECT_EQ(median_others_running({1, 5, 9, 3}, 2), 2);  // others {0, 3, 7, 1}
}

TEST(TuningFileV2, TheCalibrationRecordRoundTripsAndIsChecked) {
  TuningTable t = fitted_table();
  t.calibration = CalibrationLoad{true, 3.5, 7.25, 16, 21};
  const TuningTable back = tuning_from_json(tuning_to_json(t), "test");
  ASSERT_TRUE(back.calibration.has_value());
  EXPECT_EQ(*back.calibration, *t.calibration);
  EXPECT_FALSE(tuning_from_json(tuning_to_json(fitted_table()), "test").calibration.has_value());
  auto error = [](const std::string& calibration) {
    try {
      tuning_from_json(R"({"format": "chorus-tuning", "version": 2, "links": {}, "calibration": )" +
                           calibration + "}",
                       "f");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string good = R"("others_running": 0, "loadavg_1m": 0, "cores": 2, "samples": 3)";
  EXPECT_EQ(error(R"({"provisional": false, )" + good + "}"), "no error");
  EXPECT_NE(error(R"({)" + good + "}").find("provisional must be true or false"),
            std::string::npos);
  EXPECT_NE(error(R"({"provisional": 1, )" + good + "}").find("provisional"), std::string::npos);
  EXPECT_NE(
      error(
          R"({"provisional": true, "others_running": -1, "loadavg_1m": 0, "cores": 2, "samples": 3})")
          .find("others_running and loadavg_1m must be >= 0"),
      std::string::npos);
  EXPECT_NE(error(R"({"provisional": true, "loadavg_1m": 0, "cores": 2, "samples": 3})")
                .find("\"others_running\" must be a number"),
            std::string::npos);
  EXPECT_NE(error("[]").find("calibration must be an object"), std::string::npos);
}

TEST_F(CalibrationCache, OffCalibratesAndStoresNothing) {
  config_.tuning_cache = false;
  const CachedModel m = run_cache(2, config_);
  EXPECT_FALSE(m.from_cache);
  EXPECT_TRUE(m.path.empty());
  EXPECT_FALSE(m.table.links.at("inproc").curve.empty());
  EXPECT_FALSE(std::filesystem::exists(config_.cache_dir));
}

TEST(CalibrationCacheConfig, ComesFromTheEnvironment) {
  auto cfg = [](std::map<std::string, std::string, std::less<>> env) {
    return Config::from_env(env_from_map(std::move(env)));
  };
  EXPECT_TRUE(cfg({}).tuning_cache);
  EXPECT_FALSE(cfg({{"CHORUS_TUNING_CACHE", "off"}}).tuning_cache);
  EXPECT_THROW(cfg({{"CHORUS_TUNING_CACHE", "maybe"}}), Error);
  EXPECT_EQ(cfg({{"XDG_CACHE_HOME", "/x/cache"}, {"HOME", "/home/u"}}).cache_dir,
            "/x/cache/chorus");
  EXPECT_EQ(cfg({{"HOME", "/home/u"}}).cache_dir, "/home/u/.cache/chorus");
  // A relative XDG_CACHE_HOME is invalid by the spec and ignored.
  EXPECT_EQ(cfg({{"XDG_CACHE_HOME", "rel"}, {"HOME", "/home/u"}}).cache_dir,
            "/home/u/.cache/chorus");
  EXPECT_EQ(cfg({}).cache_dir, "");
}

}  // namespace
}  // namespace chorus
