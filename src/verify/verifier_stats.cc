// The verifier's per-rank counts (RankStats): messages, bytes, elements
// reduced, one-sided ops and distinct steps, counted as the structure check
// walks each Program, and the latency depth, from the timed event run.
#include "verify/verifier_impl.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace chorus::verify_internal {

void Verifier::count_op(RankStats& st, const Op& o, std::vector<uint32_t>& steps) const {
  if (o.kind == OpKind::send) {
    ++st.messages_sent;
    st.bytes_sent += o.src.count * spec_.elem_size;
  }
  if (is_receive(o.kind)) {
    ++st.messages_received;
    st.bytes_received += o.dst.count * spec_.elem_size;
  }
  if (o.kind == OpKind::recv_reduce || o.kind == OpKind::reduce || o.kind == OpKind::get_reduce)
    st.elements_reduced += o.dst.count;
  if (reads_remote(o.kind)) {
    ++st.gets;
    st.bytes_got += o.remote.count * spec_.elem_size;
  }
  if (o.kind == OpKind::signal) ++st.signals;
  if (has_peer(o.kind) || is_one_sided(o.kind)) steps.push_back(o.step);
}

void Verifier::finish_rank_stats(RankStats& st, std::vector<uint32_t>& steps) {
  std::sort(steps.begin(), steps.end());
  st.distinct_steps = static_cast<size_t>(std::unique(steps.begin(), steps.end()) - steps.begin());
  result_.total_messages += st.messages_sent;
}

void Verifier::record_timing() {
  for (int r = 0; r < spec_.nranks; ++r) {
    uint32_t t = 0;
    for (size_t g = base_[static_cast<size_t>(r)]; g < base_[static_cast<size_t>(r) + 1]; ++g)
      t = std::max(t, t_done_[g]);
    result_.ranks[static_cast<size_t>(r)].critical_path = t;
    result_.critical_path = std::max<size_t>(result_.critical_path, t);
  }
}

}  // namespace chorus::verify_internal
