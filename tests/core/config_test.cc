#include "core/config.h"
#include "core/deadline.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

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
  EXPECT_EQ(c.transport, TransportKind::tcp);
  EXPECT_FALSE(c.bind_cores);
  EXPECT_THROW(Config::from_env(env_from_map({{"CHORUS_TCP_STREAMS", "65"}})), Error);
}

// (CHORUS_TIMEOUT is the exception: inf and anything too long to count mean
// no deadline; see LongTimeoutsSaturateToNoDeadline.)
TEST(Config, NumbersBeyondTheirTypesAreRejected) {
  for (const char* var : {"CHORUS_SPIN_US", "CHORUS_SEGMENT", "CHORUS_STREAM_BYTES"})
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

TEST(Config, TcpStreamsDefaultByWorldSize) {
  const Config automatic = Config::from_env(env_from_map({}));
  EXPECT_EQ(tcp_streams_for(automatic, 2), 2u);
  EXPECT_EQ(tcp_streams_for(automatic, 256), 2u);
  EXPECT_EQ(tcp_streams_for(automatic, 257), 1u);
  const Config three = Config::from_env(env_from_map({{"CHORUS_TCP_STREAMS", "3"}}));
  EXPECT_EQ(tcp_streams_for(three, 2), 3u);
  EXPECT_EQ(tcp_streams_for(three, 1000), 3u);
}

TEST(Config, StreamBytes) {
  EXPECT_EQ(Config::from_env(env_from_map({})).stream_bytes, size_t{16} << 20);
  EXPECT_EQ(Config::from_env(env_from_map({{"CHORUS_STREAM_BYTES", "0"}})).stream_bytes, 0u);
  EXPECT_EQ(Config::from_env(env_from_map({{"CHORUS_STREAM_BYTES", "1048576"}})).stream_bytes,
            size_t{1} << 20);
}

TEST(Config, Deterministic) {
  EXPECT_FALSE(Config::from_env(env_from_map({})).deterministic);
  EXPECT_TRUE(Config::from_env(env_from_map({{"CHORUS_DETERMINISTIC", "1"}})).deterministic);
  EXPECT_FALSE(Config::from_env(env_from_map({{"CHORUS_DETERMINISTIC", "0"}})).deterministic);
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

TEST(Config, TunerModes) {
  const Config d = Config::from_env(env_from_map({}));
  EXPECT_EQ(d.tuner, TunerMode::learn);
  EXPECT_FALSE(d.tuner_set);
  const std::pair<const char*, TunerMode> modes[] = {
      {"learn", TunerMode::learn}, {"model", TunerMode::model}, {"off", TunerMode::off}};
  for (const auto& [text, mode] : modes) {
    const Config c = Config::from_env(env_from_map({{"CHORUS_TUNER", text}}));
    EXPECT_EQ(c.tuner, mode) << text;
    EXPECT_TRUE(c.tuner_set);
    EXPECT_EQ(to_string(mode), text);
  }
  // CHORUS_DEBUG items in any case; TUNE is TUNING.
  EXPECT_TRUE(Config::from_env(env_from_map({{"CHORUS_DEBUG", "tune"}})).log_tuning);
  EXPECT_TRUE(Config::from_env(env_from_map({{"CHORUS_DEBUG", "warn,Tuning"}})).log_tuning);
  try {
    Config::from_env(env_from_map({{"CHORUS_TUNER", "fastest"}}));
    ADD_FAILURE() << "CHORUS_TUNER=fastest was accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(err.what()).find("CHORUS_TUNER"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("fastest"), std::string::npos) << err.what();
  }
}

TEST(Config, LongTimeoutsSaturateToNoDeadline) {
  {
    ScopedEnv t("CHORUS_TIMEOUT", "inf");
    EXPECT_EQ(Config::from_env().timeout, std::chrono::milliseconds::max());
  }
  {
    ScopedEnv t("CHORUS_TIMEOUT", "1e10");  // about 317 years
    EXPECT_EQ(Config::from_env().timeout, std::chrono::milliseconds(10'000'000'000'000LL));
  }
  {
    ScopedEnv t("CHORUS_TIMEOUT", "1e300");
    EXPECT_EQ(Config::from_env().timeout, std::chrono::milliseconds::max());
  }
  const Deadline now = Clock::now();
  EXPECT_EQ(deadline_after(std::chrono::milliseconds::max(), now), Deadline::max());
  const auto millennium =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365) * 1000);
  EXPECT_EQ(deadline_after(millennium, now), Deadline::max());
  EXPECT_EQ(deadline_after(std::chrono::milliseconds(5000), now),
            now + std::chrono::milliseconds(5000));
  EXPECT_GT(deadline_after(std::chrono::hours(24 * 365), now), now);
}

TEST(Config, EveryBadNumberNamesItsVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"CHORUS_TIMEOUT", "0"},         {"CHORUS_TIMEOUT", "-1"},
      {"CHORUS_TIMEOUT", "nan"},       {"CHORUS_SPIN_US", "inf"},
      {"CHORUS_SPIN_US", "1e12"},      {"CHORUS_SPIN_US", "x"},
      {"CHORUS_SEGMENT", "inf"},       {"CHORUS_SEGMENT", "1.5"},
      {"CHORUS_SEGMENT", "-4"},        {"CHORUS_BIND", "bogus"},
      {"CHORUS_TCP_STREAMS", "0"},     {"CHORUS_DEBUG", "LOUD"},
      {"CHORUS_STREAM_BYTES", "-1"},   {"CHORUS_STREAM_BYTES", "1.5"},
      {"CHORUS_DETERMINISTIC", "yes"}, {"CHORUS_DETERMINISTIC", "2"}};
  for (const auto& [name, value] : bad) {
    ScopedEnv e(name, value);
    try {
      Config::from_env();
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(err.what()).find(name), std::string::npos) << err.what();
    }
  }
}

// The list of settings is the one environment reader: every CHORUS_*
// variable from_env or the bootstrap asks for is in it, with a description,
// and every parsed setting of the list is asked for.
TEST(Settings, FromEnvReadsExactlyTheList) {
  std::set<std::string> asked;
  const EnvLookup recording = [&](std::string_view name) -> std::optional<std::string> {
    asked.insert(std::string(name));
    return std::nullopt;
  };
  (void)Config::from_env(recording);
  (void)launcher_env_present(recording);
  std::set<std::string> listed;
  for (const Setting& s : settings()) {
    EXPECT_TRUE(std::string_view(s.name).starts_with("CHORUS_")) << s.name;
    EXPECT_GT(std::strlen(s.description), 10u) << s.name;
    EXPECT_EQ(std::string_view(s.description).find('\n'), std::string_view::npos) << s.name;
    EXPECT_EQ(s.parse == nullptr, s.show == nullptr) << s.name;
    EXPECT_TRUE(listed.insert(s.name).second) << "listed twice: " << s.name;
    if (s.parse != nullptr) {
      EXPECT_TRUE(asked.count(s.name)) << "from_env skips " << s.name;
    }
  }
  for (const std::string& name : asked)
    if (name.starts_with("CHORUS_")) {
      EXPECT_TRUE(listed.count(name)) << name << " is not listed";
    }
  EXPECT_NE(find_setting("CHORUS_TIMEOUT"), nullptr);
  EXPECT_EQ(find_setting("CHORUS_NO_SUCH"), nullptr);
  EXPECT_THROW(setting_var(env_from_map({}), "CHORUS_NO_SUCH"), Error);
}

TEST(Settings, InEffectNamesValueAndSource) {
  const auto values = settings_in_effect(env_from_map({{"CHORUS_TIMEOUT", "7.5"},
                                                       {"CHORUS_ALGO", "allreduce=ring"},
                                                       {"CHORUS_RANK", "3"},
                                                       {"CHORUS_STORE_SECRET", "hush"},
                                                       {"CHORUS_SPIN_US", ""}}));
  ASSERT_EQ(values.size(), settings().size());
  std::map<std::string, SettingValue> by_name;
  for (const auto& v : values) by_name[v.setting->name] = v;
  EXPECT_EQ(by_name["CHORUS_TIMEOUT"].value, "7.5");
  EXPECT_EQ(by_name["CHORUS_TIMEOUT"].default_value, "300");
  EXPECT_EQ(by_name["CHORUS_TIMEOUT"].source, "environment");
  EXPECT_EQ(by_name["CHORUS_ALGO"].value, "allreduce=ring");
  EXPECT_EQ(by_name["CHORUS_RANK"].value, "3");
  EXPECT_EQ(by_name["CHORUS_RANK"].source, "environment");
  // The secret itself is never printed.
  EXPECT_EQ(by_name["CHORUS_STORE_SECRET"].value, "(set)");
  // Set but empty is unset.
  EXPECT_EQ(by_name["CHORUS_SPIN_US"].source, "default");
  EXPECT_EQ(by_name["CHORUS_SPIN_US"].value, "50");
  EXPECT_EQ(by_name["CHORUS_TRANSPORT"].value, "auto");
  EXPECT_EQ(by_name["CHORUS_TRANSPORT"].source, "default");
  EXPECT_THROW(settings_in_effect(env_from_map({{"CHORUS_TIMEOUT", "soon"}})), Error);
}

// Each setting's printed value parses back to the same Config: the text
// --params shows is one a user can set.
TEST(Settings, ShownValuesParseBack) {
  const Config cfg = Config::from_env(env_from_map({{"CHORUS_TIMEOUT", "inf"},
                                                    {"CHORUS_ALGO", "ring,allgather=bruck"},
                                                    {"CHORUS_DEBUG", "info,tuning"},
                                                    {"CHORUS_TUNER", "model"},
                                                    {"CHORUS_TCP_STREAMS", "3"},
                                                    {"CHORUS_PROGRESS_CPU", "2"}}));
  for (const Setting& s : settings()) {
    if (s.parse == nullptr) continue;
    const std::string shown = s.show(cfg);
    if (shown == "unset" || shown == "auto" || shown == "(set)") continue;
    Config again;
    s.parse(again, shown);
    EXPECT_EQ(s.show(again), shown) << s.name;
  }
}

}  // namespace
}  // namespace chorus
