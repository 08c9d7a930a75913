// What the hierarchical algorithms share (hier.h): when they serve a call, the
// flat AllReduce among one rank per host, and the two-level AllReduce.
#include "algorithms/hier.h"

#include "core/check.h"
#include "schedule/chunking.h"

#include <algorithm>
#include <optional>

namespace chorus {
namespace {

using B = ProgramBuilder;

// Block i of `region` cut into `parts`.
Region part_of(Region region, int parts, int i) {
  const Chunk c = block(region.count, static_cast<size_t>(parts), static_cast<size_t>(i));
  return {region.buffer, region.offset + c.offset, c.count};
}

std::vector<OpIndex> with(std::vector<OpIndex> deps, OpIndex more) {
  deps.push_back(more);
  return deps;
}

// The ring AllReduce of ring.cc over the group's ranks, partial sums in place.
std::vector<OpIndex> ring_allreduce(ProgramBuilder& b, const std::vector<int>& group, int me,
                                    Region region, const std::vector<OpIndex>& ready,
                                    uint32_t step) {
  const int n = static_cast<int>(group.size());
  const int right = group[static_cast<size_t>(ring_add(me, 1, n))];
  const int left = group[static_cast<size_t>(ring_add(me, -1, n))];
  auto blk = [&](int k) { return part_of(region, n, ring_add(0, k, n)); };
  std::vector<OpIndex> sends;
  OpIndex last = 0;
  for (int s = 0; s < n - 1; ++s) {
    const auto st = step + static_cast<uint32_t>(s);
    sends.push_back(s == 0 ? b.send(right, blk(me - 1), ready, st)
                           : b.send(right, blk(me - 1 - s), {last}, st));
    last = b.recv_reduce(left, blk(me - 2 - s), blk(me - 2 - s), ready, st);
  }
  std::vector<OpIndex> done{last};
  OpIndex prev = last;
  for (int s = 0; s < n - 1; ++s) {
    const auto st = step + static_cast<uint32_t>(n - 1 + s);
    b.send(right, blk(me - s), {prev}, st);
    // Overwrites the block the ReduceScatter's send of step s read.
    prev = b.recv(left, blk(me - 1 - s), {sends[static_cast<size_t>(s)]}, st);
    done.push_back(prev);
  }
  return done;
}

// Recursive doubling over the group (recursive_doubling.cc's exchanges, the
// incoming partial received into scratch and then reduced, since a rank
// sends its partial while it receives the partner's).
std::vector<OpIndex> doubling_allreduce(ProgramBuilder& b, const std::vector<int>& group, int me,
                                        Region region, const std::vector<OpIndex>& ready,
                                        uint32_t step) {
  const int n = static_cast<int>(group.size());
  const Fold f = make_fold(n);
  const auto rank_of = [&](int index) { return group[static_cast<size_t>(index)]; };
  const int k = floor_log2(f.core);
  if (f.is_extra(me)) {
    const int partner = rank_of(f.partner(me));
    const OpIndex s = b.send(partner, region, ready, step);
    return {b.recv(partner, region, {s}, step + static_cast<uint32_t>(k + 1))};
  }
  const Region tmp = B::scratch(b.alloc_scratch(region.count), region.count);
  std::vector<OpIndex> cur = ready;
  std::optional<OpIndex> reduced;  // the last reduce, which read tmp
  const int extra = f.partner(me);
  if (extra >= 0) {
    const OpIndex rv = b.recv(rank_of(extra), tmp, {}, step);
    reduced = b.reduce(tmp, region, with(cur, rv), step);
    cur = {*reduced};
  }
  const int c = f.core_index(me);
  for (int j = 0; j < k; ++j) {
    const auto st = step + static_cast<uint32_t>(j + 1);
    const int partner = rank_of(f.core_rank(c ^ (1 << j)));
    const OpIndex snd = b.send(partner, region, cur, st);
    const OpIndex rv =
        b.recv(partner, tmp, reduced ? std::vector<OpIndex>{*reduced} : std::vector<OpIndex>{}, st);
    reduced = b.reduce(tmp, region, with(with(cur, snd), rv), st);
    cur = {*reduced};
  }
  if (extra >= 0) b.send(rank_of(extra), region, cur, step + static_cast<uint32_t>(k + 1));
  return cur;
}

}  // namespace

Support hier_support(const CollectiveSpec& spec) {
  if (!spec.host_of || spec.host_of->empty())
    return Support::no("needs the ranks' hosts, and this call has none: all on one host");
  if (spec.host_of->size() != static_cast<size_t>(spec.nranks))
    return Support::no(
        str_cat("the call's hosts name ", spec.host_of->size(), " ranks, not ", spec.nranks));
  for (int h : *spec.host_of)
    if (h < 0) return Support::no(str_cat("a rank's host is negative: ", h));
  const HostGroups g = host_groups(*spec.host_of);
  if (g.host_count() < 2)
    return Support::no(
        str_cat("needs ranks on two or more hosts; all ", spec.nranks, " ranks are on one"));
  if (g.widest < 2)
    return Support::no(str_cat("needs a host with two or more ranks; each of the ", spec.nranks,
                               " ranks is on a host of its own"));
  return Support::yes();
}

HostGroups hier_hosts(const CollectiveSpec& spec) {
  CHORUS_CHECK(spec.host_of != nullptr);
  return host_groups(*spec.host_of);
}

HierPlace hier_place(const CollectiveSpec& spec) {
  HierPlace p{hier_hosts(spec)};
  const auto r = static_cast<size_t>(spec.rank);
  p.host = p.hosts.host[r];
  p.index = p.hosts.local[r];
  p.size = p.hosts.size_of(p.host);
  return p;
}

std::vector<OpIndex> group_allreduce(ProgramBuilder& b, const std::vector<int>& group, int me,
                                     Region region, std::vector<OpIndex> ready, size_t elem_size,
                                     uint32_t first_step) {
  CHORUS_CHECK(group.size() >= 2);
  if (group.size() >= 3 && region.count * elem_size >= kHierRingMinBytes)
    return ring_allreduce(b, group, me, region, ready, first_step);
  return doubling_allreduce(b, group, me, region, ready, first_step);
}

Program build_two_level_allreduce(const CollectiveSpec& spec, int slices) {
  const HierPlace place = hier_place(spec);
  const HostGroups& g = place.hosts;
  const int h = place.host, i = place.index, l = place.size;
  const std::vector<int>& local = place.local();
  const size_t count = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  // Local index j's slices, as one run of the vector.
  auto slices_of = [&](int j) {
    return block_range(count, static_cast<size_t>(slices),
                       static_cast<size_t>(g.first_part(h, j, slices)),
                       static_cast<size_t>(g.part_count(h, j, slices)));
  };
  auto owns = [&](int j) { return g.part_count(h, j, slices) > 0; };
  const Chunk own = slices_of(i);
  const Region own_out = B::output(own.offset, own.count);

  // 1. Each owner receives the local ranks' shares of its slices, in turn:
  // at step t a rank sends to local index i + t and receives from i - t.
  std::vector<std::optional<OpIndex>> sent(static_cast<size_t>(l));
  std::vector<OpIndex> ready;
  if (l == 1) {
    ready.push_back(b.copy(B::input(0, count), B::output(0, count), {}, 0));
  } else {
    std::optional<OpIndex> acc;
    for (int t = 1; t < l; ++t) {
      const auto st = static_cast<uint32_t>(t - 1);
      const int to = (i + t) % l;
      if (owns(to)) {
        const Chunk c = slices_of(to);
        sent[static_cast<size_t>(to)] =
            b.send(local[static_cast<size_t>(to)], B::input(c.offset, c.count), {}, st);
      }
      if (!owns(i)) continue;
      const int from = (i - t + l) % l;
      acc = acc ? b.recv_reduce(local[static_cast<size_t>(from)], own_out, own_out, {*acc}, st)
                : b.recv_reduce(local[static_cast<size_t>(from)], B::input(own.offset, own.count),
                                own_out, {}, st);
    }
    if (acc) ready.push_back(*acc);
  }

  // 2. Per run of slices with the same owners, one AllReduce among them.
  const auto inter_step = static_cast<uint32_t>(l);
  std::vector<OpIndex> reduced;
  const int first = g.first_part(h, i, slices);
  const int last = first + g.part_count(h, i, slices);
  auto owners = [&](int s) {
    std::vector<int> group;
    for (int o = 0; o < g.host_count(); ++o)
      group.push_back(
          g.ranks[static_cast<size_t>(o)][static_cast<size_t>(g.part_owner(o, s, slices))]);
    return group;
  };
  for (int s = first; s < last;) {
    const std::vector<int> group = owners(s);
    int end = s + 1;
    while (end < last && owners(end) == group) ++end;
    const Chunk run = block_range(count, static_cast<size_t>(slices), static_cast<size_t>(s),
                                  static_cast<size_t>(end - s));
    const std::vector<OpIndex> done = group_allreduce(b, group, h, B::output(run.offset, run.count),
                                                      ready, spec.elem_size, inter_step);
    reduced.insert(reduced.end(), done.begin(), done.end());
    s = end;
  }

  // 3. Each owner hands its reduced slices to the other local ranks, in turn.
  const auto gather_step = inter_step + static_cast<uint32_t>(2 * g.host_count());
  for (int t = 1; t < l; ++t) {
    const auto st = gather_step + static_cast<uint32_t>(t - 1);
    if (owns(i)) b.send(local[static_cast<size_t>((i + t) % l)], own_out, reduced, st);
    const int from = (i - t + l) % l;
    if (!owns(from)) continue;
    const Chunk c = slices_of(from);
    // Overwrites what step 1 sent from there (the same memory in place).
    b.recv(local[static_cast<size_t>(from)], B::output(c.offset, c.count),
           {*sent[static_cast<size_t>(from)]}, st);
  }
  return std::move(b).finish();
}

}  // namespace chorus
