#include "perf/perf.h"

#include "algorithms/algorithm.h"
#include "api/communicator_impl.h"
#include "core/check.h"
#include "perf/perf_check.h"
#include "schedule/rank_math.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>

namespace chorus::perf {
namespace {

// The collectives chorus-perf sweeps ("all" = these, in this order).
constexpr Collective kSwept[] = {Collective::allreduce,      Collective::allgather,
                                 Collective::reduce_scatter, Collective::broadcast,
                                 Collective::reduce,         Collective::alltoall};

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}
bool rooted(Collective c) {
  return c == Collective::broadcast || c == Collective::reduce;
}
// Collectives whose nccl-tests size is N blocks of the per-rank API count.
bool blocked(Collective c) {
  return c == Collective::allgather || c == Collective::reduce_scatter || c == Collective::alltoall;
}

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

// "8", "4K", "64M", "1G" (binary prefixes, as nccl-tests reads -b and -e).
size_t parse_bytes(const std::string& flag, const std::string& v) {
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  if (digits == 0) bad(flag, v, "not a size (e.g. 8, 64K, 32M, 1G)");
  std::string unit = v.substr(digits);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  unsigned shift = 0;
  if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (!unit.empty())
    bad(flag, v, "unknown size suffix (K, M or G)");
  const auto n = static_cast<size_t>(parse_int(flag, v.substr(0, digits), 0, 1LL << 40));
  if (n > (size_t{1} << 40) >> shift) bad(flag, v, "larger than 1 TiB");
  return n << shift;
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

// Aligned, pre-faulted buffer (RAII).
struct Buffer {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data;
  explicit Buffer(size_t bytes) {
    constexpr size_t kAlign = 4096;
    const size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    data.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded)));
    if (!data) fail(ErrorCode::system, "chorus-perf: cannot allocate ", rounded, " bytes");
    std::memset(data.get(), 0, rounded);  // fault the pages in before timing
  }
  std::byte* get() const { return data.get(); }
};

using Seconds = std::chrono::duration<double>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One row to run: a collective at one size, dtype, op and algorithm.
struct RowPlan {
  Collective collective;
  size_t bytes;
  size_t api_count;  // count as the API takes it
  DataType type;
  ReduceOp op;
  int root;
  std::string call_algorithm;  // "" lets chorus choose
  std::string shown_algorithm;
};

std::vector<RowPlan> plan_rows(Communicator& comm, const PerfOptions& o) {
  const int n = comm.size();
  const auto nn = static_cast<size_t>(n);
  // Every named algorithm must exist for at least one requested collective.
  for (const std::string& a : o.algorithms) {
    if (a == "auto" || a == "all") continue;
    bool known = false;
    std::string names;
    for (Collective c : o.collectives) {
      known |= find_algorithm(c, a) != nullptr;
      names += str_cat(names.empty() ? "" : "; ", to_string(c), ": ", algorithm_names(c));
    }
    if (!known) bad("-a", a, str_cat("no such algorithm (known: ", names, ")"));
  }
  if (o.root >= n) bad("-r", std::to_string(o.root), str_cat("root outside [0, ", n, ")"));
  std::vector<RowPlan> rows;
  for (Collective c : o.collectives) {
    const std::vector<ReduceOp> ops = reduces(c) ? o.ops : std::vector<ReduceOp>{ReduceOp::sum};
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
      for (DataType t : o.types) {
        const size_t es = dtype_size(t);
        const size_t unit = blocked(c) ? es * nn : es;
        const size_t api_count = bytes / unit;
        if (api_count == 0) continue;  // below one element per block
        for (ReduceOp op : ops) {
          const int root = rooted(c) ? o.root : 0;
          CollectiveSpec spec{
              c, n, comm.rank(), api_count, es, root, comm.impl().config().segment_bytes};
          auto add = [&](std::string call, std::string shown) {
            rows.push_back(
                {c, api_count * unit, api_count, t, op, root, std::move(call), std::move(shown)});
          };
          for (const std::string& a : o.algorithms) {
            if (a == "auto") {
              add("", std::string(comm.impl().choose(spec, CallOptions{}).name));
            } else if (a == "all") {
              for (const Algorithm* algo : algorithms_for(c))
                if (supports(*algo, spec)) add(std::string(algo->name), std::string(algo->name));
            } else if (const Algorithm* algo = find_algorithm(c, a); algo && supports(*algo, spec)) {
              add(a, a);
            }
          }
        }
      }
      const auto next = static_cast<size_t>(static_cast<double>(bytes) * o.step_factor);
      bytes = std::max(next, bytes + 1);
    }
  }
  return rows;
}

