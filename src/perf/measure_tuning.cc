#include "perf/measure_tuning.h"

#include "bootstrap/bootstrap.h"
#include "core/check.h"
#include "engine/communicator_impl.h"
#include "tune/calibration.h"
#include "tune/model_sim.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace chorus::perf {

std::vector<TuningRule> rules_from_rows(const std::vector<PerfRow>& rows, const std::string& link,
                                        int nranks) {
  // Best time per (collective, size); std::map keeps sizes ascending.
  std::map<std::pair<Collective, size_t>, std::pair<double, std::string>> best;
  for (const PerfRow& r : rows) {
    if (!r.out_of_place.measured) continue;
    auto [it, fresh] =
        best.try_emplace({r.collective, r.bytes}, r.out_of_place.time_us, r.algorithm);
    if (!fresh && r.out_of_place.time_us < it->second.first)
      it->second = {r.out_of_place.time_us, r.algorithm};
  }
  std::vector<TuningRule> rules;
  for (const auto& [key, winner] : best) {
    const bool same = !rules.empty() && rules.back().collective == key.first &&
                      rules.back().algorithm == winner.second;
    if (same) continue;  // the previous rule already covers this size
    rules.push_back({key.first, link, nranks, key.second, winner.second});
  }
  return rules;
}

double measure_call_overhead(Communicator& comm, const TuningTable& table,
                             const std::vector<int>& host_of) {
  const std::string cls = link_class_of(detail::impl_of(comm).transport().name());
  if (comm.size() == 1 || !table.links.count(cls)) return 0;
  PerfOptions tiny;
  tiny.collectives = {Collective::allreduce};
  tiny.min_bytes = tiny.max_bytes = 8;
  tiny.algorithms = {"all"};
  tiny.check = false;
  tiny.iters = 200;
  tiny.warmup = 50;
  tiny.min_time = std::chrono::milliseconds(20);
  const MachineSim sim(table, cls, host_of);
  std::map<std::string, std::vector<double>> times;
  for (int k = 0; k < 3; ++k)
    for (const PerfRow& r : run_perf(comm, tiny).rows)
      times[r.algorithm].push_back(
          std::min(r.out_of_place.time_us, r.in_place.measured ? r.in_place.time_us : 1e300));
  std::vector<double> excess;
  for (auto& [name, t] : times) {
    std::sort(t.begin(), t.end());
    const Algorithm* algo = find_algorithm(Collective::allreduce, name);
    if (algo == nullptr) continue;
    CollectiveSpec spec{Collective::allreduce,
                        comm.size(),
                        0,
                        2,
                        4,
                        0,
                        detail::impl_of(comm).config().segment_bytes};
    spec.host_of = detail::impl_of(comm).host_of();
    spec.windows = detail::impl_of(comm).transport().shares_memory();  // as run_perf's rows
    const double pred = sim.time(*algo, spec, DataType::float32, ReduceOp::sum);
    excess.push_back(t[t.size() / 2] * 1e-6 - pred);
  }
  if (excess.empty()) return 0;
  std::sort(excess.begin(), excess.end());
  return std::max(0.0, excess[excess.size() / 2]);
}

TuningTable measure_tuning(Communicator& comm, const PerfOptions& options) {
  Transport& transport = detail::impl_of(comm).transport();
  // The machine model first, with the transport quiet. Over shared memory
  // its link carries flag_alpha, which the file keeps (flag_alpha_s), and
  // which the call overhead's predictions below already use.
  ModelCalibrationOptions thorough = ModelCalibrationOptions::thorough();
  thorough.host_identity = detail::impl_of(comm).config().host_id.empty()
                               ? host_identity()
                               : detail::impl_of(comm).config().host_id;
  const ModelCalibration model =
      calibrate_model(transport, deadline_after(detail::impl_of(comm).config().timeout), thorough);
  const std::string cls = link_class_of(transport.name());
  TuningTable table = model.table;
  table.links[cls].call_overhead = measure_call_overhead(comm, table, model.host_of);
  PerfOptions sweep = options;
  sweep.algorithms = {"all"};
  sweep.check = false;  // timing only; correctness is what the tests and -c 1 are for
  sweep.json_file.clear();
  // Rows of a few microseconds timed over -n calls are mostly timer and
  // barrier noise: time each for a few milliseconds.
  if (sweep.min_time.count() == 0) sweep.min_time = std::chrono::milliseconds(5);
  // A single sweep is at the mercy of one descheduled iteration: repeat it and
  // keep each (collective, size, algorithm)'s median time.
  constexpr int kSweeps = 5;
  std::map<std::tuple<Collective, size_t, std::string>, std::vector<double>> times;
  std::vector<PerfRow> rows;
  for (int k = 0; k < kSweeps; ++k)
    for (const PerfRow& r : run_perf(comm, sweep).rows) {
      if (!r.out_of_place.measured) continue;
      auto& t = times[{r.collective, r.bytes, r.algorithm}];
      if (t.empty()) rows.push_back(r);
      t.push_back(r.out_of_place.time_us);
    }
  for (PerfRow& r : rows) {
    auto& t = times[{r.collective, r.bytes, r.algorithm}];
    std::sort(t.begin(), t.end());
    r.out_of_place.time_us = t[t.size() / 2];
  }
  table.rules = rules_from_rows(rows, cls, comm.size());
  if (comm.rank() == 0) write_tuning_file(options.calibrate_file, table);
  return table;
}

}  // namespace chorus::perf
