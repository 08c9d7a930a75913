#include "tune/model_sim.h"

#include "algorithms/deterministic.h"
#include "core/check.h"
#include "tune/learner.h"

#include <algorithm>

namespace chorus {

MachineSim::MachineSim(TuningTable table, std::string link, std::vector<int> host_of)
    : table_(std::move(table)), host_of_(std::move(host_of)) {
  auto it = table_.links.find(link);
  if (it == table_.links.end())
    fail(ErrorCode::invalid_argument, "machine model: no link class '", link, "' in the table");
  link_ = it->second;
  fitted_ = !link_.curve.empty();
}

std::unique_ptr<Topology> MachineSim::topology(int nranks) const {
  const bool with_hosts = fitted_ && table_.host != HostParams{};
  if (host_of_.size() == static_cast<size_t>(nranks) &&
      std::any_of(host_of_.begin(), host_of_.end(), [&](int h) { return h != host_of_[0]; })) {
    // Across hosts: the ranks of a host reach each other over the table's
    // "shm" link where it has one, and share the host's network link.
    auto shm = table_.links.find("shm");
    const LinkParams& intra = shm != table_.links.end() ? shm->second : link_;
    return make_host_topology(host_of_, intra, link_, with_hosts ? table_.host : HostParams{});
  }
  auto t = make_topology("switch", nranks, link_, link_);
  if (!with_hosts) return t;
  std::vector<int> host_of = host_of_;
  if (host_of.empty()) host_of.assign(static_cast<size_t>(nranks), 0);
  if (host_of.size() != static_cast<size_t>(nranks))
    fail(ErrorCode::invalid_argument, "machine model: ", host_of.size(), " ranks have hosts but ",
         nranks, " are simulated");
  const int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  t->set_hosts(std::move(host_of),
               std::vector<HostParams>(static_cast<size_t>(hosts), table_.host));
  return t;
}

SimOptions MachineSim::options(DataType type, ReduceOp op) const {
  SimOptions o;
  o.ports = table_.ports;
  o.gamma = table_.gamma;
  o.elem_size = dtype_size(type);
  if (fitted_ && !table_.compute.copy.empty()) {
    o.copy = &table_.compute.copy;
    o.kernel = table_.compute.kernel(type, op);
  }
  return o;
}

double MachineSim::raw_time(const Algorithm& algo, const CollectiveSpec& spec, DataType type,
                            ReduceOp op) const {
  if (spec.nranks <= 1) return 0;
  const auto programs = build_all(algo, spec);
  return link_.call_overhead + simulate(programs, *topology(spec.nranks), options(type, op)).time;
}

double MachineSim::deterministic_plan_time(const DeterministicPlan& plan) const {
  if (plan.parts.empty() || plan.parts.front().spec.nranks <= 1) return 0;
  double overheads = 0;
  for (const DeterministicPart& p : plan.parts)
    if (!p.only_with_specials) overheads += link_.call_overhead;
  const int n = plan.parts.front().spec.nranks;
  return overheads +
         simulate_deterministic_plan(plan, *topology(n), options(DataType::int64, ReduceOp::sum));
}

double MachineSim::deterministic_time(const Algorithm& algo, const CollectiveSpec& spec,
                                      DataType type) const {
  return deterministic_plan_time(
      deterministic_plan(spec, type, DeterministicRoad::whole, std::string(algo.name)));
}

double MachineSim::deterministic_scatter_time(const CollectiveSpec& spec, DataType type) const {
  return deterministic_plan_time(deterministic_plan(spec, type, DeterministicRoad::scatter, ""));
}

double MachineSim::deterministic_gather_time(const CollectiveSpec& spec, DataType type) const {
  return deterministic_plan_time(deterministic_plan(spec, type, DeterministicRoad::gather, ""));
}

double MachineSim::correction(const Algorithm& algo, const CollectiveSpec& spec,
                              DataType type) const {
  if (table_.corrections.empty()) return 1;
  return correction_factor(table_.corrections, spec.collective,
                           representative_type(dtype_size(type)), algo.name,
                           size_class_of(spec.count * spec.elem_size));
}

double MachineSim::time(const Algorithm& algo, const CollectiveSpec& spec, DataType type,
                        ReduceOp op) const {
  return raw_time(algo, spec, type, op) * correction(algo, spec, type);
}

DataType representative_type(size_t elem_size) {
  switch (elem_size) {
    case 1:
      return DataType::int8;
    case 2:
      return DataType::float16;
    case 8:
      return DataType::float64;
    default:
      return DataType::float32;
  }
}

}  // namespace chorus
