#include "verify/happens_before.h"

#include "core/check.h"

#include <algorithm>
#include <numeric>

namespace chorus {

bool HappensBefore::order(size_t total, std::span<const uint32_t> succ_off,
                          std::span<const uint32_t> succ) {
  CHORUS_CHECK(succ_off.size() == total + 1);
  total_ = total;
  succ_off_ = succ_off;
  succ_ = succ;
  // Kahn: the ops with no edge into them first.
  std::vector<uint32_t> indegree(total, 0);
  for (uint32_t s : succ) ++indegree[s];
  pred_off_.assign(total + 1, 0);
  for (size_t g = 0; g < total; ++g) pred_off_[g + 1] = pred_off_[g] + indegree[g];
  pred_.resize(succ.size());
  std::vector<uint32_t> fill(pred_off_.begin(), pred_off_.end() - 1);
  for (size_t g = 0; g < total; ++g)
    for (uint32_t k = succ_off[g]; k < succ_off[g + 1]; ++k)
      pred_[fill[succ[k]]++] = static_cast<uint32_t>(g);
  topo_.clear();
  topo_.reserve(total);
  for (size_t g = 0; g < total; ++g)
    if (indegree[g] == 0) topo_.push_back(static_cast<uint32_t>(g));
  for (size_t at = 0; at < topo_.size(); ++at) {
    const uint32_t g = topo_[at];
    for (uint32_t k = succ_off[g]; k < succ_off[g + 1]; ++k)
      if (--indegree[succ[k]] == 0) topo_.push_back(succ[k]);
  }
  return topo_.size() == total;
}

uint32_t HappensBefore::add_op(uint32_t op) {
  return add_range(op, op + 1);
}

uint32_t HappensBefore::add_range(uint32_t first, uint32_t last) {
  items_.push_back({first, last});
  return static_cast<uint32_t>(items_.size() - 1);
}

size_t HappensBefore::ask(uint32_t item, uint32_t op) {
  questions_.push_back({item, op});
  answers_.push_back(0);
  return questions_.size() - 1;
}

void HappensBefore::answer() {
  CHORUS_CHECK(topo_.size() == total_);
  if (answered_ == questions_.size()) return;
  // The open questions by item, so that each batch of items answers its own.
  std::vector<size_t> open(questions_.size() - answered_);
  std::iota(open.begin(), open.end(), answered_);
  std::stable_sort(open.begin(), open.end(),
                   [&](size_t a, size_t b) { return questions_[a].item < questions_[b].item; });
  constexpr uint32_t kBatch = 64 * kWords;
  fwd_.resize(total_ * kWords);
  bwd_.resize(total_ * kWords);
  size_t next = 0;
  while (next < open.size()) {
    const uint32_t lo = questions_[open[next]].item / kBatch * kBatch;
    const uint32_t hi = std::min<uint32_t>(lo + kBatch, static_cast<uint32_t>(items_.size()));
    std::fill(fwd_.begin(), fwd_.end(), 0);
    std::fill(bwd_.begin(), bwd_.end(), 0);
    for (uint32_t it = lo; it < hi; ++it) {
      const uint32_t bit = it - lo;
      for (uint32_t g = items_[it].first; g < items_[it].last; ++g) {
        fwd_[g * kWords + bit / 64] |= uint64_t{1} << (bit % 64);
        bwd_[g * kWords + bit / 64] |= uint64_t{1} << (bit % 64);
      }
    }
    // Forward: an op inherits the items that reach its predecessors.
    for (uint32_t g : topo_) {
      const uint64_t* from = &fwd_[g * kWords];
      uint64_t any = 0;
      for (size_t w = 0; w < kWords; ++w) any |= from[w];
      if (any == 0) continue;
      for (uint32_t k = succ_off_[g]; k < succ_off_[g + 1]; ++k) {
        uint64_t* to = &fwd_[static_cast<size_t>(succ_[k]) * kWords];
        for (size_t w = 0; w < kWords; ++w) to[w] |= from[w];
      }
    }
    // Backward: an op reaches the items its successors reach.
    for (size_t t = topo_.size(); t-- > 0;) {
      const uint32_t g = topo_[t];
      uint64_t* to = &bwd_[static_cast<size_t>(g) * kWords];
      for (uint32_t k = succ_off_[g]; k < succ_off_[g + 1]; ++k) {
        const uint64_t* from = &bwd_[static_cast<size_t>(succ_[k]) * kWords];
        for (size_t w = 0; w < kWords; ++w) to[w] |= from[w];
      }
    }
    for (; next < open.size() && questions_[open[next]].item < hi; ++next) {
      const Question& q = questions_[open[next]];
      const uint32_t bit = q.item - lo;
      const size_t at = static_cast<size_t>(q.op) * kWords + bit / 64;
      const uint64_t mask = uint64_t{1} << (bit % 64);
      answers_[open[next]] =
          static_cast<uint8_t>(((fwd_[at] & mask) != 0 ? 1 : 0) | ((bwd_[at] & mask) != 0 ? 2 : 0));
    }
  }
  answered_ = questions_.size();
}

std::vector<uint32_t> HappensBefore::ancestors(uint32_t op) const {
  std::vector<uint8_t> seen(total_, 0);
  std::vector<uint32_t> out, stack{op};
  while (!stack.empty()) {
    const uint32_t g = stack.back();
    stack.pop_back();
    for (uint32_t k = pred_off_[g]; k < pred_off_[g + 1]; ++k) {
      const uint32_t p = pred_[k];
      if (seen[p]) continue;
      seen[p] = 1;
      out.push_back(p);
      stack.push_back(p);
    }
  }
  return out;
}

}  // namespace chorus
