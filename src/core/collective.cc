#include "core/collective.h"

namespace chorus {
namespace {
constexpr std::array<std::string_view, kCollectiveCount> kCollectiveNames{
    "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
    "alltoall",  "barrier",   "gather",         "scatter"};

// The rows of kCollectiveTraits are in enum order: spot checks of each kind.
static_assert(reduces(Collective::allreduce) && reduces(Collective::reduce_scatter) &&
              reduces(Collective::reduce) && !reduces(Collective::allgather));
static_assert(rooted(Collective::broadcast) && rooted(Collective::reduce) &&
              !rooted(Collective::allreduce) && !rooted(Collective::barrier));
static_assert(traits(Collective::allgather).output == Blocks::per_rank &&
              traits(Collective::reduce_scatter).input == Blocks::per_rank &&
              traits(Collective::alltoall).in_place == InPlace::none &&
              !has_data(Collective::barrier));
}  // namespace

bool is_valid(Collective c) {
  return static_cast<int>(c) >= 0 && static_cast<int>(c) < kCollectiveCount;
}

std::string_view to_string(Collective c) {
  return is_valid(c) ? kCollectiveNames[static_cast<size_t>(c)] : "invalid";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (size_t i = 0; i < kCollectiveNames.size(); ++i)
    if (kCollectiveNames[i] == name) return static_cast<Collective>(i);
  return std::nullopt;
}

}  // namespace chorus
