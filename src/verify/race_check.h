// Race check of one rank's Program for the verifier.
//
// Two ops of one rank race when neither is ordered before the other through
// deps (transitively) and they touch overlapping memory, at least one of them
// writing. The check sweeps the ops in program order, which is a topological
// order since deps name earlier ops, keeping for every run of memory its last
// writer and the readers since that write. An op has to be ordered after the
// last writer of what it touches, and, when it writes, after the readers since
// then; that covers every earlier conflicting op by transitivity (each earlier
// writer was itself ordered before the next one). So only ops whose regions
// overlap are ever compared, and the ordering question is answered by a walk
// back along deps that stops below the oldest op in question.
#pragma once

#include "schedule/matching.h"
#include "schedule/program.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

// Where the buffers of one rank sit in one address space: out of place they
// are disjoint; in place Input aliases Output (or, for ReduceScatter, Output
// aliases Input) at the collective's offset. The staging window of a
// one-sided Program is a buffer of its own.
struct Layout {
  bool in_place = false;
  size_t base[4] = {0, 0, 0, 0};  // indexed by BufferKind
  size_t size = 0;
  size_t address(const Region& r) const { return base[static_cast<size_t>(r.buffer)] + r.offset; }
};

struct RaceFinding {
  enum class Kind { race, overlapping_operands };
  Kind kind = Kind::race;
  OpIndex first = 0;   // the earlier op (for overlapping_operands: the op)
  OpIndex second = 0;  // the later op
  size_t address = 0;  // an address both touch
  std::string message;
};

// Checks one rank's program under one layout. Regions must already be known to
// lie inside their buffers and deps to name earlier ops.
//
// With `unordered`, two conflicting ops that deps do not order are no finding
// of their own: they are appended to `unordered` and the sweep goes on as if
// they were ordered. The verifier asks there whether other ranks order them
// (a one-sided Program's ops can be ordered through a peer's signal that
// follows a wait for this rank's), and only reports a race when not.
std::optional<RaceFinding> find_race(const Program& program, const Layout& layout,
                                     std::vector<RaceFinding>* unordered = nullptr);

// Whether the copy is a no-op under the layout (src and dst the same memory).
bool is_noop_copy(const Op& op, const Layout& layout);

}  // namespace chorus
