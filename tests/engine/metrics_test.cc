// CHORUS_METRICS (src/engine/metrics.h): the value's forms and errors, and
// the counters of inproc ranks against the calls they made. The Prometheus
// parser's check and the shm, tcp and HTTP runs are tests/python/test_metrics.py.
#include "engine/metrics.h"
#include "core/config.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace chorus {
namespace {

using detail::render_metrics;
using testing::run_ranks;

TEST(MetricsTarget, FileAndHttpForms) {
  EXPECT_EQ(parse_metrics_target("").kind, MetricsTarget::Kind::none);
  const MetricsTarget file = parse_metrics_target("/var/lib/node_exporter/chorus-%r.prom");
  EXPECT_EQ(file.kind, MetricsTarget::Kind::file);
  EXPECT_EQ(file.path, "/var/lib/node_exporter/chorus-%r.prom");
  const MetricsTarget any = parse_metrics_target(":9400");
  EXPECT_EQ(any.kind, MetricsTarget::Kind::http);
  EXPECT_EQ(any.address, "");
  EXPECT_EQ(any.port, 9400);
  const MetricsTarget loop = parse_metrics_target("127.0.0.1:0");
  EXPECT_EQ(loop.address, "127.0.0.1");
  EXPECT_EQ(loop.port, 0);
  EXPECT_EQ(parse_metrics_target("[::1]:9400").address, "::1");
  EXPECT_EQ(parse_metrics_target("metrics.prom").kind, MetricsTarget::Kind::file);
}

TEST(MetricsTarget, MalformedValuesNameTheVariable) {
  for (const char* bad : {":http", "host:", "host:65536", ":123456", "/tmp/dir/"}) {
    try {
      (void)Config::from_env(env_from_map({{"CHORUS_METRICS", bad}}));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("CHORUS_METRICS"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Config::from_env(env_from_map({{"CHORUS_METRICS_INTERVAL", "0"}})), Error);
}

// Sums the samples of `name` whose line holds every one of `parts`.
double sum_of(const std::string& text, const std::string& name,
              const std::vector<std::string>& parts) {
  std::istringstream in(text);
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) != 0) continue;
    bool all = true;
    for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

TEST(Metrics, InprocCountersMatchTheCalls) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("chorus-metrics-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ::setenv("CHORUS_METRICS", (dir + "/m-%r.prom").c_str(), 1);
  constexpr int kRanks = 3, kReduces = 11, kGathers = 4;
  run_ranks(kRanks, [&](Communicator& comm) {
    std::vector<float> x(2, 1.0f);  // 8 B
    for (int i = 0; i < kReduces; ++i)
      comm.allreduce(x.data(), x.data(), 2, DataType::float32, ReduceOp::sum);
    std::vector<int32_t> mine(4, comm.rank()), all(4 * kRanks);
    for (int i = 0; i < kGathers; ++i) comm.allgather(mine.data(), all.data(), 4, DataType::int32);
  });
  ::unsetenv("CHORUS_METRICS");
  const std::string text = render_metrics();
  EXPECT_EQ(
      sum_of(text, "chorus_calls_total", {"collective=\"allreduce\"", "transport=\"inproc\""}),
      kRanks * kReduces)
      << text;
  EXPECT_EQ(sum_of(text, "chorus_bytes_total", {"collective=\"allreduce\""}),
            kRanks * kReduces * 8);
  EXPECT_EQ(sum_of(text, "chorus_calls_total", {"collective=\"allgather\""}), kRanks * kGathers);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(sum_of(text, "chorus_calls_total",
                     {"rank=\"" + std::to_string(r) + "\"", "collective=\"allreduce\""}),
              kReduces);
  EXPECT_EQ(sum_of(text, "chorus_call_seconds_count", {"collective=\"allreduce\""}),
            kRanks * kReduces);
  // The file (the first rank's name) was written at the last destruction,
  // with every rank's counts.
  const std::string file = detail::metrics_file();
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(std::filesystem::path(file).parent_path(), dir);
  std::ifstream in(file);
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_EQ(sum_of(written.str(), "chorus_calls_total", {"collective=\"allreduce\""}),
            kRanks * kReduces)
      << written.str();
  std::filesystem::remove_all(dir);
}

TEST(Metrics, UnwritablePathIsAnErrorNamingTheVariable) {
  ::setenv("CHORUS_METRICS", "/proc/no-such-dir/m.prom", 1);
  try {
    run_ranks(2, [](Communicator&) {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CHORUS_METRICS"), std::string::npos) << e.what();
  }
  ::unsetenv("CHORUS_METRICS");
}

}  // namespace
}  // namespace chorus
