#include "core/collective.h"

#include <array>

namespace chorus {
namespace {
constexpr std::array<std::string_view, kCollectiveCount> kNames{
    "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall", "barrier"};
}

std::string_view to_string(Collective c) {
  const auto i = static_cast<size_t>(c);
  return i < kNames.size() ? kNames[i] : "invalid";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<Collective>(i);
  return std::nullopt;
}

}  // namespace chorus
