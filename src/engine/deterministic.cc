// Deterministic reductions: AllReduce, ReduceScatter and Reduce with sum or
// avg on floating types, as calls of this communicator on integers
// (core/exact_sum.h has the arithmetic; docs/ALGORITHMS.md, "Deterministic
// reductions", the method and its bound).
//
// Three roads to the same bits:
//
//   whole    1. scales: AllReduce(max) of one int32 per block of 64 elements
//               (and one flag: some rank holds an infinity or a NaN)
//            2. every rank turns its elements into fixed forms (int64 lanes)
//            3. the collective itself, on the integers, with sum: any
//               algorithm, since integer addition is exact and associative
//               (the algorithm the call names runs here)
//            4. (only when flagged) the same collective on per-element
//               counts of infinities and NaNs
//            5. back to the element type, rounded once
//            bytes: the call's, times 8 / element size (float16 4x, float32
//            2x, float64 2x), plus count / 16 bytes of scales
//
//   scatter  (AllReduce with no algorithm named, over 64 KiB gathered)
//            AllToAll: each rank receives every rank's part of its block;
//            each rank sums its block's N contributions itself, exactly
//            (exact::sum_gathered); AllGather of the results. The bytes of a
//            ring AllReduce, 2 (N-1)/N of the call, no scale pass, and local
//            sums of count / N elements of N contributions
//
//   gather   (AllReduce with no algorithm named, N * count at most 64 KiB)
//            AllGather of the elements, then each rank sums all N
//            contributions of every element: one collective
//
// All compute the same function of the contributions: a block's scale is the
// largest exponent among all its contributions, and the sum is exact, on
// every road (exact_sum.h).
//
// Calls longer than kPiece elements go piece by piece (whole blocks), so that
// the integer buffers stay bounded; pieces do not change any bit, because an
// element's result depends on its block only.
#include "engine/call_site.h"
#include "engine/communicator_impl.h"

#include "core/check.h"
#include "core/exact_sum.h"
#include "core/log.h"

#include <algorithm>
#include <cstring>

