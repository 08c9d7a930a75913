// The roads of a deterministic reduction, described once
// (algorithms/deterministic.h): the parts each road runs and their price.
//
// Cost per rank, M the call's bytes, w = 8 * lanes / element size (2 for
// float32 and float64, 4 for float16 and bfloat16), s = 1 / element size
// (the uint8 scale per element), ring and pairwise exchanges, recursive
// doubling for the scales:
//   whole    log2 N alpha + s M (log2 N) / beta      scales
//            + 2 (N-1) (alpha + w M / N / beta)      the integer pass (ring)
//            + conversions of M (w + 1) bytes
//   scatter  2 (N-1) alpha + 2 (N-1) M / N / beta + local sums of (N + 1) M / N
//   gather   (N-1) (alpha + M / beta) + local sums of (N + 1) M
#include "algorithms/deterministic.h"

#include "algorithms/simulate.h"

#include "core/check.h"
#include "core/exact_sum.h"

namespace chorus {

namespace {

// AllReduce and Reduce calls whose gathered contributions (N times the call)
// stay within this take the gather road: one collective instead of two.
constexpr size_t kGatherBytes = 64 << 10;

// Seconds of `bytes` of local work at the options' copy rate (gamma without
// a fitted model).
double local_seconds(double bytes, const SimOptions& o) {
  if (o.copy != nullptr && !o.copy->empty()) return o.copy->at(bytes) * bytes;
  return o.gamma * bytes;
}

DeterministicPart part_of(DeterministicRole role, const CollectiveSpec& call, Collective c,
                          size_t count, DataType type, ReduceOp op) {
  DeterministicPart p;
  p.role = role;
  p.spec = call;
  p.spec.collective = c;
  p.spec.count = count;
  p.spec.elem_size = dtype_size(type);
  p.spec.average = false;
  p.spec.window_buffers = false;
  if (c != Collective::reduce) p.spec.root = 0;
  p.type = type;
  p.op = op;
  return p;
}

}  // namespace

const char* to_string(DeterministicRoad road) {
  switch (road) {
    case DeterministicRoad::whole:
      return "whole";
    case DeterministicRoad::scatter:
      return "scatter";
    case DeterministicRoad::gather:
      return "gather";
  }
  return "?";
}

const char* to_string(DeterministicRole role) {
  switch (role) {
    case DeterministicRole::scales:
      return "scales";
    case DeterministicRole::integers:
      return "integers";
    case DeterministicRole::specials:
      return "specials";
    case DeterministicRole::exchange:
      return "exchange";
    case DeterministicRole::collect:
      return "collect";
  }
  return "?";
}

DeterministicRoad deterministic_road(Collective collective, int nranks, size_t count,
                                     size_t elem_size, bool algorithm_named) {
  if (algorithm_named) return DeterministicRoad::whole;
  if (collective == Collective::reduce_scatter) return DeterministicRoad::scatter;
  if (count * elem_size * static_cast<size_t>(nranks) <= kGatherBytes)
    return DeterministicRoad::gather;
  return DeterministicRoad::scatter;
}

std::string default_deterministic_pick(const CollectiveSpec& part, DataType type, ReduceOp op) {
  (void)type;
  (void)op;
  // (The scale pass: recursive doubling while it is small, ring beyond.)
  const bool small = part.count * part.elem_size <= kGatherBytes;
  const char* name = part.collective == Collective::alltoall    ? "pairwise"
                     : part.collective == Collective::allgather ? "ring"
                     : part.elem_size == 1 && small             ? "recursive_doubling"
                                                                : "ring";
  if (const Algorithm* a = find_algorithm(part.collective, name);
      a != nullptr && supported_everywhere(*a, part))
    return name;
  for (const Algorithm* a : algorithms_for(part.collective))
    if (supported_everywhere(*a, part)) return std::string(a->name);
  fail(ErrorCode::invalid_argument, "deterministic: no ", to_string(part.collective),
       " algorithm serves ", part.nranks, " ranks and ", part.count, " elements");
}

DeterministicPlan deterministic_plan(const CollectiveSpec& call, DataType type,
                                     DeterministicRoad road, const std::string& algorithm,
                                     const DeterministicPick& pick) {
  const Collective c = call.collective;
  if (c != Collective::allreduce && c != Collective::reduce_scatter && c != Collective::reduce)
    fail(ErrorCode::invalid_argument, "deterministic: ", to_string(c),
         " does not reduce; AllReduce, ReduceScatter and Reduce do");
  if (!exact::applies(type, ReduceOp::sum))
    fail(ErrorCode::invalid_argument, "deterministic: ", to_string(type),
         " has no deterministic form (float16, bfloat16, float32 and float64 do)");
  if (call.nranks < 1) fail(ErrorCode::invalid_argument, "deterministic: ", call.nranks, " ranks");
  const auto n = static_cast<size_t>(call.nranks);
  const size_t es = dtype_size(type);
  const size_t lanes = exact::lanes(type);
  const bool rs = c == Collective::reduce_scatter;
  const size_t total = rs ? call.count * n : call.count;
  DeterministicPlan plan;
  plan.road = road;
  auto picked = [&](DeterministicPart p) {
    p.algorithm = pick(p.spec, p.type, p.op);
    return p;
  };
  switch (road) {
    case DeterministicRoad::whole: {
      const size_t codes = exact::has_scales(type) ? total : 0;
      plan.parts.push_back(picked(part_of(DeterministicRole::scales, call, Collective::allreduce,
                                          codes + 1, DataType::uint8, ReduceOp::max)));
      DeterministicPart integers = part_of(DeterministicRole::integers, call, c, call.count * lanes,
                                           DataType::int64, ReduceOp::sum);
      DeterministicPart specials =
          part_of(DeterministicRole::specials, call, c, call.count, DataType::int64, ReduceOp::sum);
      specials.only_with_specials = true;
      if (algorithm.empty()) {
        integers = picked(integers);
        specials = picked(specials);
      } else {
        integers.algorithm = algorithm;
        specials.algorithm = algorithm;
        integers.named = true;
        specials.named = true;
      }
      plan.parts.push_back(integers);
      plan.parts.push_back(specials);
      // To fixed forms: read the elements (twice: scales, then fixed forms),
      // write the lanes; back: read the result's lanes, write the elements.
      plan.local_bytes =
          static_cast<double>(total * (2 * es + 8 * lanes) + call.count * (es + 8 * lanes));
      return plan;
    }
    case DeterministicRoad::scatter: {
      plan.block = rs ? call.count : (call.count + n - 1) / n;
      plan.parts.push_back(picked(part_of(DeterministicRole::exchange, call, Collective::alltoall,
                                          plan.block, type, ReduceOp::sum)));
      if (!rs)
        plan.parts.push_back(picked(part_of(DeterministicRole::collect, call, Collective::allgather,
                                            plan.block, type, ReduceOp::sum)));
      // The local sums read N contributions of the block and write it once.
      plan.local_bytes = static_cast<double>((n + 1) * plan.block * es);
      return plan;
    }
    case DeterministicRoad::gather: {
      if (rs)
        fail(ErrorCode::invalid_argument,
             "deterministic: ReduceScatter takes the whole or the scatter road, not gather");
      plan.parts.push_back(picked(part_of(DeterministicRole::collect, call, Collective::allgather,
                                          call.count, type, ReduceOp::sum)));
      plan.local_bytes = static_cast<double>((n + 1) * call.count * es);
      return plan;
    }
  }
  fail(ErrorCode::invalid_argument, "deterministic: unknown road ", static_cast<int>(road));
}

double simulate_deterministic_plan(const DeterministicPlan& plan, const Topology& topology,
                                   SimOptions options) {
  double seconds = 0;
  for (const DeterministicPart& p : plan.parts) {
    if (p.only_with_specials || p.spec.nranks <= 1) continue;
    const Algorithm* algo = find_algorithm(p.spec.collective, p.algorithm);
    if (algo == nullptr)
      fail(ErrorCode::invalid_argument, "deterministic: no ", to_string(p.spec.collective),
           " algorithm '", p.algorithm, "' for the ", to_string(p.role), " part");
    options.elem_size = p.spec.elem_size;
    seconds += simulate_algorithm(*algo, p.spec, topology, options).time;
  }
  return seconds + local_seconds(plan.local_bytes, options);
}

double simulate_deterministic(const Algorithm& algo, const CollectiveSpec& call, DataType type,
                              const Topology& topology, SimOptions options) {
  return simulate_deterministic_plan(
      deterministic_plan(call, type, DeterministicRoad::whole, std::string(algo.name)), topology,
      options);
}

double simulate_deterministic_scatter(const CollectiveSpec& call, DataType type,
                                      const Topology& topology, SimOptions options) {
  return simulate_deterministic_plan(deterministic_plan(call, type, DeterministicRoad::scatter, ""),
                                     topology, options);
}

double simulate_deterministic_gather(const CollectiveSpec& call, DataType type,
                                     const Topology& topology, SimOptions options) {
  return simulate_deterministic_plan(deterministic_plan(call, type, DeterministicRoad::gather, ""),
                                     topology, options);
}

}  // namespace chorus
