// The fitted machine model as the simulator runs it: what the tuner predicts
// with, what chorus-perf's pred(us) column shows and what chorus-sim
// --tuning simulates.
//
// A call on N ranks becomes the algorithm's Programs on a switch (one hop per
// message) of the transport's link class, with the ranks grouped into hosts
// (all on one host unless host_of says otherwise). Where host_of puts them on
// several hosts, the switch is make_host_topology's instead: inside a host
// the table's "shm" link (the class link where the table has none), across
// hosts the class link, through each host's one network interface. Each host
// has the fitted
// memory bandwidth and cores, and local work priced by the fitted copy and
// kernel rates of the call's dtype and op (sim/simulator.h). The one-sided
// algorithms (a spec with windows) run there too: a get reads its peer's
// window on the reader's engine and a core of its host, and books one copy's
// memory traffic.
//
//   MachineSim m(table, "shm");
//   double s = m.time(*find_algorithm(Collective::allreduce, "ring"), spec,
//                     DataType::float32, ReduceOp::sum);
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/deterministic.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "tune/tuning_file.h"

#include <chorus/types.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus {

class MachineSim {
 public:
  // `table` must hold link class `link` (Error(invalid_argument) otherwise);
  // host_of[r] is rank r's host (empty: all ranks on one host).
  MachineSim(TuningTable table, std::string link, std::vector<int> host_of = {});

  const TuningTable& table() const { return table_; }
  const LinkParams& link() const { return link_; }
  // Whether the table carries a fitted model (else it is the seeds' model
  // with the table's alpha, beta and gamma).
  bool fitted() const { return fitted_; }

  // The topology of `nranks` ranks (host_of, when given, must have as many).
  std::unique_ptr<Topology> topology(int nranks) const;
  // Options for a call of (type, op): points into this object.
  SimOptions options(DataType type, ReduceOp op) const;
  // Predicted seconds of `algo` for `spec` (spec.nranks ranks): the
  // simulated time plus the link's per-call overhead (raw_time), times the
  // correction the table has learned from observed calls for this algorithm
  // and size class (tune/learner.h: correction_factor; 1 where none).
  double time(const Algorithm& algo, const CollectiveSpec& spec, DataType type, ReduceOp op) const;
  double raw_time(const Algorithm& algo, const CollectiveSpec& spec, DataType type,
                  ReduceOp op) const;
  // Predicted seconds of a deterministic call (algorithms/deterministic.h)
  // of `spec` (the user's call, elem_size the type's) on the fixed road with
  // `algo` carrying the integer pass, and on the gather road (AllReduce).
  double deterministic_time(const Algorithm& algo, const CollectiveSpec& spec, DataType type) const;
  double deterministic_gather_time(const CollectiveSpec& spec, DataType type) const;
  // ... and on the scatter road (AllReduce).
  double deterministic_scatter_time(const CollectiveSpec& spec, DataType type) const;
  // Predicted seconds of a deterministic call's plan, the description the
  // runtime runs (its parts with their algorithms, each a call with its
  // overhead, and the local work).
  double deterministic_plan_time(const DeterministicPlan& plan) const;
  // The correction time() applies to raw_time() (1 where none is learned).
  double correction(const Algorithm& algo, const CollectiveSpec& spec, DataType type) const;

 private:
  TuningTable table_;
  LinkParams link_;
  std::vector<int> host_of_;
  bool fitted_ = false;
};

// The dtype a call of this element size is predicted as, when only the size
// is known (the tuner): int8, float16, float32, float64.
DataType representative_type(size_t elem_size);

}  // namespace chorus