namespace chorus::detail {

namespace {

// Elements per piece: whole blocks, 32 MiB of int64 lanes for float32.
constexpr size_t kPiece = size_t{1} << 22;
static_assert(kPiece % exact::kBlock == 0);
// The gather and scatter roads' pieces are smaller, so that the
// contributions an AllGather or AllToAll has just written are summed while
// they are still in the cache.
// (512 KiB of float32 per piece: at N = 2, 4 MiB of float32 took 2.5x the
// ordinary call with pieces of 2 MiB, 1.1-1.5x with these; docs/PERFORMANCE.md.)
constexpr size_t kScatterPiece = size_t{1} << 17;
constexpr size_t kGatherPiece = size_t{1} << 18;
static_assert(kScatterPiece % exact::kBlock == 0 && kGatherPiece % exact::kBlock == 0);

// AllReduce calls whose gathered contributions (N times the call) stay within
// this take the gather road at any N: one collective instead of two.
constexpr size_t kGatherBytes = 64 << 10;

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

CommunicatorImpl::Road CommunicatorImpl::deterministic_road(const Call& call) const {
  const size_t n = static_cast<size_t>(size());
  if (call.collective != Collective::allreduce || !call.options.algorithm.empty() ||
      !config_.algorithm_for(call.collective).empty() || n == 1)
    return Road::whole;
  if (call.count * dtype_size(call.type) * n <= kGatherBytes) return Road::gather;
  return Road::scatter;
}

std::string CommunicatorImpl::deterministic_pick(const Call& call) {
  const Road road = deterministic_road(call);
  if (road == Road::gather) return "gather";
  if (road == Road::scatter) return "scatter";
  // The integer pass's algorithm, as the integer call of this size gets it.
  CollectiveSpec spec{
      call.collective,      size(), rank(), call.count * exact::lanes(call.type), 8, call.root,
      config_.segment_bytes};
  spec.host_of = host_of_;
  spec.windows = windows_ != nullptr;
  return std::string(current_algorithm(spec, DataType::int64, ReduceOp::sum, call.options).name);
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

  const auto timeout = call.options.timeout.count() > 0 ? call.options.timeout : config_.timeout;
  const Deadline deadline = deadline_after(timeout, Clock::now());
  // Each part gets what is left of the call's deadline.
  auto part_options = [&](std::string algorithm) {
    CallOptions o;
    o.algorithm = std::move(algorithm);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    o.timeout = std::chrono::milliseconds(std::max<long long>(left, 1));
    return o;
  };
  const std::string& algorithm = call.options.algorithm;
  const DataType type = call.type;
  const size_t es = dtype_size(type);
  const size_t w = exact::lanes(type);
  const uint32_t divisor = call.op == ReduceOp::avg ? static_cast<uint32_t>(n) : 1;
  const bool on_root = c != Collective::reduce || rank() == call.root;
  const auto* send = static_cast<const std::byte*>(call.send);
  auto* recv = static_cast<std::byte*>(call.recv);

  try {
    const Road road = deterministic_road(call);
    if (road == Road::gather) {
      // The gather road.
      for (size_t at = 0; at < call.count; at += kGatherPiece) {
        const size_t m = std::min(kGatherPiece, call.count - at);
        det_.gathered.resize(m * es * static_cast<size_t>(n));
        run_part(c, 1,
                 Call::allgather(send + at * es, det_.gathered.data(), m, type, part_options("")));
        exact::sum_gathered(type, det_.gathered.data(), m, n, divisor, recv + at * es);
      }
    } else if (road == Road::scatter) {
      // Each rank's block of k elements (whole blocks of 64, so that its
      // scales are the call's; zeros pad the last) gathers every rank's
      // contribution by an AllToAll, is summed here, and goes to every rank
      // by an AllGather.
      const auto un = static_cast<size_t>(n);
      for (size_t at = 0; at < call.count; at += kScatterPiece) {
        const size_t m = std::min(kScatterPiece, call.count - at);
        const size_t k = exact::block_count((m + un - 1) / un) * exact::kBlock;
        const size_t mp = k * un;
        const std::byte* from = send + at * es;
        if (mp != m) {
          det_.padded.resize(mp * es);
          std::memcpy(det_.padded.data(), from, m * es);
          std::memset(det_.padded.data() + m * es, 0, (mp - m) * es);
          from = det_.padded.data();
        }
        det_.gathered.resize(mp * es);
        run_part(c, 1, Call::alltoall(from, det_.gathered.data(), k, type, part_options("")));
        det_.block.resize(k * es);
        exact::sum_gathered(type, det_.gathered.data(), k, n, divisor, det_.block.data());
        std::byte* all = recv + at * es;
        if (mp != m) {
          det_.result_elements.resize(mp * es);
          all = det_.result_elements.data();
        }
        run_part(c, 2, Call::allgather(det_.block.data(), all, k, type, part_options("")));
        if (mp != m) std::memcpy(recv + at * es, all, m * es);
      }
    } else if (c == Collective::reduce_scatter) {
      const size_t rc = call.count;
      const size_t total = rc * static_cast<size_t>(n);
      const size_t nb = exact::has_scales(type) ? exact::block_count(total) : 0;
      det_.scales.assign(nb + 1, 0);
      bool special = false;
      exact::max_scales(type, send, total, 0, det_.scales.data(), &special);
      det_.scales[nb] = special ? 1 : 0;
      run_part(c, 1,
               Call::allreduce(det_.scales.data(), det_.scales.data(), nb + 1, DataType::int32,
                               ReduceOp::max, part_options("")));
      special = det_.scales[nb] != 0;
      for (size_t at = 0; at < rc; at += kPiece) {
        const size_t m = std::min(kPiece, rc - at);
        det_.fixed.resize(m * w * static_cast<size_t>(n));
        det_.result.resize(m * w);
        for (int j = 0; j < n; ++j) {
          const size_t first = static_cast<size_t>(j) * rc + at;
          exact::to_fixed(type, send + first * es, m, first, det_.scales.data(),
                          det_.fixed.data() + static_cast<size_t>(j) * m * w, false, special);
        }
        run_part(c, 2,
                 Call::reduce_scatter(det_.fixed.data(), det_.result.data(), m * w, DataType::int64,
                                      ReduceOp::sum, part_options(algorithm)));
        if (special) {
          det_.specials.resize(m * static_cast<size_t>(n));
          det_.special_sums.resize(m);
          for (int j = 0; j < n; ++j) {
            const size_t first = static_cast<size_t>(j) * rc + at;
            exact::special_counts(type, send + first * es, m,
                                  det_.specials.data() + static_cast<size_t>(j) * m, false);
          }
          run_part(c, 3,
                   Call::reduce_scatter(det_.specials.data(), det_.special_sums.data(), m,
                                        DataType::int64, ReduceOp::sum, part_options(algorithm)));
        }
        exact::from_fixed(type, det_.result.data(), m, static_cast<size_t>(rank()) * rc + at,
                          det_.scales.data(), divisor, special ? det_.special_sums.data() : nullptr,
                          recv + at * es);
      }
    } else {
      // AllReduce and Reduce on the whole road, piece by piece.
      for (size_t at = 0; at < call.count; at += kPiece) {
        const size_t m = std::min(kPiece, call.count - at);
        const size_t nb = exact::has_scales(type) ? exact::block_count(m) : 0;
        det_.scales.assign(nb + 1, 0);
        bool special = false;
        exact::max_scales(type, send + at * es, m, 0, det_.scales.data(), &special);
        det_.scales[nb] = special ? 1 : 0;
        run_part(c, 1,
                 Call::allreduce(det_.scales.data(), det_.scales.data(), nb + 1, DataType::int32,
                                 ReduceOp::max, part_options("")));
        special = det_.scales[nb] != 0;
        det_.fixed.resize(m * w);
        exact::to_fixed(type, send + at * es, m, 0, det_.scales.data(), det_.fixed.data(), false,
                        special);
        if (special) {
          det_.specials.resize(m);
          exact::special_counts(type, send + at * es, m, det_.specials.data(), false);
        }
        if (c == Collective::allreduce) {
          run_part(c, 2,
                   Call::allreduce(det_.fixed.data(), det_.fixed.data(), m * w, DataType::int64,
                                   ReduceOp::sum, part_options(algorithm)));
          if (special)
            run_part(c, 3,
                     Call::allreduce(det_.specials.data(), det_.specials.data(), m, DataType::int64,
                                     ReduceOp::sum, part_options(algorithm)));
        } else {
          det_.result.resize(m * w);
          det_.special_sums.resize(special ? m : 0);
          run_part(c, 2,
                   Call::reduce(det_.fixed.data(), det_.result.data(), m * w, DataType::int64,
                                ReduceOp::sum, call.root, part_options(algorithm)));
          if (special)
            run_part(
                c, 3,
                Call::reduce(det_.specials.data(), det_.special_sums.data(), m, DataType::int64,
                             ReduceOp::sum, call.root, part_options(algorithm)));
        }
        if (!on_root) continue;
        const int64_t* sums = c == Collective::allreduce ? det_.fixed.data() : det_.result.data();
        const int64_t* counts = !special                     ? nullptr
                                : c == Collective::allreduce ? det_.specials.data()
                                                             : det_.special_sums.data();
        exact::from_fixed(type, sums, m, 0, det_.scales.data(), divisor, counts, recv + at * es);
      }
    }
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
