// Bootstrap: store URLs, the host identity, and the launcher environment.
#include "bootstrap/bootstrap.h"
#include "bootstrap/store_url.h"
#include "core/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

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
  EXPECT_NE(a.find('/'), std::string::npos);
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
      if (v) ::setenv(k, v->c_str(), 1);
      else ::unsetenv(k);
    }
  }

 private:
  static constexpr const char* kAll[] = {
      "CHORUS_RANK", "CHORUS_WORLD_SIZE", "CHORUS_STORE", "RANK", "WORLD_SIZE", "MASTER_ADDR",
      "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
      "SLURM_PROCID", "SLURM_NTASKS"};
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
  ScopedEnv env({{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  const BootstrapEnv b = read_bootstrap_env();
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.world_size, 8);
  EXPECT_EQ(b.store, "tcp://node0:29500");
  EXPECT_EQ(b.source, "torchrun");
}

TEST(BootstrapEnv, MpiAndSlurmVariables) {
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"CHORUS_STORE", "file:///s"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
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
  EXPECT_NE(env_error({{"CHORUS_RANK", "0"}, {"CHORUS_STORE", "file:///s"}}).find("CHORUS_WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "4"}, {"CHORUS_WORLD_SIZE", "4"}, {"CHORUS_STORE", "file:///s"}})
                .find("CHORUS_RANK=4"),
            std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "x"}, {"CHORUS_WORLD_SIZE", "4"}}).find("CHORUS_RANK"),
            std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "0"}, {"CHORUS_WORLD_SIZE", "0"}}).find("CHORUS_WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(env_error({{"CHORUS_RANK", "0"}, {"CHORUS_WORLD_SIZE", "2"}}).find("CHORUS_STORE"),
            std::string::npos);
  EXPECT_NE(env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "99999"}})
                .find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(env_error({{"OMPI_COMM_WORLD_SIZE", "2"}}).find("OMPI_COMM_WORLD_RANK"), std::string::npos);
}

}  // namespace
}  // namespace chorus
