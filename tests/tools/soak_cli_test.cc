// chorus-soak's command line and report.
#include "soak_cli.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus::perf {
namespace {

SoakCli parse(std::vector<std::string> args) {
  return parse_soak_args(args);
}

// The message of the invalid_argument error parsing `args` raises.
std::string parse_error(std::vector<std::string> args) {
  try {
    parse_soak_args(args);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(SoakCli, Defaults) {
  const SoakCli cli = parse({});
  EXPECT_EQ(cli.soak.calls, 1000u);
  EXPECT_EQ(cli.soak.seed, 1u);
  EXPECT_EQ(cli.soak.first, 0u);
  EXPECT_EQ(cli.soak.max_bytes, size_t{4} << 20);
  EXPECT_EQ(cli.soak.time_limit.count(), 0);
  EXPECT_EQ(cli.ranks, 4);
  EXPECT_FALSE(cli.soak.corrupt_one);
  EXPECT_FALSE(cli.help);
}

TEST(SoakCli, Flags) {
  const SoakCli cli = parse({"--calls", "10000", "--seed", "0x5eed", "--first", "17", "--max-bytes",
                             "256k", "--time-limit", "1.5s", "--ranks", "3"});
  EXPECT_EQ(cli.soak.calls, 10000u);
  EXPECT_EQ(cli.soak.seed, 0x5eedu);
  EXPECT_EQ(cli.soak.first, 17u);
  EXPECT_EQ(cli.soak.max_bytes, 256u * 1024);
  EXPECT_EQ(cli.soak.time_limit.count(), 1500);
  EXPECT_EQ(cli.ranks, 3);
  EXPECT_EQ(parse({"--time-limit", "60"}).soak.time_limit.count(), 60000);
  EXPECT_EQ(parse({"--seed", "18446744073709551615"}).soak.seed, UINT64_MAX);
  EXPECT_TRUE(parse({"--corrupt-one"}).soak.corrupt_one);
  EXPECT_TRUE(parse({"--calls", "x", "-h"}).help);
  EXPECT_NE(soak_usage().find("--max-bytes"), std::string::npos);
  EXPECT_EQ(soak_usage().find("corrupt"), std::string::npos);
}

TEST(SoakCli, BadValuesNameTheFlag) {
  EXPECT_NE(parse_error({"--calls", "0"}).find("--calls '0'"), std::string::npos);
  EXPECT_NE(parse_error({"--calls", "12x"}).find("--calls '12x'"), std::string::npos);
  EXPECT_NE(parse_error({"--seed", "-1"}).find("--seed"), std::string::npos);
  EXPECT_NE(parse_error({"--max-bytes", "0"}).find("--max-bytes"), std::string::npos);
  EXPECT_NE(parse_error({"--max-bytes", "4Q"}).find("--max-bytes"), std::string::npos);
  EXPECT_NE(parse_error({"--time-limit", "5 min"}).find("--time-limit"), std::string::npos);
  EXPECT_NE(parse_error({"--ranks", "0"}).find("--ranks"), std::string::npos);
  EXPECT_NE(parse_error({"--bogus"}).find("--bogus"), std::string::npos);
  EXPECT_NE(parse_error({"--calls"}).find("needs a value"), std::string::npos);
}

TEST(SoakCli, ReportSaysOkOrFailed) {
  SoakReport r;
  r.nranks = 3;
  r.transport = "shm";
  r.options.calls = 2;
  r.calls = 2;
  r.all_ranks = true;
  r.kinds[static_cast<size_t>(SoakKind::allreduce)].calls = 1;
  r.kinds[static_cast<size_t>(SoakKind::send_recv)].calls = 1;
  EXPECT_NE(format_soak_header(r).find("2 calls from call 0 on 3 ranks over shm, seed 1"),
            std::string::npos);
  std::string text = format_soak_report(r);
  EXPECT_NE(text.find("# 2 calls, 0 wrong (0 elements), 0 failures in"), std::string::npos) << text;
  EXPECT_NE(text.find(": OK\n"), std::string::npos);
  EXPECT_NE(text.find(" send_recv "), std::string::npos);
  r.kinds[static_cast<size_t>(SoakKind::send_recv)].wrong_calls = 1;
  r.kinds[static_cast<size_t>(SoakKind::send_recv)].wrong_elements = 5;
  r.all_ranks = false;
  text = format_soak_report(r);
  EXPECT_NE(text.find("# 2 calls, 1 wrong (5 elements), 0 failures in"), std::string::npos) << text;
  EXPECT_NE(text.find(": FAILED\n"), std::string::npos);
  EXPECT_NE(text.find("rank 0's only"), std::string::npos);
}

}  // namespace
}  // namespace chorus::perf
