// Bootstrap: store URLs, the host identity, start-up over a URL or over a store
// opened elsewhere, and the launcher environment.
#include "bootstrap/bootstrap.h"
#include "bootstrap/store_url.h"
#include "core/config.h"
#include "net/socket.h"
#include "store/file_store.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

TEST(OpenStore, RejectsMalformedUrls) {
  for (const char* url : {"", "file://", "file://relative/dir", "tcp://", "tcp://host",
                          "tcp://host:notaport", "tcp://host:0", "http://x:1"}) {
    try {
      open_store(url, false, Clock::now() + 100ms);
      ADD_FAILURE() << "accepted '" << url << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << url << ": " << e.what();
    }
  }
}

TEST(ParseStoreUrl, SplitsFileAndTcpUrls) {
  const StoreUrl f = parse_store_url("file:///tmp/job42");
  EXPECT_EQ(f.kind, StoreUrl::Kind::file);
  EXPECT_EQ(f.path, "/tmp/job42");
  const StoreUrl t = parse_store_url("tcp://node0:29500");
  EXPECT_EQ(t.kind, StoreUrl::Kind::tcp);
  EXPECT_EQ(t.host, "node0");
  EXPECT_EQ(t.port, 29500);
  try {
    parse_store_url("tcp://node0:0");
    ADD_FAILURE() << "accepted port 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("tcp://node0:0"), std::string::npos) << e.what();
  }
}

TEST(HostIdentity, IsStableAndNamesTheHost) {
  const std::string a = host_identity();
  EXPECT_EQ(a, host_identity());
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  EXPECT_EQ(a.rfind(std::string(name) + "/", 0), 0u) << a;
  EXPECT_NE(a.find("/shm="), std::string::npos) << a;
  EXPECT_NE(a.find("/pidns="), std::string::npos) << a;
}

// host_identity() in a child process after `enter` (a change of namespaces)
// succeeded; with `grandchild`, in a child of that child (a new pid namespace
// holds only the children of the process that made it). "" on a failure.
std::string identity_after(const std::function<bool()>& enter, bool grandchild = false) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (!enter()) ::_exit(1);
    if (grandchild) {
      const pid_t inner = ::fork();
      if (inner > 0) {
        int st = 0;
        ::waitpid(inner, &st, 0);
        ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
      }
      if (inner < 0) ::_exit(1);
    }
    const std::string id = host_identity();
    const bool ok = ::write(fds[1], id.data(), id.size()) == static_cast<ssize_t>(id.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  std::string id;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    id.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? id : "";
}

// Equal identities mean shared memory works: a network namespace alone keeps
// /dev/shm and the pids (the same host), a private /dev/shm or another pid
// namespace does not (testbed hosts, containers).
TEST(HostIdentity, FollowsDevShmAndPidNamespaceNotTheNetwork) {
  if (::geteuid() != 0) GTEST_SKIP() << "making namespaces needs root";
  const std::string here = host_identity();
  const std::string prefix = here.substr(0, here.find("/shm="));
  EXPECT_EQ(identity_after([] { return ::unshare(CLONE_NEWNET) == 0; }), here);
  const std::string private_shm = identity_after([] {
    return ::unshare(CLONE_NEWNS) == 0 &&
           ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") == 0;
  });
  ASSERT_FALSE(private_shm.empty()) << "no mount namespace with a private /dev/shm";
  EXPECT_NE(private_shm, here);
  EXPECT_EQ(private_shm.substr(0, private_shm.find("/shm=")), prefix) << private_shm;
  const std::string other_pids =
      identity_after([] { return ::unshare(CLONE_NEWPID) == 0; }, /*grandchild=*/true);
  ASSERT_FALSE(other_pids.empty()) << "no process in a new pid namespace";
  EXPECT_NE(other_pids, here);
  EXPECT_EQ(other_pids.substr(0, other_pids.find("/pidns=")), here.substr(0, here.find("/pidns=")));
}

// --- start-up failures reach every rank -------------------------------------------

// A store URL of either kind, fresh per test; removed afterwards.
class TestStore {
 public:
  explicit TestStore(const std::string& kind) {
    if (kind == "file") {
      std::string templ = (std::filesystem::temp_directory_path() / "chorus-boot.XXXXXX").string();
      EXPECT_NE(::mkdtemp(templ.data()), nullptr);
      dir_ = templ;
      url_ = "file://" + dir_;
    } else {
      Fd probe = listen_on(resolve("127.0.0.1", 0, "test"), "test");
      url_ = "tcp://127.0.0.1:" + std::to_string(local_port(probe.get()));
    }
  }
  ~TestStore() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  const std::string& url() const { return url_; }
  // A client of the store (for a tcp:// one, once rank 0 serves it).
  std::shared_ptr<Store> client() const {
    return open_store(url_, false, Clock::now() + 30s).store;
  }

 private:
  std::string dir_;
  std::string url_;
};

Config quiet_config() {
  Config c;
  c.log_level = LogLevel::none;
  c.transport = TransportKind::tcp;
  return c;
}

