#include "perf_cli.h"

#include "core/check.h"
#include "core/transport_kind.h"
#include "model/units.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <vector>

namespace chorus::perf {
namespace {

// The collectives "all" sweeps, in this order.
constexpr Collective kSwept[] = {
    Collective::allreduce, Collective::allgather, Collective::reduce_scatter, Collective::broadcast,
    Collective::reduce,    Collective::alltoall,  Collective::gather,         Collective::scatter};

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& why) {
  fail(ErrorCode::invalid_argument, "chorus-perf: ", flag, " '", value, "': ", why,
       " (see chorus-perf --help)");
}

long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi) {
  long long x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size()) bad(flag, v, "not an integer");
  if (x < lo || x > hi) bad(flag, v, str_cat("must be in [", lo, ", ", hi, "]"));
  return x;
}

// "8", "4K", "64M", "1G" (binary prefixes, as nccl-tests reads -b and -e; the
// suffix and an optional B in either case), at most 1 TiB.
size_t parse_bytes(const std::string& flag, const std::string& v) {
  constexpr size_t kMax = size_t{1} << 40;
  std::string upper = v;
  for (char& ch : upper)
    if (std::string_view("kmgtb").find(ch) != std::string_view::npos)
      ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  size_t bytes = 0;
  try {
    bytes = parse_size(upper, flag);
  } catch (const Error& e) {
    fail(ErrorCode::invalid_argument, "chorus-perf: ", e.what(), " (see chorus-perf --help)");
  }
  if (bytes > kMax) bad(flag, v, "larger than 1 TiB");
  return bytes;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// A comma list of names (or "all": every value of the enum), for -d and -o.
template <typename T, typename Parse>
std::vector<T> parse_list(const std::string& flag, const std::string& v, int all, Parse parse,
                          const char* what) {
  std::vector<T> out;
  if (v == "all") {
    for (int x = 0; x < all; ++x) out.push_back(static_cast<T>(x));
    return out;
  }
  for (const std::string& name : split(v)) {
    const std::optional<T> x = parse(name);
    if (!x) bad(flag, name, str_cat("unknown ", what));
    out.push_back(*x);
  }
  if (out.empty()) bad(flag, v, str_cat("no ", what));
  return out;
}

// The spelling of `opt` the user wrote last (-b or --minbytes), for messages.
std::string spelling(const CLI::Option& opt, std::span<const std::string> args) {
  for (auto it = args.rbegin(); it != args.rend(); ++it) {
    std::string name = *it;
    if (name.rfind("--", 0) == 0)
      name = name.substr(0, name.find('='));  // --minbytes=4K
    else if (name.size() > 2 && name[0] == '-')
      name.resize(2);  // -b4K
    if (name.size() > 1 && name[0] == '-' && opt.check_name(name)) return name;
  }
  return opt.get_name();
}

// Both keep at least one space before the value, so that a value wider than
// its column (a 256 MiB TCP call takes 100000 us and more) still parses as
// its own field.
std::string fixed(double v, int width, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " %*.*f", width - 1, prec, v);
  return buf;
}
std::string right(const std::string& s, int width) {
  return s.size() >= static_cast<size_t>(width) ? " " + s : std::string(width - s.size(), ' ') + s;
}

std::string format_cell(const PerfCell& c, bool checked) {
  if (!c.measured) return right("N/A", 9) + right("N/A", 8) + right("N/A", 8) + right("N/A", 7);
  return fixed(c.time_us, 9, 2) + fixed(c.algbw, 8, 2) + fixed(c.busbw, 8, 2) +
         right(checked ? std::to_string(c.wrong) : "N/A", 7);
}

// "allreduce|allgather|...|all" and "sum prod ... bxor", from types.h's names.
std::string swept_names() {
  std::string out;
  for (Collective c : kSwept) out += str_cat(to_string(c), "|");
  return out + "all";
}
std::string op_names() {
  std::string out;
  for (int o = 0; o < kReduceOpCount; ++o)
    out += str_cat(o ? " " : "", to_string(static_cast<ReduceOp>(o)));
  return out;
}

}  // namespace

