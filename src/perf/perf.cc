#include "perf/perf.h"

#include "algorithms/algorithm.h"
#include "algorithms/deterministic.h"
#include "core/check.h"
#include "core/log.h"
#include "engine/communicator_impl.h"
#include "model/cost_model.h"
#include "perf/perf_check.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "tune/calibration.h"
#include "tune/model_sim.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

namespace chorus::perf {
namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& why) {
  fail(ErrorCode::invalid_argument, "chorus-perf: ", flag, " '", value, "': ", why,
       " (see chorus-perf --help)");
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
  bool windows = false;         // the ranks share windows (shm, inproc)
  bool window_buffers = false;  // --buffers window
  std::shared_ptr<const std::vector<int>> host_of = nullptr;  // the communicator's hosts
};

// The spec of a row's call on rank 0, as the communicator makes it.
CollectiveSpec row_spec(const RowPlan& p, int n, size_t segment_bytes, int rank = 0) {
  CollectiveSpec spec{p.collective,       n,      rank,         p.api_count,
                      dtype_size(p.type), p.root, segment_bytes};
  spec.windows = p.windows;
  spec.window_buffers = p.window_buffers;
  spec.host_of = p.host_of;
  return spec;
}

std::vector<RowPlan> plan_rows(Communicator& comm, const PerfOptions& o) {
  const int n = comm.size();
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
        // The model's M of one element per API count (N of them where the
        // size is N blocks); a row's size is a whole number of those.
        const auto unit = static_cast<size_t>(model_bytes(c, n, 1, es));
        const size_t api_count = bytes / unit;
        if (api_count == 0) continue;  // below one element per block
        for (ReduceOp op : ops) {
          // A sweep of several types or ops skips the bitwise ops on floats;
          // one asked for alone is the call's own error (applies()).
          const bool sweep = o.ops.size() > 1 || o.types.size() > 1;
          if (reduces(c) && sweep && !applies(op, t)) continue;
          const int root = rooted(c) ? o.root : 0;
          CollectiveSpec spec{
              c, n, comm.rank(), api_count, es, root, detail::impl_of(comm).config().segment_bytes};
          spec.windows = detail::impl_of(comm).transport().shares_memory();
          spec.window_buffers = o.buffers == "window";
          spec.host_of = detail::impl_of(comm).host_of();
          auto add = [&](std::string call, std::string shown) {
            rows.push_back({c, api_count * unit, api_count, t, op, root, std::move(call),
                            std::move(shown), spec.windows, spec.window_buffers, spec.host_of});
          };
          for (const std::string& a : o.algorithms) {
            if (a == "auto") {
              add("", std::string(detail::impl_of(comm).choose(spec, CallOptions{}).name));
            } else if (a == "all") {
              for (const Algorithm* algo : algorithms_for(c))
                if (supports(*algo, spec)) add(std::string(algo->name), std::string(algo->name));
            } else if (const Algorithm* algo = find_algorithm(c, a);
                       algo && supports(*algo, spec)) {
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

// The model's time of one call of `p`, in microseconds: its algorithm's
// Programs on chorus-sim's switch with the link's alpha and beta.
double predicted_us(const RowPlan& p, int n, size_t segment_bytes, const LinkEstimate& link) {
  const Algorithm* algo = find_algorithm(p.collective, p.shown_algorithm);
  if (algo == nullptr || !(link.beta > 0)) return std::nan("");
  const size_t es = dtype_size(p.type);
  const std::vector<Program> programs = build_all(*algo, row_spec(p, n, segment_bytes));
  const LinkParams params{"link", link.alpha, link.beta};
  const auto topology = make_topology("switch", n, params, params);
  SimOptions options;
  options.elem_size = es;
  return simulate(programs, *topology, options).time * 1e6;
}

// The same on the communicator's fitted machine model (tune/model_sim.h), for
// the row's dtype and op.
double model_predicted_us(const RowPlan& p, int n, size_t segment_bytes, const MachineSim& model) {
  const Algorithm* algo = find_algorithm(p.collective, p.shown_algorithm);
  if (algo == nullptr) return std::nan("");
  return model.time(*algo, row_spec(p, n, segment_bytes), p.type, p.op) * 1e6;
}

// A deterministic row's time: the plan its calls run (algorithms/deterministic.h,
// with the communicator's picks), on the fitted model where there is one,
// else on chorus-sim's switch with the link's alpha and beta.
double deterministic_predicted_us(const DeterministicPlan& plan, int n, const MachineSim* model,
                                  const LinkEstimate& link) {
  if (model != nullptr) return 1e6 * model->deterministic_plan_time(plan);
  if (!(link.beta > 0)) return std::nan("");
  const LinkParams params{"link", link.alpha, link.beta};
  const auto topology = make_topology("switch", n, params, params);
  return 1e6 * simulate_deterministic_plan(plan, *topology, SimOptions{});
}

// One call of a row on the given buffers.
Call row_call(const RowPlan& p, const void* send, void* recv, const CallOptions& opts) {
  return {Call::Kind::collective,
          p.collective,
          send,
          recv,
          p.api_count,
          p.type,
          p.op,
          p.root,
          -1,
          opts};
}

// Where input and output live for one placement: out of place they are the
// two buffers; in place as the collective's in-place form says (collective.h).
struct Placement {
  const void* send;
  void* recv;
  std::byte* input;  // where to write the input
};
std::optional<Placement> place(const RowPlan& p, int rank, bool in_place, std::byte* s,
                               std::byte* r) {
  if (!in_place) return Placement{s, r, s};
  const size_t off = static_cast<size_t>(rank) * p.api_count * dtype_size(p.type);
  switch (traits(p.collective).in_place) {
    case InPlace::same:
      return Placement{r, r, r};
    case InPlace::send_in_recv:
      return Placement{r + off, r, r + off};
    case InPlace::recv_in_send:
      return Placement{r, r + off, r};
    case InPlace::none:
      break;
  }
  return std::nullopt;
}

// The harness's own reductions (the slowest rank's time, the wrong-element
// count) name a two-sided algorithm, so that they neither create windows nor
// take part in learning: a one-sided pick makes its windows at its first
// call, which fell on the first row's last timed calls (a fresh job at N = 4
// on 2 cores timed its first row 2-3x slow), and an exploring class would
// run other algorithms between rows.
const CallOptions kHarness = [] {
  CallOptions o;
  o.algorithm = "recursive_doubling";
  return o;
}();

// -n, or with --min-time as many iterations as a probe of a few calls says
// the row needs (iterations_for); every rank takes the slowest rank's
// estimate, so that all run the same number of calls.
int timed_iterations(Communicator& comm, const PerfOptions& o, const RowPlan& p, const void* send,
                     void* recv, const CallOptions& opts) {
  if (o.min_time.count() <= 0) return o.iters;
  constexpr int kProbeCalls = 3;
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  const Call call = row_call(p, send, recv, opts);
  for (int i = 0; i < kProbeCalls; ++i) comm.run(call);
  double per_call = Seconds(std::chrono::steady_clock::now() - t0).count() / kProbeCalls;
  comm.allreduce(&per_call, &per_call, 1, DataType::float64, ReduceOp::max, kHarness);
  return iterations_for(o.min_time, per_call, o.iters);
}

PerfCell measure(Communicator& comm, const PerfOptions& o, const RowPlan& p, bool in_place,
                 std::byte* sbuf, std::byte* rbuf) {
  PerfCell cell;
  const auto pl = place(p, comm.rank(), in_place, sbuf, rbuf);
  if (!pl) return cell;
  cell.measured = true;
  CallOptions opts;
  opts.algorithm = p.call_algorithm;
  opts.deterministic = o.deterministic;
  const int n = comm.size();
  CheckCase cc{p.collective, p.type, p.op, n, comm.rank(), p.api_count, p.root};
  const BufferCounts counts =
      buffer_counts({p.collective, n, comm.rank(), p.api_count, dtype_size(p.type), p.root});
  fill_input(cc, pl->input);

  const Call call = row_call(p, pl->send, pl->recv, opts);
  for (int i = 0; i < o.warmup; ++i) comm.run(call);
  const int iters = timed_iterations(comm, o, p, pl->send, pl->recv, opts);
  std::optional<Plan> plan;
  if (o.plan) {
    plan = comm.prepare(call);
    for (int i = 0; i < o.warmup; ++i) plan->start().wait();
  }
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (plan) {
    for (int i = 0; i < iters; ++i) plan->start().wait();
  } else if (!o.blocking) {
    // Non-blocking launch: every call in flight before the first wait.
    std::vector<Work> works;
    works.reserve(static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i) works.push_back(comm.submit(call));
    for (Work& w : works) w.wait();
  } else {
    for (int i = 0; i < iters; ++i) comm.run(call);
  }
  double secs = Seconds(std::chrono::steady_clock::now() - t0).count() / iters;
  // The row's time is the slowest rank's.
  comm.allreduce(&secs, &secs, 1, DataType::float64, ReduceOp::max, kHarness);
  cell.time_us = secs * 1e6;
  cell.iters = iters;
  cell.algbw = secs > 0 ? static_cast<double>(p.bytes) / secs / 1e9 : 0;
  cell.busbw = cell.algbw * busbw_factor(p.collective, n);

  if (o.check) {
    // A fresh call on fresh inputs with a poisoned output.
    // In place the output is (reduce_scatter: inside) the input: no poison.
    const InPlace form = traits(p.collective).in_place;
    const bool output_is_input =
        in_place && (form == InPlace::same || form == InPlace::recv_in_send);
    if (!output_is_input) poison(p.type, pl->recv, counts.output);
    fill_input(cc, pl->input);
    if (plan)
      plan->start().wait();
    else
      comm.run(call);
    if (o.corrupt_one && comm.rank() == n - 1 && counts.output > 0 &&
        uses_output(p.collective, comm.rank(), p.root)) {
      auto* first = static_cast<std::byte*>(pl->recv);
      first[0] = ~first[0];
    }
    uint64_t wrong = count_wrong(cc, pl->recv);
    comm.allreduce(&wrong, &wrong, 1, DataType::uint64, ReduceOp::sum, kHarness);
    cell.wrong = wrong;
  }
  return cell;
}

}  // namespace

int iterations_for(std::chrono::microseconds min_time, double per_call, int iters) {
  constexpr double kMaxIterations = 1e6;
  if (min_time.count() <= 0) return iters;
  // A call too fast to measure counts as 1 ns.
  const double want = Seconds(min_time).count() / std::max(per_call, 1e-9);
  return static_cast<int>(std::clamp(std::ceil(want), static_cast<double>(iters), kMaxIterations));
}

double busbw_factor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::allreduce:
      return 2 * (n - 1) / n;
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
    case Collective::gather:
    case Collective::scatter:
      return (n - 1) / n;
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::barrier:
      return 1;
  }
  return 1;
}

LinkEstimate measure_link(Communicator& comm) {
  Transport& transport = detail::impl_of(comm).transport();
  const LinkParams p =
      calibrate_link(transport, deadline_after(detail::impl_of(comm).config().timeout),
                     CalibrationOptions::thorough());
  return {p.alpha, p.beta};
}

std::string to_json(const PerfOptions& o, const PerfReport& rep) {
  nlohmann::json j;
  j["nranks"] = rep.nranks;
  j["transport"] = rep.transport;
  j["transport_requested"] = o.transport;
  j["buffers"] = o.buffers;
  j["deterministic"] = o.deterministic;
  j["alpha_us"] = rep.link.alpha * 1e6;
  j["beta_GBps"] = rep.link.beta / 1e9;
  j["fitted_model"] = rep.fitted;
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
    x["predicted_us"] = std::isfinite(r.predicted_us) ? nlohmann::json(r.predicted_us) : nullptr;
    x["err_pct"] = std::isfinite(r.err_pct) ? nlohmann::json(r.err_pct) : nullptr;
    j["rows"].push_back(std::move(x));
  }
  return j.dump(1);
}