// Issues one call of a row on the given buffers.
void issue(Communicator& comm, const RowPlan& p, const void* send, void* recv,
           const CallOptions& opts) {
  switch (p.collective) {
    case Collective::allreduce:
      comm.allreduce(send, recv, p.api_count, p.type, p.op, opts);
      return;
    case Collective::allgather:
      comm.allgather(send, recv, p.api_count, p.type, opts);
      return;
    case Collective::reduce_scatter:
      comm.reduce_scatter(send, recv, p.api_count, p.type, p.op, opts);
      return;
    case Collective::broadcast:
      comm.broadcast(send, recv, p.api_count, p.type, p.root, opts);
      return;
    case Collective::reduce:
      comm.reduce(send, recv, p.api_count, p.type, p.op, p.root, opts);
      return;
    case Collective::alltoall:
      comm.alltoall(send, recv, p.api_count, p.type, opts);
      return;
    case Collective::barrier:
      comm.barrier(opts);
      return;
  }
}

// Where input and output live for one placement: out of place they are the
// two buffers; in place the input is a window of the output (or, for
// reduce_scatter, the output a window of the input), as the API defines it.
struct Placement {
  const void* send;
  void* recv;
  std::byte* input;  // where to write the input
};
std::optional<Placement> place(const RowPlan& p, int rank, bool in_place, std::byte* s,
                               std::byte* r) {
  if (!in_place) return Placement{s, r, s};
  const size_t off = static_cast<size_t>(rank) * p.api_count * dtype_size(p.type);
  switch (p.collective) {
    case Collective::allgather:
      return Placement{r + off, r, r + off};
    case Collective::reduce_scatter:
      return Placement{r, r + off, r};
    case Collective::alltoall:
      return std::nullopt;  // no in-place form
    default:
      return Placement{r, r, r};
  }
}

// -n, or with --min-time as many iterations as a probe of a few calls says
// the row needs to last that long (capped at 10^6); every rank takes the
// slowest rank's estimate, so that all run the same number of calls.
int timed_iterations(Communicator& comm, const PerfOptions& o, const RowPlan& p, const void* send,
                     void* recv, const CallOptions& opts) {
  if (o.min_time.count() <= 0) return o.iters;
  constexpr int kProbeCalls = 3;
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kProbeCalls; ++i) issue(comm, p, send, recv, opts);
  double per_call = Seconds(std::chrono::steady_clock::now() - t0).count() / kProbeCalls;
  comm.allreduce(&per_call, &per_call, 1, DataType::float64, ReduceOp::max);
  const double want = std::chrono::duration<double>(o.min_time).count() / std::max(per_call, 1e-9);
  return static_cast<int>(std::clamp(std::ceil(want), static_cast<double>(o.iters), 1e6));
}