std::string perf_usage() {
  return "usage: chorus-perf <" + swept_names() + R"(> [flags]
       chorus-perf overlap [-b SIZE] [-e SIZE] [-n ROUNDS] [--ranks N] [--transport T] [--json FILE]
       chorus-perf --tuning-report
  -b, --minbytes SIZE      smallest size (default 8; K, M, G suffixes)
  -e, --maxbytes SIZE      largest size (default 32M)
  -f, --stepfactor X       size multiplier between rows (default 2)
  -n, --iters N            timed iterations per row (default 20)
  -w, --warmup_iters N     warm-up iterations per row (default 5)
      --min-time MS        raise the timed iterations of a row above -n until
                           it lasts about MS milliseconds (default 0: -n only;
                           --calibrate: 5)
  -c, --check 0|1          check every element of every rank (default 1)
  -d, --datatype T|all     int8 uint8 int32 uint32 int64 uint64 float16 bfloat16
                           float32 float64 (default float32)
  -o, --op OP|all          )" +
         op_names() + R"( (default sum; band, bor and bxor:
                           integer types only)
  -r, --root R             root of broadcast, reduce, gather and scatter (default 0)
  -z, --blocking 0|1       1: each call completes before the next; 0: the
                           calls are all launched before the first wait
  -a, --algo NAMES         auto (chorus chooses), all (every algorithm that
                           supports the case, one row each) or a comma list
      --ranks N            number of local ranks to start (default 2)
      --transport T        auto (shm between local processes), shm, tcp, or
                           inproc (ranks are threads of this one process)
      --buffers user|window
                           user: ordinary memory, as an application's
                           (default; what comparisons with MPI use); window:
                           buffers in shared windows (Communicator::window),
                           which collectives read in place (shm and inproc)
      --deterministic      AllReduce, ReduceScatter and Reduce with
                           CallOptions::deterministic (the same bits whatever
                           the algorithm; -a names the integer pass's)
      --plan               time each call as plan.start() + wait() of a Plan
                           prepared once per row (Communicator::prepare)
                           instead of a named call (blocking only)
      --json FILE          also write the rows as JSON
      --calibrate FILE     measure alpha/beta and the fastest algorithm at each
                           size of the sweep; write them to the tuning file
                           FILE (read through CHORUS_TUNING_FILE)
      --tuning-report      print what the calibration cache holds for this
                           host (XDG_CACHE_HOME/chorus): each entry's link
                           class, N, load, the picks the tuner learned and
                           its model corrections; runs no collective
  -h, --help               this text
overlap: an asynchronous AllReduce against computation on the caller's
thread: A = blocking AllReduce, C = compute alone (sized to A), T = submit,
compute, wait; overlap = (A + C - T) / min(A, C), medians over -n rounds
(default sizes 16M..16M); CHORUS_PROGRESS says who advances the call.
size = the total buffer as nccl-tests counts it (allgather: the gathered
output, reduce_scatter: the input, alltoall: one rank's input); GB = 1e9 B.
)";
}

