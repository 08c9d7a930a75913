// Deterministic reductions: AllReduce, ReduceScatter and Reduce with sum or
// avg on floating types, as calls of this communicator (core/exact_sum.h has
// the arithmetic; docs/ALGORITHMS.md, "Deterministic reductions", the method
// and its bound).
//
// The roads and their parts are described once, in algorithms/deterministic.h
// (deterministic_plan); this file runs that description part by part, with
// the local work each part's role asks for:
//
//   scales    before: each rank's scale codes (max_scales, one uint8 per
//             element) and the flag "an infinity or a NaN"; the AllReduce(max)
//   integers  before: fixed forms (to_fixed); the collective on int64 lanes
//   specials  (only when flagged) before: counts of infinities and NaNs; the
//             collective on them
//   exchange  the AllToAll of the elements; after: the exact sums of this
//             rank's block (exact::sum_gathered)
//   collect   the AllGather of the elements (gather road; after: the exact
//             sums of every element) or of the block's sums (scatter road)
//   and, on the whole road, the sums back to the element type (from_fixed).
//
// Every road computes the same function of each element's own
// contributions (exact_sum.h), so the road, the algorithms, the pieces and
// the call's length change no bit. Calls longer than a piece go piece by
// piece, so that the buffers stay bounded and (scatter, gather) the
// contributions an exchange has just written are summed while in the cache.
#include "engine/call_site.h"
#include "engine/communicator_impl.h"

#include "core/check.h"
#include "core/exact_sum.h"
#include "core/log.h"

#include <algorithm>
#include <cstring>