PerfCell measure(Communicator& comm, const PerfOptions& o, const RowPlan& p, bool in_place,
                 std::byte* sbuf, std::byte* rbuf) {
  PerfCell cell;
  const auto pl = place(p, comm.rank(), in_place, sbuf, rbuf);
  if (!pl) return cell;
  cell.measured = true;
  CallOptions opts;
  opts.algorithm = p.call_algorithm;
  const int n = comm.size();
  CheckCase cc{p.collective, p.type, p.op, n, comm.rank(), p.api_count, p.root};
  const BufferCounts counts =
      buffer_counts({p.collective, n, comm.rank(), p.api_count, dtype_size(p.type), p.root});
  fill_input(cc, pl->input);

  for (int i = 0; i < o.warmup; ++i) issue(comm, p, pl->send, pl->recv, opts);
  const int iters = timed_iterations(comm, o, p, pl->send, pl->recv, opts);
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.blocking && p.collective == Collective::allreduce) {
    // Non-blocking launch: every call in flight before the first wait.
    std::vector<Work> works;
    works.reserve(static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i)
      works.push_back(comm.allreduce_async(pl->send, pl->recv, p.api_count, p.type, p.op, opts));
    for (Work& w : works) w.wait();
  } else {
    for (int i = 0; i < iters; ++i) issue(comm, p, pl->send, pl->recv, opts);
  }
  double secs = Seconds(std::chrono::steady_clock::now() - t0).count() / iters;
  // The row's time is the slowest rank's.
  comm.allreduce(&secs, &secs, 1, DataType::float64, ReduceOp::max);
  cell.time_us = secs * 1e6;
  cell.iters = iters;
  cell.algbw = secs > 0 ? static_cast<double>(p.bytes) / secs / 1e9 : 0;
  cell.busbw = cell.algbw * busbw_factor(p.collective, n);

  if (o.check) {
    // A fresh call on fresh inputs with a poisoned output.
    const bool output_is_input =
        in_place &&
        (p.collective == Collective::allreduce || p.collective == Collective::broadcast ||
         p.collective == Collective::reduce || p.collective == Collective::reduce_scatter);
    if (!output_is_input) poison(p.type, pl->recv, counts.output);
    fill_input(cc, pl->input);
    issue(comm, p, pl->send, pl->recv, opts);
    if (o.corrupt_one && comm.rank() == n - 1 && counts.output > 0 &&
        (p.collective != Collective::reduce || comm.rank() == p.root)) {
      auto* first = static_cast<std::byte*>(pl->recv);
      first[0] = ~first[0];
    }
    uint64_t wrong = count_wrong(cc, pl->recv);
    comm.allreduce(&wrong, &wrong, 1, DataType::uint64, ReduceOp::sum);
    cell.wrong = wrong;
  }
  return cell;
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

}  // namespace

std::string perf_usage() {
  return R"(usage: chorus-perf <allreduce|allgather|reduce_scatter|broadcast|reduce|alltoall|all> [flags]
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
  -o, --op OP|all          sum prod min max avg (default sum)
  -r, --root R             root of broadcast and reduce (default 0)
  -z, --blocking 0|1       1: each call completes before the next; 0: allreduce
                           calls are all launched before the first wait (the
                           other collectives have only a blocking form)
  -a, --algo NAMES         auto (chorus chooses), all (every algorithm that
                           supports the case, one row each) or a comma list
      --ranks N            number of local ranks to start (default 2)
      --transport T        auto (shm between local processes), shm, tcp, or
                           inproc (ranks are threads of this one process)
      --json FILE          also write the rows as JSON
      --calibrate FILE     measure alpha/beta and the fastest algorithm at each
                           size of the sweep; write them to the tuning file
                           FILE (read through CHORUS_TUNING_FILE)
  -h, --help               this text
size = the total buffer as nccl-tests counts it (allgather: the gathered
output, reduce_scatter: the input, alltoall: one rank's input); GB = 1e9 B.
)";
}