PerfOptions parse_perf_args(std::span<const std::string> args) {
  PerfOptions o;
  CLI::App app{"chorus-perf", "chorus-perf"};
  app.set_help_flag("-h,--help");
  // Unknown flags are reported below, the first one by name, as nccl-tests' are.
  app.allow_extras();
  // A flag given twice: the last one counts.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> what;
  app.add_option("collective", what);
  // Values are taken as text and converted below, so that a bad one is
  // named with its flag in one message format.
  struct Flag {
    const char* names;
    std::string value;
    CLI::Option* option = nullptr;
  };
  Flag flags[] = {{"-b,--minbytes", ""}, {"-e,--maxbytes", ""}, {"-f,--stepfactor", ""},
                  {"-n,--iters", ""},    {"--min-time", ""},    {"-w,--warmup_iters", ""},
                  {"-c,--check", ""},    {"-z,--blocking", ""}, {"-r,--root", ""},
                  {"--ranks", ""},       {"-d,--datatype", ""}, {"-o,--op", ""},
                  {"-a,--algo", ""},     {"--transport", ""},   {"--json", ""},
                  {"--calibrate", ""},   {"--buffers", ""}};
  for (Flag& f : flags) f.option = app.add_option(f.names, f.value);
  app.add_flag("--tuning-report", o.tuning_report);
  app.add_flag("--deterministic", o.deterministic);
  app.add_flag("--plan", o.plan);
  app.add_flag("--corrupt-one", o.corrupt_one)->group("");        // test hook, not in --help
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // as CLI11 takes them
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    o.help = true;
    return o;
  } catch (const CLI::ArgumentMismatch&) {
    // Only a flag with no value after it: the last argument.
    bad(args.back(), "", "needs a value");
  } catch (const CLI::ParseError& e) {
    fail(ErrorCode::invalid_argument, "chorus-perf: ", e.what(), " (see chorus-perf --help)");
  }
  if (const std::vector<std::string> unknown = app.remaining(); !unknown.empty())
    bad("flag", unknown.front(), "unknown flag");
  if (what.size() > 1)
    bad("collective", what[1], str_cat("a second collective after '", what[0], "'"));

  // Each given flag, in the order of the table above.
  auto given = [&](const char* names) -> const Flag* {
    for (const Flag& f : flags)
      if (std::string_view(f.names) == names && f.option->count() > 0) return &f;
    return nullptr;
  };
  auto name = [&](const Flag& f) { return spelling(*f.option, args); };
  if (const Flag* f = given("-b,--minbytes")) o.min_bytes = parse_bytes(name(*f), f->value);
  if (const Flag* f = given("-e,--maxbytes")) o.max_bytes = parse_bytes(name(*f), f->value);
  if (const Flag* f = given("-f,--stepfactor")) {
    char* end = nullptr;
    o.step_factor = std::strtod(f->value.c_str(), &end);
    if (f->value.empty() || *end != '\0' || !(o.step_factor > 1.0) || !(o.step_factor <= 1024))
      bad(name(*f), f->value, "must be a number in (1, 1024]");
  }
  if (const Flag* f = given("-n,--iters"))
    o.iters = static_cast<int>(parse_int(name(*f), f->value, 1, 1000000));
  if (const Flag* f = given("--min-time"))
    o.min_time = std::chrono::microseconds(parse_int(name(*f), f->value, 0, 3600000) * 1000);
  if (const Flag* f = given("-w,--warmup_iters"))
    o.warmup = static_cast<int>(parse_int(name(*f), f->value, 0, 1000000));
  if (const Flag* f = given("-c,--check")) o.check = parse_int(name(*f), f->value, 0, 1) == 1;
  if (const Flag* f = given("-z,--blocking")) o.blocking = parse_int(name(*f), f->value, 0, 1) == 1;
  if (const Flag* f = given("-r,--root"))
    o.root = static_cast<int>(parse_int(name(*f), f->value, 0, 1 << 20));
  if (const Flag* f = given("--ranks"))
    o.ranks = static_cast<int>(parse_int(name(*f), f->value, 1, 1024));
  if (const Flag* f = given("-d,--datatype"))
    o.types = parse_list<DataType>(name(*f), f->value, kDataTypeCount, parse_data_type, "dtype");
  if (const Flag* f = given("-o,--op"))
    o.ops = parse_list<ReduceOp>(name(*f), f->value, kReduceOpCount, parse_reduce_op, "op");
  if (const Flag* f = given("-a,--algo")) {
    o.algorithms = split(f->value);
    if (o.algorithms.empty()) bad(name(*f), f->value, "no algorithm");
  }
  if (const Flag* f = given("--transport")) {
    const std::string& v = f->value;
    if (v != "auto" && !parse_transport_kind(v, requestable_transports()))
      bad(name(*f), v, str_cat("not one of auto, ", transport_names(requestable_transports())));
    o.transport = v;
  }
  if (const Flag* f = given("--buffers")) {
    if (f->value != "user" && f->value != "window")
      bad(name(*f), f->value, "not one of user, window");
    o.buffers = f->value;
  }
  if (const Flag* f = given("--json")) o.json_file = f->value;
  if (const Flag* f = given("--calibrate")) o.calibrate_file = f->value;

  if (o.tuning_report) {
    if (!what.empty()) bad("collective", what[0], "--tuning-report takes no collective");
    return o;
  }
  if (what.empty())
    bad("collective", "",
        "missing: name one of allreduce, allgather, reduce_scatter, "
        "broadcast, reduce, alltoall, all");
  if (what[0] == "overlap") {
    o.overlap = true;
    o.collectives = {Collective::allreduce};
    if (!given("-b,--minbytes")) o.min_bytes = size_t{16} << 20;
    if (!given("-e,--maxbytes")) o.max_bytes = std::max(o.min_bytes, size_t{16} << 20);
  } else if (what[0] == "all") {
    o.collectives.assign(std::begin(kSwept), std::end(kSwept));
  } else {
    auto c = parse_collective(what[0]);
    if (!c || *c == Collective::barrier) bad("collective", what[0], "unknown collective");
    o.collectives = {*c};
  }
  if (o.plan && !o.blocking) bad("--plan", "", "times blocking calls only: drop -z 0");
  if (o.min_bytes == 0) bad("-b", "0", "must be at least 1 byte");
  if (o.min_bytes > o.max_bytes)
    bad("-b", std::to_string(o.min_bytes), str_cat("larger than -e ", o.max_bytes));
  return o;
}