namespace chorus::detail {

namespace {

// Elements per piece of the whole road: 32 MiB of int64 lanes for float32.
constexpr size_t kPiece = size_t{1} << 22;
// The scatter and gather roads' pieces are smaller, so that the
// contributions an AllToAll or AllGather has just written are summed while
// they are still in the cache.
// (512 KiB of float32 per piece: at N = 2, 4 MiB of float32 took 2.5x the
// ordinary call with pieces of 2 MiB, 1.1-1.5x with these; docs/PERFORMANCE.md.)
constexpr size_t kScatterPiece = size_t{1} << 17;
constexpr size_t kGatherPiece = size_t{1} << 18;

}  // namespace

bool CommunicatorImpl::deterministic(const Call& call) const {
  if (call.kind != Call::Kind::collective) return false;
  if (!call.options.deterministic && !config_.deterministic) return false;
  const Collective c = call.collective;
  if (c != Collective::allreduce && c != Collective::reduce_scatter && c != Collective::reduce)
    return false;
  if (!is_valid(call.type) || !is_valid(call.op)) return false;  // validate() says why
  if (!exact::order_independent(call.type, call.op))
    fail(ErrorCode::invalid_argument, CallSite{rank(), to_string(c)},
         "a deterministic call reduces with sum, avg, min or max; prod on ", to_string(call.type),
         " depends on the order of the ranks");
  return exact::applies(call.type, call.op);
}

DeterministicPlan CommunicatorImpl::deterministic_plan(const Call& call, size_t count) {
  const std::string named = call.options.algorithm.empty() ? config_.algorithm_for(call.collective)
                                                           : call.options.algorithm;
  const DeterministicRoad road = deterministic_road(call.collective, size(), call.count,
                                                    dtype_size(call.type), !named.empty());
  CollectiveSpec spec = spec_of(call);
  spec.count = count == 0 ? call.count : count;
  return chorus::deterministic_plan(
      spec, call.type, road, named, [this](const CollectiveSpec& part, DataType t, ReduceOp op) {
        return std::string(current_algorithm(part, t, op, CallOptions{}).name);
      });
}

std::string CommunicatorImpl::deterministic_pick(const Call& call) {
  const DeterministicPlan plan = deterministic_plan(call);
  if (plan.road != DeterministicRoad::whole) return to_string(plan.road);
  for (const DeterministicPart& p : plan.parts)
    if (p.role == DeterministicRole::integers) return p.algorithm;
  fail(ErrorCode::internal, "deterministic: the whole road without an integer pass");
}

void CommunicatorImpl::run_part(Collective whole, uint32_t k, const Call& call) {
  part_ = part_of(whole, k);
  std::shared_ptr<WorkState> work;
  try {
    work = submit_collective(call);
  } catch (...) {
    part_ = 0;
    throw;
  }
  part_ = 0;
  wait(*work);
}

std::shared_ptr<WorkState> CommunicatorImpl::submit_deterministic(const Call& call) {
  validate(call);
  const Collective c = call.collective;
  const int n = size();
  if (n > exact::kMaxRanks)
    fail(ErrorCode::invalid_argument, CallSite{rank(), to_string(c)},
         "deterministic reductions sum up to ", exact::kMaxRanks, " ranks; this communicator has ",
         n);
  if (call.count == 0) return submit_collective(call);  // nothing to reduce: the ordinary call
  det_ran_.clear();
  part_root_ = c == Collective::reduce ? call.root : 0;

  const auto timeout = call.options.timeout.count() > 0 ? call.options.timeout : config_.timeout;
  const Deadline deadline = deadline_after(timeout, Clock::now());
  // Each part gets what is left of the call's deadline, and its algorithm
  // where the call named it.
  auto part_options = [&](const DeterministicPart& p) {
    CallOptions o;
    if (p.named) o.algorithm = p.algorithm;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    o.timeout = std::chrono::milliseconds(std::max<long long>(left, 1));
    return o;
  };
  const DataType type = call.type;
  const size_t es = dtype_size(type);
  const size_t w = exact::lanes(type);
  const auto un = static_cast<size_t>(n);
  const uint32_t divisor = call.op == ReduceOp::avg ? static_cast<uint32_t>(n) : 1;
  const bool rs = c == Collective::reduce_scatter;
  const bool on_root = c != Collective::reduce || rank() == call.root;
  const bool scaled = exact::has_scales(type);
  const auto* send = static_cast<const std::byte*>(call.send);
  auto* recv = static_cast<std::byte*>(call.recv);
  // Contribution j of a piece at `at` (ReduceScatter: rank j's part).
  const size_t rc = call.count;
  auto source = [&](size_t j, size_t at) { return send + ((rs ? j * rc : 0) + at) * es; };

  try {
    DeterministicPlan plan = deterministic_plan(call, std::min(call.count, kPiece));
    const DeterministicRoad road = plan.road;
    const size_t piece = road == DeterministicRoad::whole     ? kPiece
                         : road == DeterministicRoad::scatter ? kScatterPiece
                                                              : kGatherPiece;
    size_t planned = std::min(call.count, kPiece);
    for (size_t at = 0; at < call.count; at += piece) {
      const size_t m = std::min(piece, call.count - at);
      if (m != planned) {
        plan = deterministic_plan(call, m);
        planned = m;
      }
      // The contributions each rank converts: its whole input's piece
      // (ReduceScatter: every rank's part of it).
      const size_t parts_in = rs ? un : 1;
      auto codes = [&](size_t j) { return scaled ? det_.scales.data() + j * m : nullptr; };
      bool special = false;
      for (size_t k = 0; k < plan.parts.size(); ++k) {
        const DeterministicPart& p = plan.parts[k];
        const auto number = static_cast<uint32_t>(k + 1);
        switch (p.role) {
          case DeterministicRole::scales: {
            const size_t count = p.spec.count - 1;  // the codes; the flag last
            det_.scales.assign(count + 1, 0);
            for (size_t j = 0; j < parts_in; ++j)
              exact::max_scales(type, source(j, at), m, scaled ? codes(j) : det_.scales.data(),
                                &special);
            det_.scales[count] = special ? 1 : 0;
            run_part(c, number,
                     Call::allreduce(det_.scales.data(), det_.scales.data(), count + 1,
                                     DataType::uint8, ReduceOp::max, part_options(p)));
            special = det_.scales[count] != 0;
            break;
          }
          case DeterministicRole::integers: {
            det_.fixed.resize(m * w * parts_in);
            for (size_t j = 0; j < parts_in; ++j)
              exact::to_fixed(type, source(j, at), m, codes(j), det_.fixed.data() + j * m * w,
                              false, special);
            det_.result.resize(m * w);
            if (c == Collective::allreduce)
              run_part(c, number,
                       Call::allreduce(det_.fixed.data(), det_.fixed.data(), m * w, DataType::int64,
                                       ReduceOp::sum, part_options(p)));
            else if (rs)
              run_part(c, number,
                       Call::reduce_scatter(det_.fixed.data(), det_.result.data(), m * w,
                                            DataType::int64, ReduceOp::sum, part_options(p)));
            else
              run_part(c, number,
                       Call::reduce(det_.fixed.data(), det_.result.data(), m * w, DataType::int64,
                                    ReduceOp::sum, call.root, part_options(p)));
            break;
          }
          case DeterministicRole::specials: {
            if (!special) break;
            det_.specials.resize(m * parts_in);
            for (size_t j = 0; j < parts_in; ++j)
              exact::special_counts(type, source(j, at), m, det_.specials.data() + j * m, false);
            det_.special_sums.resize(m);
            if (c == Collective::allreduce)
              run_part(c, number,
                       Call::allreduce(det_.specials.data(), det_.specials.data(), m,
                                       DataType::int64, ReduceOp::sum, part_options(p)));
            else if (rs)
              run_part(c, number,
                       Call::reduce_scatter(det_.specials.data(), det_.special_sums.data(), m,
                                            DataType::int64, ReduceOp::sum, part_options(p)));
            else
              run_part(c, number,
                       Call::reduce(det_.specials.data(), det_.special_sums.data(), m,
                                    DataType::int64, ReduceOp::sum, call.root, part_options(p)));
            break;
          }
          case DeterministicRole::exchange: {
            // Each rank's block of kb elements gathers every rank's
            // contribution; zeros pad the last block of an AllReduce or
            // Reduce, and a ReduceScatter's pieces are packed.
            const size_t kb = plan.block;
            const size_t mp = kb * un;
            const std::byte* from = source(0, at);
            if (rs && m != rc) {
              det_.padded.resize(mp * es);
              for (size_t j = 0; j < un; ++j)
                std::memcpy(det_.padded.data() + j * m * es, source(j, at), m * es);
              from = det_.padded.data();
            } else if (!rs && mp != m) {
              det_.padded.resize(mp * es);
              std::memcpy(det_.padded.data(), from, m * es);
              std::memset(det_.padded.data() + m * es, 0, (mp - m) * es);
              from = det_.padded.data();
            }
            det_.gathered.resize(mp * es);
            run_part(c, number,
                     Call::alltoall(from, det_.gathered.data(), kb, type, part_options(p)));
            if (rs) {
              exact::sum_gathered(type, det_.gathered.data(), kb, n, divisor, recv + at * es);
            } else {
              det_.block.resize(kb * es);
              exact::sum_gathered(type, det_.gathered.data(), kb, n, divisor, det_.block.data());
            }
            break;
          }
          case DeterministicRole::collect: {
            if (road == DeterministicRoad::gather) {
              det_.gathered.resize(m * es * un);
              run_part(
                  c, number,
                  Call::allgather(source(0, at), det_.gathered.data(), m, type, part_options(p)));
              if (on_root)
                exact::sum_gathered(type, det_.gathered.data(), m, n, divisor, recv + at * es);
              break;
            }
            const size_t kb = plan.block;
            const size_t mp = kb * un;
            std::byte* all = recv + at * es;
            if (mp != m || !on_root) {
              det_.result_elements.resize(mp * es);
              all = det_.result_elements.data();
            }
            run_part(c, number, Call::allgather(det_.block.data(), all, kb, type, part_options(p)));
            if (all != recv + at * es && on_root) std::memcpy(recv + at * es, all, m * es);
            break;
          }
        }
      }
      if (road == DeterministicRoad::whole && on_root) {
        const int64_t* sums = c == Collective::allreduce ? det_.fixed.data() : det_.result.data();
        const int64_t* counts = !special                     ? nullptr
                                : c == Collective::allreduce ? det_.specials.data()
                                                             : det_.special_sums.data();
        exact::from_fixed(type, sums, m, codes(rs ? static_cast<size_t>(rank()) : 0), divisor,
                          counts, recv + at * es);
      }
    }
    det_last_ = std::move(plan);
  } catch (const Error& e) {
    // The part's error, named after the call the user made.
    throw Error(e.code(), str_cat("deterministic ", to_string(c), ": ", e.what()));
  }
  auto work = new_work();
  work->retired = true;
  work->finished = true;
  return work;
}

}  // namespace chorus::detail
