// A simulated sweep: for one collective at N ranks on one topology, every
// chosen algorithm at every size, with its simulated time, its closed form
// where the model has one exact on that topology, the lower bound and the
// fastest algorithm of each size: the tuner's view of the algorithms (closed
// form or simulation) laid out over sizes. tools/sim_cli.* (chorus-sim) parses
// the command line, prints the table and draws the plot; this is its data.
// The simulated ranks share windows where the topology puts them on one host
// (sweep_call).
//
//   auto topo = make_topology("switch", 8, link, link);
//   SimSweep s = sim_sweep({Collective::allreduce, 8, 4, params, algorithms_for(...),
//                           {1024, 1 << 20}}, *topo);
#pragma once

#include "algorithms/algorithm.h"
#include "model/cost_model.h"
#include "schedule/collective.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

struct SimSweepSpec {
  Collective collective = Collective::allreduce;
  int ranks = 1;
  size_t elem_size = 4;
  CostParams params;  // alpha, beta, gamma, ports
  std::vector<const Algorithm*> algorithms;
  // The model's M of each row (cost_model.h): for allgather, reduce_scatter
  // and alltoall the whole N-block buffer. Barrier ignores them (one row, 0).
  std::vector<size_t> sizes;
  // The fitted machine model's compute rates (SimOptions::copy, kernel), not
  // owned; null: gamma.
  const RateCurve* copy = nullptr;
  const RateCurve* kernel = nullptr;
  // Deterministic calls of `type` (algorithms/deterministic.h): each row is
  // the call on integers with that algorithm plus the scale pass and the
  // conversions (AllReduce, ReduceScatter and Reduce only).
  bool deterministic = false;
  DataType type = DataType::float32;
};

struct SimRow {
  double bytes = 0;  // M
  std::string algo;
  double time = 0;                // simulated, seconds
  std::optional<double> formula;  // closed form, where exact on this topology
  double bound = 0;               // lower_bound(...).combined()
  bool fastest = false;           // least simulated time of its size
};

// The simulator options of a sweep's runs.
SimOptions sweep_options(const SimSweepSpec& spec);

// The call a sweep simulates at `count` (sweep_count) on `topology`, as rank
// 0 sees it. Ranks that the topology puts on one host share windows
// (Topology::one_host), so that the one-sided algorithms run there; on
// several hosts they decline, with the reason.
CollectiveSpec sweep_call(const SimSweepSpec& spec, const Topology& topology, size_t count);

struct SimSweep {
  // One entry per size, in order; an algorithm that does not support a size
  // has no row there and a line in `skipped` ("ring skipped at 4K: why").
  std::vector<std::vector<SimRow>> sizes;
  std::vector<std::string> skipped;
};

// Simulates every algorithm of `spec` at every size on `topology` (which has
// spec.ranks ranks).
SimSweep sim_sweep(const SimSweepSpec& spec, const Topology& topology);

// The element count per rank (per block for allgather, reduce_scatter and
// alltoall, whose size M is the whole N-block buffer) of a sweep's size M.
size_t sweep_count(Collective collective, int ranks, size_t size, size_t elem_size);

// The sweep's rows as a JSON array (one object per row, with the parameters),
// as chorus-sim --json writes it.
std::string sim_sweep_json(const SimSweepSpec& spec, const Topology& topology,
                           const SimSweep& sweep);

}  // namespace chorus