PerfHooks print_table(const PerfOptions& options, std::ostream* out, PerfHooks base) {
  if (out == nullptr) return base;
  base.start = [&options, out](const PerfReport& report) {
    *out << format_header(options, report) << std::flush;
  };
  auto section = std::make_shared<std::optional<Collective>>();
  base.row = [&options, out, section](const PerfRow& row) {
    if (options.collectives.size() > 1 && *section != row.collective)
      *out << "# " << to_string(row.collective) << "\n";
    *section = row.collective;
    *out << format_row(row) << std::flush;
  };
  return base;
}

std::string format_header(const PerfOptions& o, const PerfReport& rep) {
  std::string names;
  for (Collective c : o.collectives) names += str_cat(names.empty() ? "" : ",", to_string(c));
  std::string s;
  s += str_cat("# chorus-perf: ", names, " on ", rep.nranks, " ranks over ", rep.transport, ", ",
               o.buffers, " buffers, sizes ", o.min_bytes, "..", o.max_bytes, " B x", o.step_factor,
               ", ", o.iters, " iterations (", o.warmup, " warm-up), ",
               o.blocking ? "blocking" : "non-blocking", ", check ", o.check ? "on" : "off",
               o.deterministic ? ", deterministic" : "", "\n");
  char link[256];
  std::snprintf(link, sizeof link,
                "# link (ranks 0<->1 ping-pong at start-up): alpha %.3f us, beta %.3f GB/s\n",
                rep.link.alpha * 1e6, rep.link.beta / 1e9);
  s += link;
  if (rep.fitted) {
    s += "# bound(us) = max(ceil(log2 N) alpha, (N-1)M/(N beta)) (M/beta for broadcast, reduce)"
         " with the fitted model's alpha and its beta for a block of M/N bytes;"
         " %bound = bound / best time; GB = 1e9 B\n";
    s += "# pred(us) = the algorithm's Programs simulated on the fitted machine model (tuning file"
         " or calibration cache); err% = (best time - pred) / best time\n#\n";
  } else {
    s += "# bound(us) = max(ceil(log2 N) alpha, (N-1)M/(N beta)) (M/beta for broadcast, reduce);"
         " %bound = bound / best time; GB = 1e9 B\n";
    s += "# pred(us) = the algorithm's Programs simulated on a switch at that alpha and beta;"
         " err% = (best time - pred) / best time\n#\n";
  }
  // Appended piece by piece (GCC 12 misreports literal + string chains).
  auto line = [&s](std::initializer_list<std::string> pieces) {
    s += '#';
    for (const std::string& p : pieces) s += p;
    s += '\n';
  };
  const std::string pad_oop(55, ' '), pad_ip(21, ' ');
  line({pad_oop, "out-of-place", pad_ip, "in-place"});
  line({right("size", 11), right("count", 13), right("type", 10), right("redop", 7),
        right("root", 6), right("time", 9), right("algbw", 8), right("busbw", 8),
        right("#wrong", 7), right("time", 9), right("algbw", 8), right("busbw", 8),
        right("#wrong", 7), "  algo", std::string(14, ' '), right("bound", 10), right("%bound", 8),
        right("pred", 11), right("err%", 8)});
  line({right("(B)", 11), right("(elements)", 13), std::string(23, ' '), right("(us)", 9),
        right("(GB/s)", 8), right("(GB/s)", 8), std::string(7, ' '), right("(us)", 9),
        right("(GB/s)", 8), right("(GB/s)", 8), std::string(27, ' '), right("(us)", 10),
        std::string(8, ' '), right("(us)", 11)});
  return s;
}

