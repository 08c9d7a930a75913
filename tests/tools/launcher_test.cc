// The local launcher behind chorus-run and chorus-perf (tools/launcher.h),
// with real child processes: each rank's variables, the private store that
// is gone afterwards, the "[rank] " prefixes or the inherited output, and a
// failed or killed rank stopping the others.
#include "launcher.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace chorus {
namespace {

// A launch of `n` ranks named "test-launch", whose output goes to files.
struct Captured {
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  ~Captured() {
    std::fclose(out);
    std::fclose(err);
  }
  static std::string text(FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    return s;
  }
  std::string out_text() const { return text(out); }
  std::string err_text() const { return text(err); }
};

LocalLaunch options(int n, Captured& c) {
  LocalLaunch o;
  o.tool = "test-launch";
  o.nranks = n;
  o.grace = std::chrono::seconds(0);
  o.out = c.out;
  o.err = c.err;
  return o;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

// A rank that can only end by a signal.
[[noreturn]] void block_forever() {
  for (;;) ::pause();
}

TEST(Launcher, EveryRankRunsWithItsVariablesAndAPrivateStoreThatIsRemoved) {
  Captured c;
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  LocalLaunch o = options(3, c);
  o.transport = "shm";
  sigset_t before, after;
  ::sigprocmask(SIG_SETMASK, nullptr, &before);
  const LaunchResult result = launch_local_ranks(o, [&](int r) {
    const std::string rank = std::to_string(r);
    // Each wrong variable has its own exit status.
    if (env("CHORUS_RANK") != rank) return 10;
    if (env("CHORUS_WORLD_SIZE") != "3") return 11;
    if (env("CHORUS_TRANSPORT") != "shm") return 12;
    if (env("RANK") != rank || env("LOCAL_RANK") != rank) return 13;
    if (env("WORLD_SIZE") != "3" || env("LOCAL_WORLD_SIZE") != "3") return 14;
    if (env("MASTER_ADDR") != "127.0.0.1" || env("MASTER_PORT").empty()) return 15;
    const std::string line = env("CHORUS_STORE") + "\n";
    if (::write(report[1], line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      return 16;
    return 0;
  });
  ::sigprocmask(SIG_SETMASK, nullptr, &after);
  ::close(report[1]);
  EXPECT_EQ(result.status, 0) << c.err_text();
  EXPECT_EQ(result.worst, 0);
  std::string stores;
  char buf[4096];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;)
    stores.append(buf, static_cast<size_t>(n));
  ::close(report[0]);
  // One FileStore for all three ranks, in a directory gone now.
  std::istringstream lines(stores);
  std::vector<std::string> urls;
  for (std::string l; std::getline(lines, l);) urls.push_back(l);
  ASSERT_EQ(urls.size(), 3u) << stores;
  EXPECT_EQ(urls[0], urls[1]);
  EXPECT_EQ(urls[0], urls[2]);
  ASSERT_EQ(urls[0].rfind("file://", 0), 0u) << urls[0];
  const std::filesystem::path dir = std::filesystem::path(urls[0].substr(7)).parent_path();
  EXPECT_NE(dir.filename().string().find("test-launch."), std::string::npos) << dir;
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  // The launcher's signal mask is as it found it.
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGPIPE})
    EXPECT_EQ(sigismember(&before, s), sigismember(&after, s)) << "signal " << s;
}

TEST(Launcher, ATcpStoreComesWithASecret) {
  Captured c;
  LocalLaunch o = options(2, c);
  o.tcp_store = true;
  const LaunchResult result = launch_local_ranks(o, [](int) {
    if (env("CHORUS_STORE").rfind("tcp://127.0.0.1:", 0) != 0) return 10;
    if (env("CHORUS_STORE_SECRET").size() != 64) return 11;
    if (env("CHORUS_STORE").ends_with(":" + env("MASTER_PORT"))) return 12;
    return 0;
  });
  EXPECT_EQ(result.status, 0) << c.err_text();
}

// Rank r's lines in `text` ("[r] ..."), in order.
std::map<int, std::vector<std::string>> by_rank(const std::string& text) {
  std::map<int, std::vector<std::string>> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    int r = -1;
    char close = 0;
    if (std::sscanf(l.c_str(), "[%d%c", &r, &close) == 2 && close == ']')
      lines[r].push_back(l.substr(l.find("] ") + 2));
    else
      lines[-1].push_back(l);
  }
  return lines;
}

