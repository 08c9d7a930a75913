// An algorithm's simulated run without its N Programs built all at once: the
// simulator asks for each rank's Program as it reads the ranks
// (sim/simulator.h, ProgramSource), and only that one exists; where the
// algorithm puts ranks in classes (Algorithm::rank_class: ring, and
// halving-doubling at N = 2^k, on even blocks), one Program per class is
// built and renamed for each rank. At a thousand ranks and more, building
// and holding all N Programs costs more time and memory than the run itself;
// the result is the same.
//
//   const Algorithm& ring = *find_algorithm(Collective::allreduce, "ring");
//   SimResult r = simulate_algorithm(ring, {Collective::allreduce, 1024, 0, count, 4, 0},
//                                    *topo, options);
#pragma once

#include "algorithms/algorithm.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace chorus {

// The Programs of `algorithm` for `spec` on each of its spec.nranks ranks
// (spec.rank is ignored), built when asked, as build_all builds them; a
// rank's shape is its class representative's Program, built once. Asking
// for a rank whose case is unsupported throws build_all's
// Error(invalid_argument).
class AlgorithmPrograms final : public ProgramSource {
 public:
  AlgorithmPrograms(const Algorithm& algorithm, const CollectiveSpec& spec);
  int nranks() const override { return spec_.nranks; }
  const Program& program(int rank) override;
  const Program& shape(int rank, PeerRename& rename) override;

 private:
  CollectiveSpec supported(int rank) const;
  const Algorithm& algorithm_;
  CollectiveSpec spec_;
  Program program_;  // rank built_'s
  int built_ = -1;
  Program class_program_;  // rank class_built_'s, a class representative
  int class_built_ = -1;
};

// simulate(build_all(algorithm, spec), topology, options), one rank's
// Program at a time.
SimResult simulate_algorithm(const Algorithm& algorithm, const CollectiveSpec& spec,
                             const Topology& topology, const SimOptions& options);

}  // namespace chorus
