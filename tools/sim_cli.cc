#include "sim_cli.h"

#include "algorithms/algorithm.h"
#include "algorithms/simulate.h"
#include "analysis/sim_sweep.h"
#include "core/check.h"
#include "core/exact_sum.h"
#include "exec/trace.h"
#include "model/cost_model.h"
#include "model/units.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "tune/learner.h"
#include "tune/model_sim.h"
#include "tune/tuning_file.h"

#include <CLI/CLI.hpp>

#include <chorus/types.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace chorus {
namespace {

struct Args {
  std::string collective;
  int ranks = 0;
  std::string min_size = "8", max_size = "64M", bytes;
  double factor = 2;
  std::string alpha, beta, gamma = "0", inter_alpha, inter_beta;
  int ports = 1;
  std::string topology = "switch";
  std::string algos = "all";
  std::string dtype = "float32";
  std::string json, plot, plot_script, trace;
  std::string tuning, link;  // --tuning FILE (and its link class)
  bool deterministic = false;
};

// Where plot_sim.gp lives: next to a build tree (build-x/tools/chorus-sim ->
// scripts/) or an install (bin/chorus-sim -> share/chorus/).
std::string find_plot_script() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const char* rel :
       {"../../scripts/plot_sim.gp", "../share/chorus/plot_sim.gp", "../scripts/plot_sim.gp"}) {
    const auto p = exe.parent_path() / rel;
    if (std::filesystem::exists(p, ec)) return p.lexically_normal().string();
  }
  return {};
}

// Runs gnuplot without a shell, so that paths need no quoting.
void run_gnuplot(const std::string& script, const std::string& data, const std::string& svg,
                 const std::string& title, size_t blocks) {
  const std::string vars = str_cat("datafile='", data, "'; outfile='", svg, "'; plottitle='", title,
                                   "'; nblocks=", blocks);
  std::vector<std::string> args = {"gnuplot", "-e", vars, script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv.data(), environ) != 0)
    fail(ErrorCode::system, "--plot: cannot start gnuplot (is gnuplot-nox installed?)");
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail(ErrorCode::system, "--plot: gnuplot failed on ", script);
}

std::vector<size_t> sizes_of(const Args& a, const CLI::App& app) {
  if (app.count("--bytes")) {
    if (app.count("-b") || app.count("-e") || app.count("-f"))
      fail(ErrorCode::invalid_argument, "--bytes and -b/-e/-f exclude each other");
    return {parse_size(a.bytes, "--bytes")};
  }
  const size_t lo = parse_size(a.min_size, "-b");
  const size_t hi = parse_size(a.max_size, "-e");
  if (lo > hi)
    fail(ErrorCode::invalid_argument, "-b ", a.min_size, " is larger than -e ", a.max_size);
  if (!(a.factor > 1)) fail(ErrorCode::invalid_argument, "-f must be > 1, got ", a.factor);
  if (lo == 0) fail(ErrorCode::invalid_argument, "-b must be positive");
  std::vector<size_t> out;
  for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * (1 + 1e-12);
       s *= a.factor)
    out.push_back(static_cast<size_t>(s + 0.5));
  return out;
}

// --trace: the simulated run of one algorithm at one size as a Chrome trace
// (exec/trace.h's format: pid = rank, a row per peer and direction), with
// times in simulated microseconds from 0, as call 1.
void write_trace(const Args& a, const SimSweepSpec& spec, const Topology& topo, std::ostream& err) {
  if (spec.sizes.size() != 1 || spec.algorithms.size() != 1)
    fail(ErrorCode::invalid_argument,
         "--trace needs one size (--bytes) and one algorithm (--algo); ", "got ", spec.sizes.size(),
         " size(s) and ", spec.algorithms.size(), " algorithm(s)");
  const Algorithm& al = *spec.algorithms[0];
  const int n = spec.ranks;
  const size_t count = sweep_count(spec.collective, n, spec.sizes[0], spec.elem_size);
  CollectiveSpec cs = sweep_call(spec, topo, count);
  for (int r = 0; r < n; ++r) {
    cs.rank = r;
    if (Support s = supports(al, cs); !s)
      fail(ErrorCode::invalid_argument, "--trace: ", al.name, " does not run at ",
           format_size(spec.sizes[0]), ": ", s.reason);
  }
  cs.rank = 0;
  AlgorithmPrograms programs(al, cs);
  SimOptions options = sweep_options(spec);
  options.record_ops = true;
  const SimResult res = simulate(programs, topo, options);
  std::vector<RankTrace> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankTrace& rt = ranks[static_cast<size_t>(r)];
    rt.rank = r;
    const Program& p = programs.program(r);
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const Op& o = p.ops[i];
      const OpTime& t = res.op_times[static_cast<size_t>(r)][i];
      const Region& region = o.kind == OpKind::send ? o.src : o.dst;
      const bool peer = has_peer(o.kind) || is_one_sided(o.kind);
      rt.ops.push_back({t.start * 1e6, (t.end - t.start) * 1e6, region.count * spec.elem_size, 1,
                        static_cast<uint32_t>(i), o.kind, peer ? o.peer : -1,
                        to_string(spec.collective), al.name});
    }
  }
  const std::string other =
      str_cat("{\"simulated\": true, \"size\": ", n, ", \"topology\": \"", topo.name(),
              "\", \"ports\": ", spec.params.ports, ", \"bytes\": ", spec.sizes[0],
              ", \"alpha_s\": ", spec.params.alpha, ", \"beta_Bps\": ", spec.params.beta,
              ", \"gamma_s_per_B\": ", spec.params.gamma, ", \"time_us\": ", res.time * 1e6, "}");
  std::ofstream f(a.trace);
  if (!f) fail(ErrorCode::invalid_argument, "--trace: cannot write '", a.trace, "'");
  f << chrome_trace(n, ranks, other) << "\n";
  if (!f) fail(ErrorCode::system, "--trace: writing '", a.trace, "' failed");
  err << "wrote " << a.trace << "\n";
}