std::string format_row(const PerfRow& r) {
  // Rows carry the check state in the cells: a checked cell's #wrong is a
  // number; rows of an unchecked sweep say N/A (see run_perf).
  std::string s;
  s += right(std::to_string(r.bytes), 12) + right(std::to_string(r.count), 13) +
       right(std::string(to_string(r.type)), 10) +
       right(r.op ? std::string(to_string(*r.op)) : "none", 7) + right(std::to_string(r.root), 6);
  const bool checked = r.out_of_place.wrong != static_cast<size_t>(-1);
  PerfCell oop = r.out_of_place, ip = r.in_place;
  const bool ip_checked = ip.wrong != static_cast<size_t>(-1);
  s += format_cell(oop, checked) + format_cell(ip, ip_checked);
  std::string algo = r.algorithm;
  if (algo.size() < 18) algo += std::string(18 - algo.size(), ' ');
  s += "  " + algo + fixed(r.bound_us, 10, 2) + fixed(r.pct_bound, 8, 1);
  s += std::isfinite(r.predicted_us) ? fixed(r.predicted_us, 11, 2) + fixed(r.err_pct, 8, 1)
                                     : right("N/A", 11) + right("N/A", 8);
  s += "\n";
  return s;
}

std::string format_footer(const PerfReport& rep) {
  char avg[64];
  std::snprintf(avg, sizeof avg, "%g", rep.avg_busbw);
  return str_cat("# Out of bounds values : ", rep.wrong, rep.wrong == 0 ? " OK" : " FAILED",
                 "\n# Avg bus bandwidth    : ", avg, "\n#\n");
}

std::string format_calibration(const TuningTable& table, int nranks, const std::string& file) {
  std::ostringstream out;
  for (const auto& [name, link] : table.links) {
    out << "# chorus-perf --calibrate: " << link.name << " N=" << nranks << " alpha "
        << link.alpha * 1e6 << " us, beta " << link.beta / 1e9 << " GB/s (streaming)"
        << (link.half_duplex ? str_cat(", half duplex from ", link.half_duplex_from, " B") : "")
        << "\n";
    for (const RatePoint& p : link.curve.points)
      out << "#   beta at " << format_size(static_cast<size_t>(p.bytes)) << ": "
          << 1e-9 / p.s_per_byte << " GB/s\n";
  }
  out << "# host: memory "
      << (table.host.memory > 0 ? str_cat(table.host.memory / 1e9, " GB/s") : "not limiting")
      << ", " << table.host.cores << " cores\n";
  for (const RatePoint& p : table.compute.copy.points)
    out << "#   copy at " << format_size(static_cast<size_t>(p.bytes)) << ": "
        << 1e-9 / p.s_per_byte << " GB/s\n";
  if (const RateCurve* k = table.compute.kernel(DataType::float32, ReduceOp::sum))
    for (const RatePoint& p : k->points)
      out << "#   float32 sum at " << format_size(static_cast<size_t>(p.bytes)) << ": "
          << 1e-9 / p.s_per_byte << " GB/s\n";
  for (const TuningRule& r : table.rules)
    out << "#   " << to_string(r.collective) << " from " << r.min_bytes << " B: " << r.algorithm
        << "\n";
  out << "# written to " << file << " (use it with CHORUS_TUNING_FILE=" << file << ")\n";
  return out.str();
}

}  // namespace chorus::perf
