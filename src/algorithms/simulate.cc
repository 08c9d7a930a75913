#include "algorithms/simulate.h"

#include "core/check.h"

namespace chorus {

AlgorithmPrograms::AlgorithmPrograms(const Algorithm& algorithm, const CollectiveSpec& spec)
    : algorithm_(algorithm), spec_(spec) {}

// The spec of `rank`, which must be supported there.
CollectiveSpec AlgorithmPrograms::supported(int rank) const {
  CHORUS_CHECK(rank >= 0 && rank < spec_.nranks);
  CollectiveSpec s = spec_;
  s.rank = rank;
  if (Support ok = supports(algorithm_, s); !ok)
    fail(ErrorCode::invalid_argument, to_string(spec_.collective), "(", algorithm_.name,
         ") does not support N = ", spec_.nranks, ", count ", spec_.count, ": ", ok.reason);
  return s;
}

const Program& AlgorithmPrograms::program(int rank) {
  if (rank == built_) return program_;
  const CollectiveSpec s = supported(rank);
  built_ = -1;  // until the new one is there
  program_ = build_program(algorithm_, s);
  built_ = rank;
  return program_;
}

const Program& AlgorithmPrograms::shape(int rank, PeerRename& rename) {
  rename = PeerRename{};
  const CollectiveSpec s = supported(rank);
  const RankClass c =
      spec_.nranks > 1 && algorithm_.rank_class != nullptr ? algorithm_.rank_class(s) : RankClass{};
  if (c.representative < 0) return program(rank);
  CHORUS_CHECK(c.representative < spec_.nranks);
  if (c.representative != class_built_) {
    class_built_ = -1;
    class_program_ = build_program(algorithm_, supported(c.representative));
    class_built_ = c.representative;
  }
  const int n = spec_.nranks;
  if (c.rename == RankClass::Rename::rotate)
    rename = {PeerRename::How::rotate, ((rank - c.representative) % n + n) % n, n,
              c.representative};
  else
    rename = {PeerRename::How::xor_bits, rank ^ c.representative, n, c.representative};
  return class_program_;
}

SimResult simulate_algorithm(const Algorithm& algorithm, const CollectiveSpec& spec,
                             const Topology& topology, const SimOptions& options) {
  AlgorithmPrograms programs(algorithm, spec);
  return simulate(programs, topology, options);
}

}  // namespace chorus