int run(const Args& a, const CLI::App& app, std::ostream& out, std::ostream& err) {
  const auto coll = parse_collective(a.collective);
  if (!coll)
    fail(ErrorCode::invalid_argument, "unknown collective '", a.collective,
         "' (allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, barrier)");
  if (a.ranks < 1) fail(ErrorCode::invalid_argument, "--ranks must be >= 1, got ", a.ranks);
  if (a.ports != 1 && a.ports != 2)
    fail(ErrorCode::invalid_argument, "--ports must be 1 or 2, got ", a.ports);
  const auto dtype = parse_data_type(a.dtype);
  if (!dtype) fail(ErrorCode::invalid_argument, "unknown --dtype '", a.dtype, "'");
  const size_t es = dtype_size(*dtype);
  const bool tuned = !a.tuning.empty();
  if (tuned == (app.count("--alpha") > 0 || app.count("--beta") > 0))
    fail(ErrorCode::invalid_argument, tuned ? "--tuning and --alpha/--beta exclude each other"
                                            : "give --alpha and --beta, or --tuning FILE");
  if (!tuned && (a.alpha.empty() || a.beta.empty()))
    fail(ErrorCode::invalid_argument, "give both --alpha and --beta");
  CostParams params;
  LinkParams link, inter;
  HostParams host;
  TuningTable tuning;
  if (tuned) {
    // The fitted model of a tuning file (chorus-perf --calibrate): its link
    // class (hier:K: intra-host; tcp across hosts when the file has it), its
    // host and its compute rates.
    tuning = read_tuning_file(a.tuning);
    std::string cls = a.link;
    if (cls.empty()) cls = tuning.links.count("shm") ? "shm" : tuning.links.begin()->first;
    auto it = tuning.links.find(cls);
    if (it == tuning.links.end())
      fail(ErrorCode::invalid_argument, "--tuning ", a.tuning, " has no link class '", cls, "'");
    link = it->second;
    inter = tuning.links.count("tcp") ? tuning.links.at("tcp") : link;
    host = link.curve.empty() ? HostParams{} : tuning.host;
    params = {link.alpha, link.beta, tuning.gamma, tuning.ports};
  } else {
    params = {parse_time(a.alpha, "--alpha"), parse_bandwidth(a.beta, "--beta"),
              parse_time(a.gamma, "--gamma"), a.ports};
    link = LinkParams{"link", params.alpha, params.beta};
    inter = LinkParams{
        "inter", a.inter_alpha.empty() ? params.alpha : parse_time(a.inter_alpha, "--inter-alpha"),
        a.inter_beta.empty() ? params.beta : parse_bandwidth(a.inter_beta, "--inter-beta")};
  }
  const auto topo = make_topology(a.topology, a.ranks, link, inter, host);

  std::vector<const Algorithm*> algos;
  if (a.algos == "all") {
    algos = algorithms_for(*coll);
  } else {
    std::stringstream ss(a.algos);
    for (std::string name; std::getline(ss, name, ',');) {
      const Algorithm* al = find_algorithm(*coll, name);
      if (al == nullptr)
        fail(ErrorCode::invalid_argument, "unknown ", a.collective, " algorithm '", name,
             "'; known: ", algorithm_names(*coll));
      algos.push_back(al);
    }
  }
  if (algos.empty()) fail(ErrorCode::invalid_argument, "no algorithm for ", a.collective);

  SimSweepSpec spec{
      *coll,  a.ranks, es,
      params, algos,   *coll == Collective::barrier ? std::vector<size_t>{0} : sizes_of(a, app)};
  if (tuned && !link.curve.empty() && !tuning.compute.copy.empty()) {
    spec.copy = &tuning.compute.copy;
    spec.kernel = tuning.compute.kernel(*dtype, ReduceOp::sum);
  }
  if (a.deterministic) {
    if (*coll != Collective::allreduce && *coll != Collective::reduce_scatter &&
        *coll != Collective::reduce)
      fail(ErrorCode::invalid_argument, "--deterministic: ", a.collective,
           " does not reduce (allreduce, reduce_scatter and reduce do)");
    if (!exact::applies(*dtype, ReduceOp::sum))
      fail(ErrorCode::invalid_argument, "--deterministic: ", a.dtype,
           " is not a floating type (float16, bfloat16, float32, float64)");
    spec.deterministic = true;
    spec.type = *dtype;
  }
  SimSweep sweep = sim_sweep(spec, *topo);
  for (const std::string& note : sweep.skipped) err << "note: " << note << "\n";
  // A tuning file that is a calibration cache entry carries the corrections
  // learned from a job's calls (tune/learner.h): the rows are the model's
  // times as a communicator's tuner would predict them.
  if (tuned && !tuning.corrections.empty()) {
    for (size_t i = 0; i < sweep.sizes.size(); ++i) {
      const size_t count = sweep_count(*coll, a.ranks, spec.sizes[i], es);
      for (SimRow& r : sweep.sizes[i])
        r.time *= correction_factor(tuning.corrections, *coll, representative_type(es), r.algo,
                                    size_class_of(count * es));
      for (SimRow& r : sweep.sizes[i]) r.fastest = false;
      auto best =
          std::min_element(sweep.sizes[i].begin(), sweep.sizes[i].end(),
                           [](const SimRow& x, const SimRow& y) { return x.time < y.time; });
      if (best != sweep.sizes[i].end()) best->fastest = true;
    }
  }
  const auto& table = sweep.sizes;

  out << "# " << a.collective << " N=" << a.ranks << " topology=" << topo->name()
      << " ports=" << params.ports << (tuned ? str_cat(" tuning=", a.tuning) : "")
      << (tuned && !tuning.corrections.empty()
              ? str_cat(" (", tuning.corrections.size(), " learned corrections)")
              : "")
      << (tuned && !link.curve.empty() ? " (fitted model; beta streaming)" : "")
      << " alpha=" << format_time(params.alpha) << " beta=" << format_bandwidth(params.beta)
      << " gamma=" << format_time(params.gamma) << "/B dtype=" << a.dtype
      << (a.deterministic ? " deterministic (scales, integers, conversions)" : "") << "\n";
  out << std::setw(10) << "size"
      << "  " << std::left << std::setw(20) << "algo" << std::right << std::setw(14) << "sim_us"
      << std::setw(14) << "formula_us" << std::setw(14) << "bound_us" << std::setw(9) << "%bound"
      << "\n";
  auto us = [](double s) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(3) << s * 1e6;
    return o.str();
  };
  for (const auto& rows : table)
    for (const SimRow& r : rows) {
      const double pct = r.time > 0 ? 100 * r.bound / r.time : 100;
      std::ostringstream p;
      p << std::fixed << std::setprecision(1) << pct;
      out << std::setw(10) << format_size(static_cast<size_t>(r.bytes)) << "  " << std::left
          << std::setw(20) << r.algo << std::right << std::setw(14) << us(r.time) << std::setw(14)
          << (r.formula ? us(*r.formula) : std::string("-")) << std::setw(14) << us(r.bound)
          << std::setw(9) << p.str() << (r.fastest ? "  *" : "") << "\n";
    }
  // Crossovers: sizes where the fastest algorithm changes.
  std::string prev;
  bool any = false;
  for (const auto& rows : table)
    for (const SimRow& r : rows) {
      if (!r.fastest) continue;
      if (!prev.empty() && r.algo != prev) {
        out << (any ? ", " : "crossovers: ") << prev << " -> " << r.algo << " at "
            << format_size(static_cast<size_t>(r.bytes));
        any = true;
      }
      prev = r.algo;
    }
  out << (any ? "\n"
              : str_cat("crossovers: none (", prev.empty() ? "-" : prev,
                        " is fastest at every size)\n"));

  if (!a.json.empty()) {
    std::ofstream f(a.json);
    if (!f) fail(ErrorCode::invalid_argument, "--json: cannot write '", a.json, "'");
    f << sim_sweep_json(spec, *topo, sweep) << "\n";
    if (!f) fail(ErrorCode::system, "--json: writing '", a.json, "' failed");
  }

  if (!a.trace.empty()) write_trace(a, spec, *topo, err);

  if (!a.plot.empty()) {
    const std::string script = a.plot_script.empty() ? find_plot_script() : a.plot_script;
    if (script.empty())
      fail(ErrorCode::invalid_argument,
           "--plot: scripts/plot_sim.gp not found; name it with --plot-script");
    // One gnuplot data block per algorithm, then one for the lower bound.
    const std::string data = a.plot + ".dat";
    std::ofstream f(data);
    if (!f) fail(ErrorCode::invalid_argument, "--plot: cannot write '", data, "'");
    size_t blocks = 0;
    for (const Algorithm* al : algos) {
      bool header = false;
      for (const auto& rows : table)
        for (const SimRow& r : rows)
          if (r.algo == al->name && r.bytes > 0) {
            if (!header) f << (blocks ? "\n\n" : "") << "size " << al->name << "\n";
            header = true;
            f << r.bytes << " " << r.time * 1e6 << "\n";
          }
      blocks += header ? 1 : 0;
    }
    bool header = false;
    for (const auto& rows : table)
      if (!rows.empty() && rows[0].bytes > 0) {
        if (!header) f << (blocks ? "\n\n" : "") << "size lower_bound\n";
        header = true;
        f << rows[0].bytes << " " << rows[0].bound * 1e6 << "\n";
      }
    blocks += header ? 1 : 0;
    f.close();
    if (blocks == 0) fail(ErrorCode::invalid_argument, "--plot: nothing to plot (no size > 0)");
    run_gnuplot(
        script, data, a.plot,
        str_cat(a.collective, ", N = ", a.ranks, ", ", topo->name(), ", ", a.ports, " port(s)"),
        blocks);
    err << "wrote " << a.plot << "\n";
  }
  return 0;
}

}  // namespace

