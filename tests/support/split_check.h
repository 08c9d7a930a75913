// The split checks (Communicator::split, split_by_host), shared by the
// in-process test (tests/groups/split_test.cc) and the multi-process one
// (mp_check split, over shm and tcp): every rank of `comm` runs them alike.
#pragma once

#include <chorus/chorus.h>

#include <string>
#include <vector>

namespace chorus::test {

// The ranks of `parent` that form `child`, in child rank order: an allgather
// of each member's parent rank over the child.
std::vector<int> members_of(Communicator& child, int parent_rank);

// Every collective on `comm`, a few cases each (counts 1 and size()+1, two
// dtypes, in and out of place), checked exactly against the references;
// returns the mismatches.
std::vector<std::string> check_collectives(Communicator& comm);

// Parity, blocks, key reversal, negative colors, every rank in its own
// group, a child of a child, parent and child interleaved, a child that
// outlives its parent's other children, split_by_host; each child's members
// checked, and every collective on each child checked exactly. Returns the
// problems found, each prefixed with the case ("parity: ...").
std::vector<std::string> check_splits(Communicator& comm);

}  // namespace chorus::test
