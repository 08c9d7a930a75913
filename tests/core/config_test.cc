#include "core/config.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace chorus {
namespace {

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Config, Defaults) {
  const Config c = Config::from_env();
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(300000));
  EXPECT_EQ(c.algorithm_for(Collective::allreduce), "");
}

TEST(Config, AlgorithmOverrides) {
  ScopedEnv e("CHORUS_ALGO", "ring, allgather=bruck,reduce_scatter:recursive_halving");
  const Config c = Config::from_env();
  EXPECT_EQ(c.algorithm_for(Collective::allreduce), "ring");
  EXPECT_EQ(c.algorithm_for(Collective::allgather), "bruck");
  EXPECT_EQ(c.algorithm_for(Collective::reduce_scatter), "recursive_halving");
}

TEST(Config, BadValuesNameTheVariable) {
  {
    ScopedEnv e("CHORUS_TIMEOUT", "soon");
    try {
      Config::from_env();
      FAIL();
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(err.what()).find("CHORUS_TIMEOUT"), std::string::npos);
    }
  }
  {
    ScopedEnv e("CHORUS_TRANSPORT", "carrier_pigeon");
    EXPECT_THROW(Config::from_env(), Error);
  }
  {
    ScopedEnv e("CHORUS_ALGO", "warp=ring");
    EXPECT_THROW(Config::from_env(), Error);
  }
  {
    ScopedEnv e("CHORUS_DEBUG", "LOUD");
    EXPECT_THROW(Config::from_env(), Error);
  }
}

TEST(Config, ReadsThroughALookup) {
  const Config c = Config::from_env(env_from_map(
      {{"CHORUS_TIMEOUT", "2"}, {"CHORUS_TRANSPORT", "tcp"}, {"CHORUS_BIND", "none"}}));
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_FALSE(c.bind_cores);
  EXPECT_THROW(Config::from_env(env_from_map({{"CHORUS_TCP_STREAMS", "65"}})), Error);
}

TEST(Config, NumbersBeyondTheirTypesAreRejected) {
  for (const char* var : {"CHORUS_TIMEOUT", "CHORUS_SPIN_US", "CHORUS_SEGMENT"})
    for (const char* value : {"inf", "1e300", "2e19"}) {
      try {
        Config::from_env(env_from_map({{var, value}}));
        ADD_FAILURE() << var << "=" << value << " accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
        EXPECT_NE(std::string(e.what()).find(var), std::string::npos) << e.what();
      }
    }
}

TEST(Config, TimeoutSpinAndDebug) {
  ScopedEnv t("CHORUS_TIMEOUT", "2.5");
  ScopedEnv s("CHORUS_SPIN_US", "0");
  ScopedEnv d("CHORUS_DEBUG", "INFO,TUNING");
  const Config c = Config::from_env();
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.spin, std::chrono::microseconds(0));
  EXPECT_EQ(c.log_level, LogLevel::info);
  EXPECT_TRUE(c.log_tuning);
}

}  // namespace
}  // namespace chorus