PerfOptions parse_perf_args(std::span<const std::string> args) {
  PerfOptions o;
  std::optional<std::string> what;
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    if (a == "-h" || a == "--help") {
      o.help = true;
      continue;
    }
    if (a == "--corrupt-one") {  // test hook, not in --help
      o.corrupt_one = true;
      continue;
    }
    if (a.empty() || a[0] != '-') {
      if (what) bad("collective", a, str_cat("a second collective after '", *what, "'"));
      what = a;
      continue;
    }
    if (k + 1 >= args.size()) bad(a, "", "needs a value");
    const std::string& v = args[++k];
    if (a == "-b" || a == "--minbytes")
      o.min_bytes = parse_bytes(a, v);
    else if (a == "-e" || a == "--maxbytes")
      o.max_bytes = parse_bytes(a, v);
    else if (a == "-f" || a == "--stepfactor") {
      char* end = nullptr;
      o.step_factor = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.step_factor > 1.0) || !(o.step_factor <= 1024))
        bad(a, v, "must be a number in (1, 1024]");
    } else if (a == "-n" || a == "--iters")
      o.iters = static_cast<int>(parse_int(a, v, 1, 1000000));
    else if (a == "--min-time")
      o.min_time = std::chrono::microseconds(parse_int(a, v, 0, 3600000) * 1000);
    else if (a == "-w" || a == "--warmup_iters")
      o.warmup = static_cast<int>(parse_int(a, v, 0, 1000000));
    else if (a == "-c" || a == "--check")
      o.check = parse_int(a, v, 0, 1) == 1;
    else if (a == "-z" || a == "--blocking")
      o.blocking = parse_int(a, v, 0, 1) == 1;
    else if (a == "-r" || a == "--root")
      o.root = static_cast<int>(parse_int(a, v, 0, 1 << 20));
    else if (a == "--ranks") {
      o.ranks = static_cast<int>(parse_int(a, v, 1, 1024));
      o.ranks_given = true;
    } else if (a == "-d" || a == "--datatype") {
      o.types.clear();
      if (v == "all") {
        for (int t = 0; t < kDataTypeCount; ++t) o.types.push_back(static_cast<DataType>(t));
      } else {
        for (const std::string& name : split(v)) {
          auto t = parse_data_type(name);
          if (!t) bad(a, name, "unknown dtype");
          o.types.push_back(*t);
        }
      }
      if (o.types.empty()) bad(a, v, "no dtype");
    } else if (a == "-o" || a == "--op") {
      o.ops.clear();
      if (v == "all") {
        for (int x = 0; x < kReduceOpCount; ++x) o.ops.push_back(static_cast<ReduceOp>(x));
      } else {
        for (const std::string& name : split(v)) {
          auto op = parse_reduce_op(name);
          if (!op) bad(a, name, "unknown op");
          o.ops.push_back(*op);
        }
      }
      if (o.ops.empty()) bad(a, v, "no op");
    } else if (a == "-a" || a == "--algo") {
      o.algorithms = split(v);
      if (o.algorithms.empty()) bad(a, v, "no algorithm");
    } else if (a == "--transport") {
      if (v != "auto" && v != "inproc" && v != "shm" && v != "tcp")
        bad(a, v, "not one of auto, inproc, shm, tcp");
      o.transport = v;
    } else if (a == "--json") {
      o.json_file = v;
    } else if (a == "--calibrate") {
      o.calibrate_file = v;
    } else {
      bad("flag", a, "unknown flag");
    }
  }
  if (o.help) return o;
  if (!what)
    bad("collective", "",
        "missing: name one of allreduce, allgather, reduce_scatter, "
        "broadcast, reduce, alltoall, all");
  if (*what == "all") {
    o.collectives.assign(std::begin(kSwept), std::end(kSwept));
  } else {
    auto c = parse_collective(*what);
    if (!c || *c == Collective::barrier) bad("collective", *what, "unknown collective");
    o.collectives = {*c};
  }
  if (o.min_bytes == 0) bad("-b", "0", "must be at least 1 byte");
  if (o.min_bytes > o.max_bytes)
    bad("-b", std::to_string(o.min_bytes), str_cat("larger than -e ", o.max_bytes));
  return o;
}

double busbw_factor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::allreduce:
      return 2 * (n - 1) / n;
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
      return (n - 1) / n;
    default:
      return 1;
  }
}

double lower_bound_seconds(Collective c, int nranks, double bytes, const LinkEstimate& link) {
  if (nranks <= 1 || link.beta <= 0) return 0;
  const double latency = ceil_log2(nranks) * link.alpha;
  const double n = nranks;
  const double bandwidth = rooted(c) ? bytes / link.beta : (n - 1) * bytes / (n * link.beta);
  return std::max(latency, bandwidth);
}

