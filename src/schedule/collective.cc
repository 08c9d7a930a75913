#include "schedule/collective.h"

namespace chorus {

BufferCounts buffer_counts(const CollectiveSpec& s) {
  const size_t n = static_cast<size_t>(s.nranks);
  switch (s.collective) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce: return {s.count, s.count};
    case Collective::allgather: return {s.count, s.count * n};
    case Collective::reduce_scatter: return {s.count * n, s.count};
    case Collective::alltoall: return {s.count * n, s.count * n};
    case Collective::barrier: return {0, 0};
  }
  return {};
}

std::optional<size_t> in_place_input_offset(const CollectiveSpec& s) {
  switch (s.collective) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce: return 0;
    case Collective::allgather: return static_cast<size_t>(s.rank) * s.count;
    default: return std::nullopt;
  }
}

std::optional<size_t> in_place_output_offset(const CollectiveSpec& s) {
  if (s.collective == Collective::reduce_scatter) return static_cast<size_t>(s.rank) * s.count;
  return std::nullopt;
}

}  // namespace chorus