PerfReport run_perf(Communicator& comm, const PerfOptions& o, const PerfHooks& hooks) {
  PerfReport rep;
  rep.nranks = comm.size();
  rep.transport = std::string(detail::impl_of(comm).transport().name());
  const bool rank0 = comm.rank() == 0;
  const std::vector<RowPlan> plan = plan_rows(comm, o);
  rep.link = measure_link(comm);
  const Tuner* tuner = detail::impl_of(comm).selector().tuner();
  const MachineSim* model =
      tuner && tuner->model() && tuner->model()->fitted() ? tuner->model() : nullptr;
  rep.fitted = model != nullptr;
  bool observed = false;  // a row refitted the model's corrections
  if (rank0 && hooks.start) hooks.start(rep);
  // --buffers window: both buffers in shared windows (collectives read the
  // peers' data in place); user: ordinary memory, as an application has.
  std::optional<Buffer> user_send;
  std::optional<Buffer> user_recv;
  Window win_send;
  Window win_recv;
  std::byte* send_base = nullptr;
  std::byte* recv_base = nullptr;
  if (o.buffers == "window") {
    if (!detail::impl_of(comm).transport().shares_memory())
      fail(ErrorCode::invalid_argument,
           "chorus-perf: --buffers window needs ranks that share "
           "memory (shm or inproc), not ",
           rep.transport);
    win_send = comm.window(o.max_bytes);
    win_recv = comm.window(o.max_bytes);
    send_base = static_cast<std::byte*>(win_send.data());
    recv_base = static_cast<std::byte*>(win_recv.data());
    std::memset(send_base, 0, o.max_bytes);  // fault the pages in before timing
    std::memset(recv_base, 0, o.max_bytes);
  } else {
    user_send.emplace(o.max_bytes);
    user_recv.emplace(o.max_bytes);
    send_base = user_send->get();
    recv_base = user_recv->get();
  }
  double bw_sum = 0;
  size_t bw_cells = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    const RowPlan& p = plan[k];
    if (rank0 && hooks.progress)
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
    row.out_of_place = measure(comm, o, p, false, send_base, recv_base);
    row.in_place = measure(comm, o, p, true, send_base, recv_base);
    // A row that lets chorus choose shows the pick its calls now get: the
    // learner's decision for the class where it has made one.
    RowPlan shown = p;
    const bool deterministic = o.deterministic && (p.collective == Collective::allreduce ||
                                                   p.collective == Collective::reduce_scatter ||
                                                   p.collective == Collective::reduce);
    if (deterministic && p.call_algorithm.empty()) {
      shown.shown_algorithm = detail::impl_of(comm).deterministic_pick(
          row_call(p, send_base, recv_base, CallOptions{}));
      row.algorithm = shown.shown_algorithm;
    } else if (p.call_algorithm.empty()) {
      detail::CommunicatorImpl& impl = detail::impl_of(comm);
      const CollectiveSpec spec =
          row_spec(p, comm.size(), impl.config().segment_bytes, comm.rank());
      shown.shown_algorithm =
          std::string(impl.current_algorithm(spec, p.type, p.op, CallOptions{}).name);
      row.algorithm = shown.shown_algorithm;
    }
    for (PerfCell* c : {&row.out_of_place, &row.in_place}) {
      if (!c->measured) continue;
      rep.wrong += c->wrong;
      bw_sum += c->busbw;
      ++bw_cells;
      if (!o.check) c->wrong = static_cast<size_t>(-1);  // shown as N/A
    }
    const double best =
        std::min(row.out_of_place.time_us, row.in_place.measured ? row.in_place.time_us : 1e300);
    // The seed's bound, with the fitted beta of the per-rank block M/N where
    // the communicator has a fitted model.
    CostParams link{rep.link.alpha, rep.link.beta};
    if (model != nullptr) {
      link.alpha = model->link().alpha;
      link.beta = model->link().beta_at(static_cast<double>(p.bytes) / rep.nranks);
    }
    row.bound_us =
        lower_bound(p.collective, rep.nranks, static_cast<double>(p.bytes), link).combined() * 1e6;
    row.pct_bound = best > 0 ? 100.0 * row.bound_us / best : 0;
    if (rank0 && deterministic) {
      CallOptions named;
      named.algorithm = p.call_algorithm;
      const DeterministicPlan det_plan =
          detail::impl_of(comm).deterministic_plan(row_call(p, send_base, recv_base, named));
      row.predicted_us = deterministic_predicted_us(det_plan, rep.nranks, model, rep.link);
      row.err_pct = best > 0 ? 100.0 * (best - row.predicted_us) / best : std::nan("");
    } else if (rank0) {
      row.predicted_us =
          model != nullptr
              ? model_predicted_us(shown, rep.nranks, detail::impl_of(comm).config().segment_bytes,
                                   *model)
              : predicted_us(shown, rep.nranks, detail::impl_of(comm).config().segment_bytes,
                             rep.link);
      row.err_pct = best > 0 ? 100.0 * (best - row.predicted_us) / best : std::nan("");
    }
    // A row of a named algorithm is an observation of it, the same on every
    // rank (the slowest rank's mean call time): it refits the model's
    // correction for the algorithm and size class (tune/learner.h), which the
    // calibration cache keeps for the next job's model.
    if (Learner* learner = detail::impl_of(comm).selector().learner();
        learner != nullptr && model != nullptr && !p.call_algorithm.empty() && best > 0 &&
        !deterministic) {
      if (const Algorithm* a = find_algorithm(p.collective, p.call_algorithm)) {
        const CollectiveSpec spec =
            row_spec(p, rep.nranks, detail::impl_of(comm).config().segment_bytes, comm.rank());
        learner->observe({p.collective, p.type, reduces(p.collective) ? p.op : ReduceOp::sum,
                          size_class_of(spec.count * spec.elem_size), p.window_buffers},
                         a->name, best * 1e-6, model->raw_time(*a, spec, p.type, p.op));
        observed = true;
      }
    }
    if (rank0 && hooks.row) hooks.row(row);
    rep.rows.push_back(std::move(row));
  }
  rep.avg_busbw = bw_cells ? bw_sum / static_cast<double>(bw_cells) : 0;
  if (observed && rank0)
    if (std::string why = detail::impl_of(comm).selector().store_learned(); !why.empty())
      log_message(detail::impl_of(comm).config().log_level, LogLevel::warn, 0,
                  "calibration cache: ", why, "; the model's corrections are not kept");
  return rep;
}

}  // namespace chorus::perf