int sim_cli_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"chorus-sim: simulate collective algorithms on a network model", "chorus-sim"};
  Args a;
  app.add_option("collective", a.collective,
                 "allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, barrier")
      ->required();
  app.add_option("--ranks,-n", a.ranks, "number of ranks N")->required();
  app.add_option("-b,--min-bytes", a.min_size, "smallest size M (8, 4K, 64M; K = 1024)");
  app.add_option("-e,--max-bytes", a.max_size, "largest size M");
  app.add_option("-f,--factor", a.factor, "size multiplier between rows");
  app.add_option("--bytes", a.bytes, "a single size M instead of -b/-e/-f");
  app.add_option("--alpha", a.alpha, "latency per message (2us, 300ns, ...)");
  app.add_option("--beta", a.beta, "bandwidth per port and direction (25GB/s; 1 GB = 1e9 B)");
  app.add_option("--tuning", a.tuning,
                 "simulate the fitted machine model of this tuning file (chorus-perf "
                 "--calibrate) instead of --alpha/--beta/--gamma");
  app.add_option("--link", a.link, "--tuning's link class (default shm, else the file's first)");
  app.add_option("--gamma", a.gamma, "reduction time per byte (0.1ns)");
  app.add_option("--inter-alpha", a.inter_alpha, "hier:K inter-host latency (default --alpha)");
  app.add_option("--inter-beta", a.inter_beta, "hier:K inter-host bandwidth (default --beta)");
  app.add_option("--ports", a.ports, "send and receive ports per rank: 1 or 2");
  app.add_option("--topology", a.topology,
                 "switch, ring, hypercube, hier:K or FILE.json (ranks on one host share "
                 "windows: the one-sided algorithms run only there)");
  app.add_option("--algo", a.algos, "comma list of algorithms, or all");
  app.add_option("--dtype", a.dtype, "element type (float32, ...)");
  app.add_flag("--deterministic", a.deterministic,
               "deterministic calls (CallOptions::deterministic): the algorithm carries the "
               "integer pass; the scale pass and the conversions are added");
  app.add_option("--json", a.json, "write the rows as JSON to this file");
  app.add_option("--plot", a.plot, "draw time vs size (log-log) with gnuplot into this SVG");
  app.add_option("--plot-script", a.plot_script, "gnuplot script (default scripts/plot_sim.gp)");
  app.add_option(
      "--trace", a.trace,
      "write the run of one --algo at one --bytes as a Chrome trace (JSON) to this file");
  app.set_version_flag("--version", "chorus-sim " CHORUS_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "chorus-sim: " << e.what() << "\n"
        << "run chorus-sim --help for usage\n";
    return 2;
  }
  try {
    return run(a, app, out, err);
  } catch (const Error& e) {
    err << "chorus-sim: " << e.what() << "\n";
    return e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
}

}  // namespace chorus