TEST(Launcher, PrefixesEveryLineOfEveryRank) {
  Captured c;
  const LaunchResult result = launch_local_ranks(options(2, c), [](int r) {
    std::printf("hello from %d\nsecond line\nno newline at the end", r);
    std::fprintf(stderr, "a warning of %d\n", r);
    return 0;
  });
  EXPECT_EQ(result.status, 0);
  auto out = by_rank(c.out_text());
  auto err = by_rank(c.err_text());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r], (std::vector<std::string>{"hello from " + std::to_string(r), "second line",
                                                "no newline at the end"}))
        << c.out_text();
    EXPECT_EQ(err[r], std::vector<std::string>{"a warning of " + std::to_string(r)})
        << c.err_text();
  }
  EXPECT_EQ(out.count(-1), 0u) << c.out_text();
}

TEST(Launcher, WithoutPrefixesTheRanksWriteToTheLaunchersOwnOutput) {
  Captured c;
  LocalLaunch o = options(2, c);
  o.prefix_output = false;
  FILE* file = std::tmpfile();
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  ::dup2(::fileno(file), STDOUT_FILENO);
  const LaunchResult result = launch_local_ranks(o, [](int r) {
    std::printf("rank %d as is\n", r);
    return 0;
  });
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  const std::string text = Captured::text(file);
  std::fclose(file);
  EXPECT_EQ(result.status, 0);
  EXPECT_NE(text.find("rank 0 as is\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 as is\n"), std::string::npos) << text;
  EXPECT_EQ(text.find('['), std::string::npos) << text;
  EXPECT_EQ(c.out_text(), "");
}

TEST(Launcher, AFailedRankStopsTheOthers) {
  // Rank 1 exits with 3; ranks 0 and 2 would run forever, and end by the
  // SIGTERM that follows the grace period.
  Captured c;
  const LaunchResult result = launch_local_ranks(options(3, c), [](int r) -> int {
    if (r == 1) return 3;
    block_forever();
  });
  EXPECT_EQ(result.status, 3);
  EXPECT_EQ(result.worst, 128 + SIGTERM);
  EXPECT_NE(c.err_text().find("test-launch: rank 1 exited with status 3; stopping the other ranks"),
            std::string::npos)
      << c.err_text();
}

TEST(Launcher, AKilledRankIsNamedWithItsSignal) {
  Captured c;
  const LaunchResult result = launch_local_ranks(options(2, c), [](int r) -> int {
    if (r == 0) ::raise(SIGKILL);
    block_forever();
  });
  EXPECT_EQ(result.status, 128 + SIGKILL);
  EXPECT_NE(c.err_text().find("test-launch: rank 0 was killed by signal 9"), std::string::npos)
      << c.err_text();
}

TEST(Launcher, WithoutReportTheLauncherPrintsNothingOfItsOwn) {
  Captured c;
  LocalLaunch o = options(2, c);
  o.report = false;
  o.grace = std::chrono::seconds(600);  // both ranks end on their own
  const LaunchResult result = launch_local_ranks(o, [](int r) { return r == 0 ? 2 : 1; });
  EXPECT_NE(result.status, 0);
  EXPECT_EQ(result.worst, 2);
  EXPECT_EQ(c.err_text(), "");
}

TEST(Launcher, AnExceptionThatEscapesARankIsPrintedAndFailsIt) {
  Captured c;
  const LaunchResult result = launch_local_ranks(options(1, c), [](int) -> int {
    throw Error(ErrorCode::internal, "the rank's own failure");
  });
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(c.err_text().find("[0] test-launch: rank 0: the rank's own failure"), std::string::npos)
      << c.err_text();
}

TEST(Launcher, ABadSettingIsRefusedBeforeAnyRankStarts) {
  Captured c;
  ::setenv("CHORUS_BIND", "bogus", 1);
  try {
    launch_local_ranks(options(2, c), [](int) { return 0; });
    ADD_FAILURE() << "accepted CHORUS_BIND=bogus";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("CHORUS_BIND"), std::string::npos) << e.what();
  }
  ::unsetenv("CHORUS_BIND");
  EXPECT_EQ(c.out_text() + c.err_text(), "");
}

}  // namespace
}  // namespace chorus
