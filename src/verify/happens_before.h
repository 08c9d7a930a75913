// Happens-before over the ops of all ranks, for the verifier's one-sided
// checks: which op is ordered before which, through deps and across ranks
// through signal -> wait edges.
//
// The graph is given as successor lists over global op ids (an edge a -> b:
// a completes before b starts). Questions are asked in bulk and answered
// together: an "item" is a set of ops (one op, or every op of a rank), and a
// question asks whether the item happens before an op (some op of the item
// reaches it) and whether the op happens before the item (it reaches some op
// of the item). answer() sweeps the graph twice per batch of 256 items, once
// forward in topological order and once backward, carrying one bit per item,
// so a million questions about a few thousand items cost a few hundred sweeps
// of the graph and no more memory than four words per op.
//
//   HappensBefore hb;
//   if (!hb.order(total, succ_off, succ)) ...;   // a cycle: the ranks deadlock
//   const uint32_t w = hb.add_op(write);
//   const size_t q = hb.ask(w, read);
//   hb.answer();
//   if (!hb.before(q) && !hb.after(q)) ...;       // the two race
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace chorus {

class HappensBefore {
 public:
  // Orders the `total` ops topologically; false when the edges form a cycle.
  // The spans must outlive the object.
  bool order(size_t total, std::span<const uint32_t> succ_off, std::span<const uint32_t> succ);

  // Items: one op, or the ops [first, last) (a rank's ops are numbered
  // contiguously). Returns the item's number.
  uint32_t add_op(uint32_t op);
  uint32_t add_range(uint32_t first, uint32_t last);

  // Asks about (item, op); returns the question's number. An op of the item
  // itself counts as reached (an item happens before its own ops and after
  // them); ask about ops outside the item.
  size_t ask(uint32_t item, uint32_t op);
  // Answers every question asked since the last answer().
  void answer();
  // Some op of the item happens before `op` (a path from it to `op`).
  bool before(size_t question) const { return answers_[question] & 1; }
  // `op` happens before some op of the item.
  bool after(size_t question) const { return (answers_[question] & 2) != 0; }

  // The ops that happen before `op`, `op` excluded (a walk back along the
  // edges; for error messages, not for bulk use).
  std::vector<uint32_t> ancestors(uint32_t op) const;

 private:
  static constexpr size_t kWords = 4;  // items per batch: 64 * kWords

  struct Item {
    uint32_t first;
    uint32_t last;
  };
  struct Question {
    uint32_t item;
    uint32_t op;
  };

  size_t total_ = 0;
  std::span<const uint32_t> succ_off_, succ_;
  std::vector<uint32_t> topo_;
  std::vector<uint32_t> pred_off_, pred_;  // the edges reversed, for ancestors()
  std::vector<Item> items_;
  std::vector<Question> questions_;
  std::vector<uint8_t> answers_;
  size_t answered_ = 0;
  std::vector<uint64_t> fwd_, bwd_;
};

}  // namespace chorus
