// Unit tests of the verifier's building blocks: the interned rank sets and the
// run-length symbolic memory, the latter against a plain per-element model
// under random reads and writes.
#include "verify/symbolic_memory.h"
#include "verify/rank_set.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace chorus {
namespace {

TEST(RankSetPool, SingletonsUnionsAndInterning) {
  RankSetPool pool(10);
  EXPECT_EQ(pool.size(pool.all()), 10u);
  EXPECT_EQ(pool.describe(pool.singleton(3)), "{3}");
  const auto a = pool.unite_disjoint(pool.singleton(3), pool.singleton(4));
  ASSERT_TRUE(a);
  EXPECT_EQ(pool.describe(*a), "{3-4}");
  const auto b = pool.unite_disjoint(*a, pool.singleton(7));
  ASSERT_TRUE(b);
  EXPECT_EQ(pool.describe(*b), "{3-4,7}");
  // Overlap: a contribution would be counted twice.
  EXPECT_FALSE(pool.unite_disjoint(*b, pool.singleton(4)));
  EXPECT_EQ(pool.first_common(*b, pool.singleton(4)), 4);
  // The same set built another way is the same id.
  const auto c = pool.unite_disjoint(pool.singleton(7), pool.singleton(4));
  const auto d = pool.unite_disjoint(*c, pool.singleton(3));
  EXPECT_EQ(*d, *b);
  // Filling the gaps gives the interned set of all ranks.
  {
    RankSetPool::Id acc = *b;
    for (int r : {0, 1, 2, 5, 6, 8, 9}) acc = *pool.unite_disjoint(acc, pool.singleton(r));
    EXPECT_EQ(acc, pool.all());
  }
  EXPECT_EQ(pool.first_missing(pool.all(), *b), 0);
  EXPECT_EQ(pool.first_missing(*b, pool.all()), -1);
  EXPECT_EQ(pool.unite(*b, *a), *b);  // general union tolerates overlap
}

TEST(RankSetPool, OneRank) {
  RankSetPool pool(1);
  EXPECT_EQ(pool.all(), pool.singleton(0));
}

// Per-element reference: (index, set) or undefined.
struct Cell {
  int64_t index = 0;
  RankSetPool::Id set = RankSetPool::kUndefined;
  bool operator==(const Cell& o) const {
    return set == o.set && (set == RankSetPool::kUndefined || index == o.index);
  }
};

std::vector<Cell> expand(const Segments& segs) {
  std::vector<Cell> out;
  for (const Segment& s : segs)
    for (size_t k = 0; k < s.count; ++k)
      out.push_back({static_cast<int64_t>(out.size()) + s.delta, s.set});
  return out;
}

TEST(SymbolicMemory, MatchesAPerElementModel) {
  std::mt19937 rng(12345);
  const size_t size = 300;
  SymbolicMemory mem(size);
  std::vector<Cell> model(size);
  Segments segs;
  auto uniform = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  for (int iter = 0; iter < 20000; ++iter) {
    const size_t at = uniform(0, size - 1);
    const size_t n = uniform(0, std::min<size_t>(size - at, 40));
    if (uniform(0, 2) == 0) {
      // Copy a window to another place, as a message or copy does.
      const size_t from = uniform(0, size - n);
      mem.read(from, n, segs);
      ASSERT_EQ(expand(segs), std::vector<Cell>(model.begin() + static_cast<long>(from),
                                                model.begin() + static_cast<long>(from + n)));
      mem.write(at, segs);
      const std::vector<Cell> moved(model.begin() + static_cast<long>(from),
                                    model.begin() + static_cast<long>(from + n));
      // Content keeps its element indices wherever it moves.
      for (size_t k = 0; k < n; ++k) model[at + k] = moved[k];
    } else {
      // Fresh content: a few segments with their own sets and deltas.
      Segments fresh;
      for (size_t left = n; left > 0;) {
        const size_t len = uniform(1, left);
        const auto set = uniform(0, 3) == 0 ? RankSetPool::kUndefined
                                            : static_cast<RankSetPool::Id>(uniform(0, 2));
        fresh.push_back({len, static_cast<int64_t>(uniform(0, 5)) - 2, set});
        left -= len;
      }
      mem.write(at, fresh);
      const auto cells = expand(fresh);
      for (size_t k = 0; k < n; ++k) model[at + k] = cells[k];
    }
    if (iter % 97 == 0) {
      mem.read(0, size, segs);
      ASSERT_EQ(expand(segs), model) << "iteration " << iter;
    }
  }
  // Runs merge: writing one content over everything leaves one run.
  mem.write(0, Segments{{size, 0, 1}});
  EXPECT_EQ(mem.run_count(), 1u);
}

}  // namespace
}  // namespace chorus
