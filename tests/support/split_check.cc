#include "support/split_check.h"

#include "core/check.h"
#include "support/grid.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>

namespace chorus::test {

std::vector<int> members_of(Communicator& child, int parent_rank) {
  const int32_t mine = parent_rank;
  std::vector<int32_t> all(static_cast<size_t>(child.size()));
  child.allgather(&mine, all.data(), 1, DataType::int32);
  return {all.begin(), all.end()};
}

std::vector<std::string> check_collectives(Communicator& comm) {
  const auto n = static_cast<size_t>(comm.size());
  std::vector<GridCase> cases;
  for (int c = 0; c < kCollectiveCount; ++c) {
    if (static_cast<Collective>(c) == Collective::barrier) continue;  // no data: called below
    for (const GridCase& g : grid_cases(static_cast<Collective>(c), comm.size(), false)) {
      const bool count_kept = g.count == 1 || g.count == n + 1;
      const bool type_kept = g.type == DataType::float32 || g.type == DataType::int64;
      const bool op_kept = g.op == ReduceOp::sum || g.op == ReduceOp::max;
      if (count_kept && type_kept && op_kept) cases.push_back(g);
    }
  }
  comm.barrier();
  return run_grid(comm, cases, "");
}

namespace {

std::string list(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += str_cat(i ? " " : "", v[i]);
  return out + "]";
}

// Checks one child: its members (in rank order) are `expected`, and every
// collective on it is exact.
void check_child(const std::string& name, std::optional<Communicator>& child, int parent_rank,
                 const std::vector<int>& expected, std::vector<std::string>& problems) {
  if (expected.empty()) {
    if (child) problems.push_back(name + ": a communicator where std::nullopt was due");
    return;
  }
  if (!child) {
    problems.push_back(name + ": std::nullopt where members " + list(expected) + " were due");
    return;
  }
  const auto self = std::find(expected.begin(), expected.end(), parent_rank) - expected.begin();
  if (child->size() != static_cast<int>(expected.size()) || child->rank() != self) {
    problems.push_back(str_cat(name, ": rank ", child->rank(), " of ", child->size(),
                               ", where rank ", self, " of ", expected.size(), " was due"));
    return;
  }
  const std::vector<int> got = members_of(*child, parent_rank);
  if (got != expected)
    problems.push_back(name + ": members " + list(got) + ", where " + list(expected) + " was due");
  for (const std::string& e : check_collectives(*child)) problems.push_back(name + ": " + e);
}

// The members of the group of `rank` when every rank r passes color(r) and
// key(r): ordered by (key, rank).
template <typename Color, typename Key>
std::vector<int> expected_group(int size, int rank, Color color, Key key) {
  if (color(rank) < 0) return {};
  std::vector<int> out;
  for (int r = 0; r < size; ++r)
    if (color(r) == color(rank)) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) { return key(a) < key(b); });
  return out;
}

}  // namespace

std::vector<std::string> check_splits(Communicator& comm) {
  std::vector<std::string> problems;
  const int n = comm.size();
  const int r = comm.rank();
  auto run = [&](const std::string& name, auto color, auto key) {
    std::optional<Communicator> child = comm.split(color(r), key(r));
    check_child(name, child, r, expected_group(n, r, color, key), problems);
  };
  run(
      "parity", [](int x) { return x % 2; }, [](int x) { return x; });
  run(
      "blocks of 3", [](int x) { return x / 3; }, [](int x) { return x; });
  run(
      "key reversal", [](int) { return 7; }, [](int x) { return -x; });
  run(
      "equal keys", [](int x) { return x % 2; }, [](int) { return 5; });
  run(
      "negative colors", [](int x) { return x == 0 || x == 3 ? -1 : 1; }, [](int x) { return x; });
  run(
      "own groups", [](int x) { return x; }, [](int) { return 0; });

  // A child of a child: parity, then halves of each parity class.
  {
    std::optional<Communicator> parity = comm.split(r % 2, r);
    std::optional<Communicator> half =
        parity->split(parity->rank() < parity->size() / 2 ? 0 : 1, parity->rank());
    std::vector<int> same;  // the parent ranks of r's parity, in order
    for (int x = r % 2; x < n; x += 2) same.push_back(x);
    const int split_at = static_cast<int>(same.size()) / 2;
    const int mine = static_cast<int>(std::find(same.begin(), same.end(), r) - same.begin());
    std::vector<int> expected;
    for (int i = 0; i < static_cast<int>(same.size()); ++i)
      if ((i < split_at) == (mine < split_at)) expected.push_back(same[static_cast<size_t>(i)]);
    // The grandchild's members, as ranks of the top communicator.
    const std::vector<int> top = members_of(*half, r);
    if (top != expected)
      problems.push_back("child of a child: members " + list(top) + ", where " + list(expected) +
                         " was due");
    for (const std::string& e : check_collectives(*half))
      problems.push_back("child of a child: " + e);
    // The middle generation goes first; the grandchild lives on.
    parity.reset();
    for (const std::string& e : check_collectives(*half))
      problems.push_back("child of a child, its parent destroyed: " + e);
  }

  // Parent and child interleaved, asynchronous calls of both outstanding at
  // once, in the same order on every rank.
  {
    std::optional<Communicator> child = comm.split(r % 2, -r);
    const auto cn = static_cast<size_t>(child->size());
    std::vector<int64_t> a(5, r + 1), b(3, r + 1), c(4, 0), all(cn * 2, -1);
    const int64_t mine[2] = {r, 10 * r};
    Work w1 = comm.allreduce_async(a.data(), a.data(), a.size(), DataType::int64, ReduceOp::sum);
    Work w2 = child->allreduce_async(b.data(), b.data(), b.size(), DataType::int64, ReduceOp::max);
    Work w3 = child->allgather_async(mine, all.data(), 2, DataType::int64);
    comm.barrier();
    if (r == 0) std::iota(c.begin(), c.end(), 100);
    comm.broadcast(c.data(), c.data(), c.size(), DataType::int64, 0);
    w3.wait();
    w2.wait();
    w1.wait();
    int64_t parity_max = 0;
    for (int x = r % 2; x < n; x += 2) parity_max = std::max<int64_t>(parity_max, x + 1);
    const std::vector<int> order = expected_group(
        n, r, [](int x) { return x % 2; }, [](int x) { return -x; });
    bool good = std::all_of(a.begin(), a.end(), [&](int64_t v) { return v == n * (n + 1) / 2; }) &&
                std::all_of(b.begin(), b.end(), [&](int64_t v) { return v == parity_max; }) &&
                c == std::vector<int64_t>{100, 101, 102, 103};
    for (size_t i = 0; i < cn; ++i)
      good = good && all[2 * i] == order[i] && all[2 * i + 1] == 10 * order[i];
    if (!good) problems.push_back("interleaved: wrong results");
  }

  // split_by_host: the ranks of this communicator with this rank's host.
  {
    std::optional<Communicator> local = comm.split_by_host();
    const std::vector<int> got = members_of(*local, r);
    if (std::find(got.begin(), got.end(), r) == got.end() ||
        !std::is_sorted(got.begin(), got.end()))
      problems.push_back("split_by_host: members " + list(got));
    for (const std::string& e : check_collectives(*local))
      problems.push_back("split_by_host: " + e);
  }
  return problems;
}

}  // namespace chorus::test
