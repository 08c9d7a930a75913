// The collectives chorus offers, by name. Every layer speaks of them: the
// configuration (per-collective overrides), the Program builders, the model,
// the tools.
#pragma once

#include <optional>
#include <string_view>

namespace chorus {

enum class Collective {
  allreduce,
  allgather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  barrier,
};
inline constexpr int kCollectiveCount = 7;

std::string_view to_string(Collective c);
std::optional<Collective> parse_collective(std::string_view name);

}  // namespace chorus