LinkEstimate measure_link(Communicator& comm) {
  LinkEstimate est;
  if (comm.size() < 2) return est;
  constexpr size_t kSmall = 8;
  constexpr size_t kLarge = size_t{4} << 20;
  constexpr int kSmallTrials = 200;
  constexpr int kLargeTrials = 10;
  constexpr int kWarmup = 3;
  Buffer buf(kLarge);
  const int r = comm.rank();
  auto half_round_trip = [&](size_t bytes, int trials) {
    std::vector<double> t;
    for (int i = 0; i < trials + kWarmup; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (r == 0) {
        comm.send(buf.get(), bytes, DataType::uint8, 1);
        comm.recv(buf.get(), bytes, DataType::uint8, 1);
      } else if (r == 1) {
        comm.recv(buf.get(), bytes, DataType::uint8, 0);
        comm.send(buf.get(), bytes, DataType::uint8, 0);
      }
      if (i >= kWarmup) t.push_back(Seconds(std::chrono::steady_clock::now() - t0).count() / 2);
    }
    return median(t);
  };
  comm.barrier();
  double figures[2] = {0, 0};
  figures[0] = half_round_trip(kSmall, kSmallTrials);
  const double large = half_round_trip(kLarge, kLargeTrials);
  // beta from the large message's transfer time beyond the fixed cost.
  figures[1] = static_cast<double>(kLarge) / std::max(large - figures[0], 1e-9);
  comm.broadcast(figures, figures, 2, DataType::float64, 0);
  est.alpha = figures[0];
  est.beta = figures[1];
  return est;
}

std::string format_header(const PerfOptions& o, const PerfReport& rep) {
  std::string names;
  for (Collective c : o.collectives) names += str_cat(names.empty() ? "" : ",", to_string(c));
  std::string s;
  s += str_cat("# chorus-perf: ", names, " on ", rep.nranks, " ranks over ", rep.transport,
               ", sizes ", o.min_bytes, "..", o.max_bytes, " B x", o.step_factor, ", ", o.iters,
               " iterations (", o.warmup, " warm-up), ", o.blocking ? "blocking" : "non-blocking",
               ", check ", o.check ? "on" : "off", "\n");
  char link[256];
  std::snprintf(link, sizeof link,
                "# link (ranks 0<->1 ping-pong at start-up): alpha %.3f us, beta %.3f GB/s\n",
                rep.link.alpha * 1e6, rep.link.beta / 1e9);
  s += link;
  s += "# bound(us) = max(ceil(log2 N) alpha, (N-1)M/(N beta)) (M/beta for broadcast, reduce);"
       " %bound = bound / best time; GB = 1e9 B\n#\n";
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
        right("#wrong", 7), "  algo", std::string(14, ' '), right("bound", 10),
        right("%bound", 8)});
  line({right("(B)", 11), right("(elements)", 13), std::string(23, ' '), right("(us)", 9),
        right("(GB/s)", 8), right("(GB/s)", 8), std::string(7, ' '), right("(us)", 9),
        right("(GB/s)", 8), right("(GB/s)", 8), std::string(27, ' '), right("(us)", 10)});
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
  s += "  " + algo + fixed(r.bound_us, 10, 2) + fixed(r.pct_bound, 8, 1) + "\n";
  return s;
}

std::string format_footer(const PerfReport& rep) {
  char avg[64];
  std::snprintf(avg, sizeof avg, "%g", rep.avg_busbw);
  return str_cat("# Out of bounds values : ", rep.wrong, rep.wrong == 0 ? " OK" : " FAILED",
                 "\n# Avg bus bandwidth    : ", avg, "\n#\n");
}

