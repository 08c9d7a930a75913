#include "schedule/collective.h"

namespace chorus {

BufferCounts buffer_counts(const CollectiveSpec& s) {
  const CollectiveTraits& t = traits(s.collective);
  return {block_elements(t.input, s.count, s.nranks), block_elements(t.output, s.count, s.nranks)};
}

std::optional<size_t> in_place_input_offset(const CollectiveSpec& s) {
  switch (traits(s.collective).in_place) {
    case InPlace::same:
      return 0;
    case InPlace::send_in_recv:
      return static_cast<size_t>(s.rank) * s.count;
    default:
      return std::nullopt;
  }
}

std::optional<size_t> in_place_output_offset(const CollectiveSpec& s) {
  if (traits(s.collective).in_place == InPlace::recv_in_send)
    return static_cast<size_t>(s.rank) * s.count;
  return std::nullopt;
}

}  // namespace chorus
