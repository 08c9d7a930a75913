// The algorithm registry: every schedule builder chorus knows, by collective and
// name. Builders are pure functions of a CollectiveSpec: no I/O, no state.
#pragma once

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

struct Algorithm {
  Collective collective;
  std::string_view name;         // as CallOptions::algorithm and CHORUS_ALGO spell it
  std::string_view description;  // one line
  Support (*supports)(const CollectiveSpec& spec);
  Program (*build)(const CollectiveSpec& spec);
};

// Every registered algorithm, grouped by collective.
std::span<const Algorithm> all_algorithms();
// Algorithms of one collective, in registry order (preferred fallback order).
std::vector<const Algorithm*> algorithms_for(Collective collective);
// nullptr when no algorithm of that collective has that name.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// "ring, bidir_ring, ..." for error messages.
std::string algorithm_names(Collective collective);

// Shared argument checks for builders (rank in range, root in range, ...).
Support check_common(const CollectiveSpec& spec);

}  // namespace chorus
