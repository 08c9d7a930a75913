#include "soak_cli.h"

#include "core/check.h"
#include "model/units.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

namespace chorus::perf {
namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& why) {
  fail(ErrorCode::invalid_argument, "chorus-soak: ", flag, " '", value, "': ", why,
       " (see chorus-soak --help)");
}

// A decimal number, or hexadecimal after 0x, in [lo, hi].
uint64_t parse_uint(const std::string& flag, const std::string& v, uint64_t lo, uint64_t hi) {
  const bool is_hex = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  const char* begin = v.data() + (is_hex ? 2 : 0);
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(begin, v.data() + v.size(), x, is_hex ? 16 : 10);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    bad(flag, v, "not a non-negative integer");
  if (x < lo || x > hi) bad(flag, v, str_cat("must be in [", lo, ", ", hi, "]"));
  return x;
}

std::string padded(const std::string& s, size_t width) {
  return s.size() >= width ? " " + s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string soak_usage() {
  return R"(usage: chorus-soak [flags]
Random collectives and point-to-point batches, every output element checked
exactly. Under chorus-run (or mpirun, srun, torchrun) each process is one rank:
  chorus-run -n 4 --transport tcp chorus-soak --calls 10000
else --ranks threads of this process run it over the in-process transport.
  --calls N          calls to make (default 1000)
  --seed S           seed of the call sequence, decimal or 0x hex (default 1);
                     every rank derives call i from (S, i) alone
  --first I          index of the first call (default 0): --first I --calls 1
                     replays call I by itself
  --max-bytes SIZE   largest buffer of a call on one rank (default 4M; K, M, G)
  --time-limit T     stop early once T has passed (e.g. 60, 10s, 500ms;
                     default 0: no limit); the calls made are reported
  --ranks N          ranks of the in-process run (default 4)
  -h, --help         this text
Exit status: 0 when every element was right and no call failed, 1 otherwise,
2 on bad arguments.
)";
}

SoakCli parse_soak_args(std::span<const std::string> args) {
  SoakCli cli;
  CLI::App app{"chorus-soak", "chorus-soak"};
  app.set_help_flag("-h,--help");
  app.allow_extras();  // reported below, the first one by name
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string calls, seed, first, max_bytes, time_limit, ranks;
  CLI::Option* calls_opt = app.add_option("--calls", calls);
  CLI::Option* seed_opt = app.add_option("--seed", seed);
  CLI::Option* first_opt = app.add_option("--first", first);
  CLI::Option* max_bytes_opt = app.add_option("--max-bytes", max_bytes);
  CLI::Option* time_limit_opt = app.add_option("--time-limit", time_limit);
  CLI::Option* ranks_opt = app.add_option("--ranks", ranks);
  app.add_flag("--corrupt-one", cli.soak.corrupt_one)->group("");  // test hook, not in --help
  std::vector<std::string> reversed(args.rbegin(), args.rend());   // as CLI11 takes them
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    cli.help = true;
    return cli;
  } catch (const CLI::ArgumentMismatch&) {
    bad(args.back(), "", "needs a value");
  } catch (const CLI::ParseError& e) {
    fail(ErrorCode::invalid_argument, "chorus-soak: ", e.what(), " (see chorus-soak --help)");
  }
  if (const std::vector<std::string> unknown = app.remaining(); !unknown.empty())
    bad("flag", unknown.front(), "unknown flag");

  constexpr uint64_t kMaxCalls = 1'000'000'000;
  constexpr size_t kMaxBufferBytes = size_t{1} << 30;
  constexpr int kMaxRanks = 256;
  if (calls_opt->count() > 0) cli.soak.calls = parse_uint("--calls", calls, 1, kMaxCalls);
  if (seed_opt->count() > 0) cli.soak.seed = parse_uint("--seed", seed, 0, UINT64_MAX);
  if (first_opt->count() > 0) cli.soak.first = parse_uint("--first", first, 0, kMaxCalls);
  if (max_bytes_opt->count() > 0) {
    std::string upper = max_bytes;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    try {
      cli.soak.max_bytes = parse_size(upper, "--max-bytes");
    } catch (const Error& e) {
      fail(ErrorCode::invalid_argument, "chorus-soak: ", e.what(), " (see chorus-soak --help)");
    }
    if (cli.soak.max_bytes == 0 || cli.soak.max_bytes > kMaxBufferBytes)
      bad("--max-bytes", max_bytes, "must be in [1, 1G]");
  }
  if (time_limit_opt->count() > 0) {
    double seconds = 0;
    try {
      seconds = parse_time(time_limit, "--time-limit");
    } catch (const Error& e) {
      fail(ErrorCode::invalid_argument, "chorus-soak: ", e.what(), " (see chorus-soak --help)");
    }
    constexpr double kMaxSeconds = 7 * 24 * 3600;
    if (seconds > kMaxSeconds) bad("--time-limit", time_limit, "longer than a week");
    cli.soak.time_limit = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3));
    if (seconds > 0 && cli.soak.time_limit.count() == 0)
      cli.soak.time_limit = std::chrono::milliseconds(1);
  }
  if (ranks_opt->count() > 0)
    cli.ranks = static_cast<int>(parse_uint("--ranks", ranks, 1, kMaxRanks));
  return cli;
}