// Runs bootstrap_transport for ranks [0, sizes.size()) as threads, rank r
// with world size sizes[r]; `before(r)` runs in rank r's thread first.
// Returns each rank's error ("" when it started); the transports live until
// every rank is done (rank 0's holds the tcp:// store's server).
std::vector<std::string> start_ranks(const std::string& url, const std::vector<int>& sizes,
                                     const std::function<void(int)>& before = {}) {
  std::vector<std::string> errors(sizes.size());
  std::vector<std::unique_ptr<Transport>> transports(sizes.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(sizes.size()); ++r)
    threads.emplace_back([&, r] {
      try {
        if (before) before(r);
        transports[static_cast<size_t>(r)] = bootstrap_transport(
            url, r, sizes[static_cast<size_t>(r)], quiet_config(), Clock::now() + 60s);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

class StartUpFailure : public ::testing::TestWithParam<std::string> {};

// A value that chorus cannot read as a number, under a key it reads as one,
// fails every rank with the key named (not one rank, with the others waiting
// for it until the deadline).
TEST_P(StartUpFailure, ABadValueFailsEveryRankNamingTheKey) {
  TestStore store(GetParam());
  if (GetParam() == "file") store.client()->set("chorus/rank2/inits", {'a', 'b', 'c'});
  const auto errors = start_ranks(store.url(), {4, 4, 4, 4}, [&](int r) {
    // With tcp://, rank 0 serves the store: rank 2 plants the value first.
    if (GetParam() == "tcp" && r == 2) store.client()->set("chorus/rank2/inits", {'a', 'b', 'c'});
  });
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_NE(errors[r].find("key 'chorus/rank2/inits', which holds 'abc', not an integer"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_EQ(errors[r].rfind("rank " + std::to_string(r) + ":", 0), 0u) << errors[r];
  }
}

TEST_P(StartUpFailure, DisagreeingWorldSizesAreNamed) {
  TestStore store(GetParam());
  const auto errors = start_ranks(store.url(), {3, 3, 4});
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_NE(errors[r].find("rank 2 says world size 4, rank 0 says 3"), std::string::npos)
        << "rank " << r << ": " << errors[r];
}

TEST_P(StartUpFailure, AGoodStartUpStillStartsAndMayRepeat) {
  TestStore store(GetParam());
  for (int round = 0; round < 2; ++round) {
    const auto errors = start_ranks(store.url(), {3, 3, 3});
    for (const auto& e : errors) EXPECT_EQ(e, "");
    if (GetParam() == "tcp") break;  // rank 0's server goes with its transport
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, StartUpFailure, ::testing::Values("file", "tcp"),
                         [](const auto& p) { return p.param; });

// --- the bootstrap over a store opened elsewhere -------------------------------------

// What the torch backend does: bootstrap_over_store over a store that the
// job opened itself, here a prefix of a FileStore (torch's group stores are
// prefixes of its store). The ranks are threads; each one's error ("" when
// it started) comes back, and the transports live until every rank is done.
class ExternalStore {
 public:
  ExternalStore() {
    std::string templ = (std::filesystem::temp_directory_path() / "chorus-ext.XXXXXX").string();
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    base_ = std::make_shared<FileStore>(dir_);
    group_ = std::make_unique<PrefixStore>(base_, "group0");
  }
  ~ExternalStore() { std::filesystem::remove_all(dir_); }
  Store& group() { return *group_; }

  std::vector<std::string> start(const std::vector<int>& sizes) {
    std::vector<std::string> errors(sizes.size());
    std::vector<std::unique_ptr<Transport>> transports(sizes.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(sizes.size()); ++r)
      threads.emplace_back([&, r] {
        try {
          transports[static_cast<size_t>(r)] = bootstrap_over_store(
              *group_, "", r, sizes[static_cast<size_t>(r)], quiet_config(), Clock::now() + 60s);
        } catch (const Error& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    return errors;
  }

 private:
  std::string dir_;
  std::shared_ptr<FileStore> base_;
  std::unique_ptr<PrefixStore> group_;
};

TEST(BootstrapOverStore, StartsAndMayRepeatOnOneStore) {
  ExternalStore store;
  for (int round = 0; round < 2; ++round)
    for (const auto& e : store.start({3, 3, 3})) EXPECT_EQ(e, "") << "round " << round;
}

// A rank that another process claimed first fails, and its reason reaches
// every other rank through the store (none waits until the deadline).
TEST(BootstrapOverStore, ADuplicateRankFailsEveryRankWithItsReason) {
  ExternalStore store;
  store.group().add("chorus/rank1/claims", 1);
  store.group().set("chorus/rank1/owner", {'o', 't', 'h', 'e', 'r'});
  const auto start = Clock::now();
  const auto errors = store.start({3, 3, 3});
  EXPECT_LT(Clock::now() - start, 30s);
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_NE(errors[r].find("rank 1 joined twice: other and process "), std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_EQ(errors[r].rfind("rank " + std::to_string(r), 0), 0u) << errors[r];
  }
}

TEST(BootstrapOverStore, DisagreeingWorldSizesAreNamed) {
  ExternalStore store;
  const auto errors = store.start({3, 3, 4});
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_NE(errors[r].find("rank 2 says world size 4, rank 0 says 3"), std::string::npos)
        << "rank " << r << ": " << errors[r];
}

TEST(ProcessIdentity, NamesThisProcess) {
  const std::string id = process_identity();
  EXPECT_EQ(id, process_identity());
  EXPECT_NE(id.find("process " + std::to_string(::getpid()) + " on "), std::string::npos) << id;
}

// --- launcher environment -----------------------------------------------------

// Sets variables for one test and restores the previous environment after it.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : kAll) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
    for (auto [k, v] : vars) ::setenv(k, v, 1);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v)
        ::setenv(k, v->c_str(), 1);
      else
        ::unsetenv(k);
    }
  }

 private:
  static constexpr const char* kAll[] = {
      "CHORUS_RANK",          "CHORUS_WORLD_SIZE",  "CHORUS_STORE", "RANK",
      "WORLD_SIZE",           "MASTER_ADDR",        "MASTER_PORT",  "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "PMI_RANK",           "PMI_SIZE",     "SLURM_PROCID",
      "SLURM_NTASKS",         "CHORUS_STORE_SECRET"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

std::string env_error(std::initializer_list<std::pair<const char*, const char*>> vars) {
  ScopedEnv env(vars);
  try {
    read_bootstrap_env();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "(no error)";
}

TEST(BootstrapEnv, ReadsThroughALookup) {
  const BootstrapEnv b = read_bootstrap_env(env_from_map(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "2950"}}));
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.world_size, 2);
  EXPECT_EQ(b.store, "tcp://node0:2950");
  EXPECT_TRUE(launcher_env_present(env_from_map({{"PMI_SIZE", "2"}})));
  EXPECT_FALSE(launcher_env_present(env_from_map({{"MASTER_ADDR", "node0"}})));
  EXPECT_THROW(read_bootstrap_env(env_from_map({})), Error);
}

TEST(BootstrapEnv, ChorusVariables) {
  ScopedEnv env({{"CHORUS_RANK", "2"}, {"CHORUS_WORLD_SIZE", "4"}, {"CHORUS_STORE", "file:///x"}});
  const BootstrapEnv b = read_bootstrap_env();
  EXPECT_EQ(b.rank, 2);
  EXPECT_EQ(b.world_size, 4);
  EXPECT_EQ(b.store, "file:///x");
  EXPECT_EQ(b.source, "CHORUS");
}

TEST(BootstrapEnv, TorchrunVariablesMakeATcpStore) {
  ScopedEnv env(
      {{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  const BootstrapEnv b = read_bootstrap_env();
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.world_size, 8);
  EXPECT_EQ(b.store, "tcp://node0:29500");
  EXPECT_EQ(b.source, "torchrun");
}

TEST(BootstrapEnv, MpiAndSlurmVariables) {
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "3"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"CHORUS_STORE", "file:///s"},
                   {"SLURM_PROCID", "0"},
                   {"SLURM_NTASKS", "1"}});
    // mpirun inside a Slurm allocation: the inner launcher wins.
    const BootstrapEnv b = read_bootstrap_env();
    EXPECT_EQ(b.rank, 3);
    EXPECT_EQ(b.world_size, 4);
    EXPECT_EQ(b.source, "Open MPI");
  }
  {
    ScopedEnv env({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"CHORUS_STORE", "file:///s"}});
    EXPECT_EQ(read_bootstrap_env().source, "MPICH Hydra");
  }
  {
    ScopedEnv env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"CHORUS_STORE", "file:///s"}});
    const BootstrapEnv b = read_bootstrap_env();
    EXPECT_EQ(b.rank, 5);
    EXPECT_EQ(b.source, "Slurm");
  }
}

