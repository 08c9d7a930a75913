#include "algorithms/deterministic.h"

#include "algorithms/simulate.h"

#include "core/check.h"
#include "core/exact_sum.h"

namespace chorus {

namespace {

// Seconds of `bytes` of local work at the options' copy rate (gamma without
// a fitted model).
double local_seconds(double bytes, const SimOptions& o) {
  if (o.copy != nullptr && !o.copy->empty()) return o.copy->at(bytes) * bytes;
  return o.gamma * bytes;
}

double part_seconds(const Algorithm& algo, const CollectiveSpec& spec, const Topology& topology,
                    SimOptions options) {
  if (spec.nranks <= 1) return 0;
  options.elem_size = spec.elem_size;
  return simulate_algorithm(algo, spec, topology, options).time;
}

}  // namespace

DeterministicParts deterministic_parts(const CollectiveSpec& call, DataType type) {
  CHORUS_CHECK(call.collective == Collective::allreduce ||
               call.collective == Collective::reduce_scatter ||
               call.collective == Collective::reduce);
  const size_t es = dtype_size(type);
  const size_t lanes = exact::lanes(type);
  const size_t total = call.collective == Collective::reduce_scatter
                           ? call.count * static_cast<size_t>(call.nranks)
                           : call.count;
  DeterministicParts p;
  p.scales = call;
  p.scales.collective = Collective::allreduce;
  p.scales.count = (exact::has_scales(type) ? exact::block_count(total) : 0) + 1;
  p.scales.elem_size = 4;
  p.scales.average = false;
  p.scales.window_buffers = false;
  p.scales.root = 0;
  p.integers = call;
  p.integers.count = call.count * lanes;
  p.integers.elem_size = 8;
  p.integers.average = false;
  p.integers.window_buffers = false;
  // To fixed forms: read the elements, write the lanes; back: read the
  // result's lanes, write the elements.
  p.local_bytes = static_cast<double>(total * (es + 8 * lanes) + call.count * (es + 8 * lanes));
  return p;
}

double simulate_deterministic(const Algorithm& algo, const CollectiveSpec& call, DataType type,
                              const Topology& topology, SimOptions options) {
  const DeterministicParts p = deterministic_parts(call, type);
  const Algorithm* scales = find_algorithm(Collective::allreduce, "recursive_doubling");
  CHORUS_CHECK(scales != nullptr);
  return part_seconds(*scales, p.scales, topology, options) +
         part_seconds(algo, p.integers, topology, options) + local_seconds(p.local_bytes, options);
}

double simulate_deterministic_scatter(const CollectiveSpec& call, DataType type,
                                      const Topology& topology, SimOptions options) {
  CHORUS_CHECK(call.collective == Collective::allreduce);
  const auto n = static_cast<size_t>(call.nranks);
  // Each rank's block, in whole blocks of 64 (engine/deterministic.cc).
  const size_t k = exact::block_count((call.count + n - 1) / n) * exact::kBlock;
  CollectiveSpec exchange = call;
  exchange.collective = Collective::alltoall;
  exchange.count = k;
  exchange.average = false;
  exchange.window_buffers = false;
  CollectiveSpec gather = exchange;
  gather.collective = Collective::allgather;
  const Algorithm* pairwise = find_algorithm(Collective::alltoall, "pairwise");
  const Algorithm* ring = find_algorithm(Collective::allgather, "ring");
  CHORUS_CHECK(pairwise != nullptr && ring != nullptr);
  options.elem_size = dtype_size(type);
  const double bytes = static_cast<double>(k * dtype_size(type));
  // The local sums read N contributions of the block and write it once.
  return part_seconds(*pairwise, exchange, topology, options) +
         part_seconds(*ring, gather, topology, options) +
         local_seconds((static_cast<double>(n) + 1) * bytes, options);
}

double simulate_deterministic_gather(const CollectiveSpec& call, DataType type,
                                     const Topology& topology, SimOptions options) {
  CHORUS_CHECK(call.collective == Collective::allreduce);
  const Algorithm* ring = find_algorithm(Collective::allgather, "ring");
  CHORUS_CHECK(ring != nullptr);
  CollectiveSpec gather = call;
  gather.collective = Collective::allgather;
  gather.average = false;
  gather.window_buffers = false;
  const double n = call.nranks;
  const double bytes = static_cast<double>(call.count * dtype_size(type));
  // The local sums read every contribution once and write the result; each
  // element's fixed form stays in the cache.
  return part_seconds(*ring, gather, topology, options) + local_seconds((n + 1) * bytes, options);
}

}  // namespace chorus
