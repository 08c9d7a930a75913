#include "analysis/sim_sweep.h"

#include "algorithms/deterministic.h"
#include "algorithms/simulate.h"

#include "core/check.h"
#include "model/units.h"

#include <nlohmann/json.hpp>

#include <chorus/types.h>

namespace chorus {

size_t sweep_count(Collective collective, int ranks, size_t size, size_t elem_size) {
  // A size is the model's M: for allgather, reduce_scatter and alltoall the
  // whole N-block buffer, so the count per block is M / (N es).
  return size / elem_size / (per_rank_blocks(collective) ? static_cast<size_t>(ranks) : 1);
}

SimOptions sweep_options(const SimSweepSpec& spec) {
  SimOptions o;
  o.ports = spec.params.ports;
  o.gamma = spec.params.gamma;
  o.elem_size = spec.elem_size;
  o.copy = spec.copy;
  o.kernel = spec.kernel;
  return o;
}

CollectiveSpec sweep_call(const SimSweepSpec& spec, const Topology& topology, size_t count) {
  CollectiveSpec cs{spec.collective, spec.ranks, 0, count, spec.elem_size, 0};
  cs.windows = topology.one_host();
  if (std::vector<int> hosts = topology.rank_hosts(); !hosts.empty())
    cs.host_of = std::make_shared<const std::vector<int>>(std::move(hosts));
  return cs;
}

SimSweep sim_sweep(const SimSweepSpec& spec, const Topology& topology) {
  const int n = spec.ranks;
  const size_t es = spec.elem_size;
  SimSweep out;
  for (size_t size : spec.sizes) {
    const size_t count = sweep_count(spec.collective, n, size, es);
    const double m = model_bytes(spec.collective, n, count, es);
    std::vector<SimRow> rows;
    for (const Algorithm* al : spec.algorithms) {
      CollectiveSpec cs = sweep_call(spec, topology, count);
      bool ok = true;
      for (int r = 0; r < n && ok; ++r) {
        cs.rank = r;
        if (Support s = supports(*al, cs); !s) {
          out.skipped.push_back(
              str_cat(al->name, " skipped at ", format_size(size), ": ", s.reason));
          ok = false;
        }
      }
      if (!ok) continue;
      cs.rank = 0;
      const double time =
          spec.deterministic
              ? simulate_deterministic(*al, cs, spec.type, topology, sweep_options(spec))
              : simulate_algorithm(*al, cs, topology, sweep_options(spec)).time;
      SimRow row{m,
                 std::string(al->name),
                 time,
                 std::nullopt,
                 lower_bound(spec.collective, n, m, spec.params).combined(),
                 false};
      // The closed form only where it is exact: on the topology and port
      // count it assumes.
      const ClosedForm* f =
          spec.deterministic ? nullptr : closed_form_on(*al, topology.name(), n, spec.params.ports);
      if (f != nullptr)
        if (Prediction p = f->at(n, m, spec.params); p.ok) row.formula = p.seconds;
      rows.push_back(std::move(row));
    }
    if (!rows.empty()) {
      size_t best = 0;
      for (size_t i = 1; i < rows.size(); ++i)
        if (rows[i].time < rows[best].time) best = i;
      rows[best].fastest = true;
    }
    out.sizes.push_back(std::move(rows));
  }
  return out;
}

std::string sim_sweep_json(const SimSweepSpec& spec, const Topology& topology,
                           const SimSweep& sweep) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& rows : sweep.sizes)
    for (const SimRow& r : rows)
      j.push_back({{"collective", std::string(to_string(spec.collective))},
                   {"ranks", spec.ranks},
                   {"bytes", static_cast<uint64_t>(r.bytes)},
                   {"algo", r.algo},
                   {"topology", topology.name()},
                   {"ports", spec.params.ports},
                   {"alpha_s", spec.params.alpha},
                   {"beta_Bps", spec.params.beta},
                   {"gamma_s_per_B", spec.params.gamma},
                   {"time_s", r.time},
                   {"formula_s", r.formula ? nlohmann::json(*r.formula) : nlohmann::json()},
                   {"bound_s", r.bound}});
  return j.dump(2);
}

}  // namespace chorus