TEST(BootstrapEnv, MissingOrContradictoryVariablesAreNamed) {
  EXPECT_NE(env_error({}).find("CHORUS_RANK"), std::string::npos);
  EXPECT_NE(
      env_error({{"CHORUS_RANK", "0"}, {"CHORUS_STORE", "file:///s"}}).find("CHORUS_WORLD_SIZE"),
      std::string::npos);
  EXPECT_NE(
      env_error({{"CHORUS_RANK", "4"}, {"CHORUS_WORLD_SIZE", "4"}, {"CHORUS_STORE", "file:///s"}})
          .find("CHORUS_RANK=4"),
      std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "x"}, {"CHORUS_WORLD_SIZE", "4"}}).find("CHORUS_RANK"),
            std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "0"}, {"CHORUS_WORLD_SIZE", "0"}}).find("CHORUS_WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "0"}, {"CHORUS_WORLD_SIZE", "2"}}).find("CHORUS_STORE"),
            std::string::npos);
  EXPECT_NE(
      env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT"),
      std::string::npos);
  EXPECT_NE(
      env_error(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "99999"}})
          .find("MASTER_PORT"),
      std::string::npos);
  EXPECT_NE(env_error({{"OMPI_COMM_WORLD_SIZE", "2"}}).find("OMPI_COMM_WORLD_RANK"),
            std::string::npos);
}

}  // namespace
}  // namespace chorus