std::string format_soak_header(const SoakReport& r) {
  const SoakOptions& o = r.options;
  std::string s = str_cat("# chorus-soak: ", o.calls, " calls from call ", o.first, " on ",
                          r.nranks, " ranks over ", r.transport, ", seed ", o.seed,
                          ", buffers up to ", o.max_bytes, " B");
  if (o.time_limit.count() > 0) s += str_cat(", time limit ", o.time_limit.count(), " ms");
  return s + "\n";
}

std::string format_soak_report(const SoakReport& r) {
  constexpr size_t kKindWidth = 14;  // "reduce_scatter"
  constexpr size_t kWidth = 12;
  auto left = [&](const std::string& name) {
    return name + std::string(kKindWidth - std::min(kKindWidth, name.size()), ' ');
  };
  std::string s = "#\n# " + left("kind");
  for (const char* c :
       {"calls", "in-place", "async", "named algo", "wrong calls", "wrong elems", "failures"})
    s += padded(c, kWidth);
  s += "\n";
  auto row = [&](const std::string& name, const SoakTally& t) {
    s += "  " + left(name);
    for (uint64_t v : {t.calls, t.in_place, t.async, t.named_algorithm, t.wrong_calls,
                       t.wrong_elements, t.failures})
      s += padded(std::to_string(v), kWidth);
    s += "\n";
  };
  for (int k = 0; k < kSoakKindCount; ++k)
    row(std::string(to_string(static_cast<SoakKind>(k))), r.kinds[static_cast<size_t>(k)]);
  const SoakTally t = r.total();
  row("total", t);
  if (r.failures_outside_calls > 0)
    s += str_cat("# ", r.failures_outside_calls,
                 " of the failures in the soak's own allreduce (time limit, final tally)\n");
  if (!r.all_ranks)
    s += str_cat("# the wrong counts are rank ", r.rank,
                 "'s only: a failure ended the run before the ranks could sum them\n");
  if (r.time_limit_hit)
    s +=
        str_cat("# stopped at the time limit after ", r.calls, " of ", r.options.calls, " calls\n");
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
  s += str_cat("# ", r.calls, " calls, ", t.wrong_calls, " wrong (", t.wrong_elements,
               " elements), ", t.failures, " failures in ", seconds,
               " s: ", r.ok() ? "OK" : "FAILED", "\n");
  return s;
}

std::string format_soak_progress(size_t done, size_t total) {
  return str_cat("chorus-soak: ", done, "/", total, " calls");
}

}  // namespace chorus::perf
