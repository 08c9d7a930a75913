// The algorithm registry: every schedule builder chorus knows, by collective
// and name, with its closed-form cost. Builders are pure functions of a
// CollectiveSpec: no I/O, no state.
//
// An algorithm is one file and one registry row. Its file opens with the
// phases, steps, bytes per rank, cost and a small picture, then defines
//
//   extern const Algorithm kRingAllgather{
//       Collective::allgather, "ring", "N-1 steps passing blocks around the ring",
//       build_ring_allgather, /*own_support=*/nullptr, kAllgatherCost, "any N"};
//
// and registry.cc lists kRingAllgather once. What every algorithm shares is
// done here, once: the common argument checks (`supports` adds only the
// algorithm's own constraints, and may be left out), N = 1 (a copy, whatever
// the algorithm: `build` is called for N >= 2 only), the average's final
// division (spec.average) and N = 1's zero cost.
#pragma once

#include "model/cost_model.h"
#include "schedule/collective.h"
#include "schedule/program.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// Whether an algorithm can serve a request, and if not, why.
struct Support {
  bool ok = true;
  std::string reason;  // set when !ok, e.g. "needs a power-of-two rank count, got 6"

  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

// Ranks whose Programs are one Program with the peers renamed: the same op
// kinds, element counts, deps, steps and flags in the same order (the
// regions may differ). What the simulator reads of a rank is that much
// (ProgramSource::shape), so one Program serves the whole class.
struct RankClass {
  // The rank whose Program stands for spec.rank's, or -1: spec.rank's
  // Program is its own.
  int representative = -1;
  // How spec.rank names the representative's peer p: rotate, p + (rank -
  // representative) mod N (rings); xor_bits, p ^ representative ^ rank
  // (hypercube partners).
  enum class Rename : uint8_t { rotate, xor_bits } rename = Rename::rotate;
};

struct Algorithm {
  Collective collective = Collective::allreduce;
  std::string_view name;         // as CallOptions::algorithm and CHORUS_ALGO spell it
  std::string_view description;  // one line
  // The Program of spec.rank, for spec.nranks >= 2 and a spec that passed
  // supports(). Use build_program(), which adds what every algorithm shares.
  Program (*build)(const CollectiveSpec& spec) = nullptr;
  // The algorithm's own constraints, asked after the common checks passed and
  // only for N >= 2; nullptr: none.
  Support (*own_support)(const CollectiveSpec& spec) = nullptr;
  // Closed forms, the first on a switch; empty when the algorithm has none
  // (the simulator gives its time).
  std::span<const ClosedForm> costs;
  // What N, count and root it serves, in words (for docs/ALGORITHMS.md).
  std::string_view constraints;
  // Optional, for a spec that passed supports(): spec.rank's class
  // (RankClass); nullptr: every rank's Program is its own.
  RankClass (*rank_class)(const CollectiveSpec& spec) = nullptr;
};

// The registry's rows, in order.
std::span<const Algorithm* const> registry_rows();

// An algorithm's number in call stamps (core/call_stamp.h): 1 + its row.
// Every rank runs the same registry, so the numbers agree across ranks.
uint8_t algorithm_stamp_id(const Algorithm& algorithm);
// The name of the algorithm a stamp names; "" for 0 or a number no row has.
std::string_view algorithm_of_stamp_id(uint8_t id);
// Every registered algorithm, as references: for (const Algorithm& a : all_algorithms()).
// A plain range rather than std::views::transform, which clang 14 (the
// compiler of the fuzz build) cannot compile over libstdc++ 12's <ranges>.
struct AlgorithmRange {
  struct Iterator {
    const Algorithm* const* at;
    const Algorithm& operator*() const { return **at; }
    Iterator& operator++() {
      ++at;
      return *this;
    }
    bool operator==(const Iterator&) const = default;
  };
  std::span<const Algorithm* const> rows;
  Iterator begin() const { return {rows.data()}; }
  Iterator end() const { return {rows.data() + rows.size()}; }
};
inline AlgorithmRange all_algorithms() {
  return {registry_rows()};
}
// Algorithms of one collective, in registry order (preferred fallback order).
std::vector<const Algorithm*> algorithms_for(Collective collective);
// nullptr when no algorithm of that collective has that name.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// "ring, bidir_ring, ..." for error messages.
std::string algorithm_names(Collective collective);

// Shared argument checks (rank, root and element size in range, the
// collective the algorithm's).
Support check_common(const CollectiveSpec& spec);
// Whether `algorithm` serves `spec` on spec.rank: the common checks, then (for
// N >= 2) the algorithm's own.
Support supports(const Algorithm& algorithm, const CollectiveSpec& spec);

// Whether `algorithm` serves `spec` on every one of its spec.nranks ranks
// (what all ranks must agree on before they choose); the first declining
// rank's reason when not.
Support supported_everywhere(const Algorithm& algorithm, const CollectiveSpec& spec);
// The algorithms of spec.collective supported everywhere, in registry order.
std::vector<const Algorithm*> candidates_for(const CollectiveSpec& spec);

// spec.rank's Program: a copy for N = 1, the algorithm's builder otherwise,
// and for spec.average a final divide of the Output by N. The spec must be
// supported.
Program build_program(const Algorithm& algorithm, const CollectiveSpec& spec);
// The Programs of all spec.nranks ranks (spec.rank is ignored); throws
// Error(invalid_argument) with the reason when a rank's case is unsupported.
std::vector<Program> build_all(const Algorithm& algorithm, const CollectiveSpec& spec);

// The algorithm's closed-form time at N ranks and M bytes from its first form
// (a switch), or why there is none. N = 1 costs nothing.
Prediction closed_form(const Algorithm& algorithm, int nranks, double bytes,
                       const CostParams& params);
// Its form that is exact on `topology` with `ports` ports at N ranks, or
// nullptr.
const ClosedForm* closed_form_on(const Algorithm& algorithm, std::string_view topology, int nranks,
                                 int ports);

}  // namespace chorus