std::string to_json(const PerfOptions& o, const PerfReport& rep) {
  nlohmann::json j;
  j["nranks"] = rep.nranks;
  j["transport"] = rep.transport;
  j["transport_requested"] = o.transport;
  j["alpha_us"] = rep.link.alpha * 1e6;
  j["beta_GBps"] = rep.link.beta / 1e9;
  j["wrong"] = rep.wrong;
  j["avg_busbw_GBps"] = rep.avg_busbw;
  auto cell = [](const PerfCell& c) {
    nlohmann::json x;
    if (!c.measured) return nlohmann::json(nullptr);
    x["time_us"] = c.time_us;
    x["algbw_GBps"] = c.algbw;
    x["busbw_GBps"] = c.busbw;
    if (c.wrong != static_cast<size_t>(-1)) x["wrong"] = c.wrong;
    return x;
  };
  j["rows"] = nlohmann::json::array();
  for (const PerfRow& r : rep.rows) {
    nlohmann::json x;
    x["collective"] = std::string(to_string(r.collective));
    x["size_B"] = r.bytes;
    x["count"] = r.count;
    x["type"] = std::string(to_string(r.type));
    x["redop"] = r.op ? std::string(to_string(*r.op)) : "none";
    x["root"] = r.root;
    x["out_of_place"] = cell(r.out_of_place);
    x["in_place"] = cell(r.in_place);
    x["algo"] = r.algorithm;
    x["bound_us"] = r.bound_us;
    x["pct_bound"] = r.pct_bound;
    j["rows"].push_back(std::move(x));
  }
  return j.dump(1);
}

PerfReport run_perf(Communicator& comm, const PerfOptions& o, std::ostream* out,
                    const PerfHooks& hooks) {
  PerfReport rep;
  rep.nranks = comm.size();
  rep.transport = std::string(comm.impl().transport().name());
  const bool printer = comm.rank() == 0 && out != nullptr;
  const std::vector<RowPlan> plan = plan_rows(comm, o);
  rep.link = measure_link(comm);
  if (printer) *out << format_header(o, rep) << std::flush;
  Buffer sbuf(o.max_bytes);
  Buffer rbuf(o.max_bytes);
  double bw_sum = 0;
  size_t bw_cells = 0;
  std::optional<Collective> section;
  for (size_t k = 0; k < plan.size(); ++k) {
    const RowPlan& p = plan[k];
    if (comm.rank() == 0 && hooks.progress)
      hooks.progress(str_cat(k + 1, "/", plan.size(), " ", to_string(p.collective), " ", p.bytes,
                             " B ", to_string(p.type), " ", p.shown_algorithm));
    PerfRow row;
    row.collective = p.collective;
    row.bytes = p.bytes;
    row.count = p.bytes / dtype_size(p.type);
    row.type = p.type;
    if (reduces(p.collective)) row.op = p.op;
    row.root = rooted(p.collective) ? p.root : -1;
    row.algorithm = p.shown_algorithm;
    row.out_of_place = measure(comm, o, p, false, sbuf.get(), rbuf.get());
    row.in_place = measure(comm, o, p, true, sbuf.get(), rbuf.get());
    for (PerfCell* c : {&row.out_of_place, &row.in_place}) {
      if (!c->measured) continue;
      rep.wrong += c->wrong;
      bw_sum += c->busbw;
      ++bw_cells;
      if (!o.check) c->wrong = static_cast<size_t>(-1);  // shown as N/A
    }
    const double best =
        std::min(row.out_of_place.time_us, row.in_place.measured ? row.in_place.time_us : 1e300);
    row.bound_us =
        lower_bound_seconds(p.collective, rep.nranks, static_cast<double>(p.bytes), rep.link) * 1e6;
    row.pct_bound = best > 0 ? 100.0 * row.bound_us / best : 0;
    if (printer) {
      if (o.collectives.size() > 1 && section != p.collective)
        *out << "# " << to_string(p.collective) << "\n";
      *out << format_row(row) << std::flush;
    }
    section = p.collective;
    rep.rows.push_back(std::move(row));
  }
  rep.avg_busbw = bw_cells ? bw_sum / static_cast<double>(bw_cells) : 0;
  if (printer) *out << format_footer(rep) << std::flush;
  return rep;
}

}  // namespace chorus::perf
