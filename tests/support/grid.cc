#include "support/grid.h"
#include "algorithms/algorithm.h"
#include "engine/communicator_impl.h"
#include "support/progress.h"

#include "core/check.h"
#include "core/exact_sum.h"
#include "perf/perf_check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace chorus::test {

namespace {

perf::CheckCase check_case(Collective c, DataType t, ReduceOp op, int nranks, int rank,
                           size_t count, int root) {
  return {c, t, op, nranks, rank, count, root};
}

// Rank `rank`'s input buffer for a call.
std::vector<std::byte> make_input(const perf::CheckCase& c) {
  const size_t es = dtype_size(c.type);
  std::vector<std::byte> input(
      buffer_counts({c.collective, c.nranks, c.rank, c.count, es, c.root}).input * es);
  perf::fill_input(c, input.data());
  return input;
}

// `count` elements of poison (perf::poison), so that an unwritten element shows.
std::vector<std::byte> poisoned(DataType t, size_t count) {
  std::vector<std::byte> out(count * dtype_size(t));
  perf::poison(t, out.data(), count);
  return out;
}

}  // namespace

std::string GridCase::describe() const {
  return str_cat(to_string(collective), " count=", count, " ", to_string(type), " ", to_string(op),
                 " root=", root, in_place ? " in-place" : " out-of-place",
                 window ? " window buffers" : "", deterministic ? " deterministic" : "");
}

std::vector<GridCase> with_deterministic(const std::vector<GridCase>& cases) {
  std::vector<GridCase> out = cases;
  for (GridCase c : cases) {
    const bool reduction = c.collective == Collective::allreduce ||
                           c.collective == Collective::reduce_scatter ||
                           c.collective == Collective::reduce;
    if (!reduction || !exact::applies(c.type, c.op)) continue;
    c.deterministic = true;
    out.push_back(c);
  }
  return out;
}

std::vector<GridCase> with_window_buffers(const std::vector<GridCase>& cases) {
  std::vector<GridCase> out = cases;
  for (GridCase c : cases) {
    c.window = true;
    out.push_back(c);
  }
  return out;
}

bool needs_windows(const Algorithm& algorithm) {
  CollectiveSpec spec{algorithm.collective, 2, 0, 1, 4, 0};
  spec.windows = false;
  const bool without = static_cast<bool>(supports(algorithm, spec));
  spec.windows = true;
  return !without && static_cast<bool>(supports(algorithm, spec));
}

CollectiveSpec case_spec(const Communicator& comm, const GridCase& c) {
  CollectiveSpec spec{c.collective, comm.size(), comm.rank(), c.count, dtype_size(c.type), c.root};
  spec.windows = detail::impl_of(comm).transport().shares_memory();
  spec.host_of = detail::impl_of(comm).host_of();
  return spec;
}

std::shared_ptr<const std::vector<std::byte>> ReferenceCache::get(Collective c, DataType t,
                                                                  ReduceOp op, int nranks, int rank,
                                                                  size_t count, int root) {
  // Different bytes on different ranks: a rank's share of per-rank input
  // blocks (reduce_scatter, alltoall), or an output on the root only.
  const bool per_rank = traits(c).input == Blocks::per_rank || traits(c).output_on_root_only;
  const Key key{static_cast<int>(c),
                static_cast<int>(t),
                static_cast<int>(op),
                nranks,
                per_rank ? rank : -1,
                count,
                root};
  std::lock_guard lock(mu_);
  auto& slot = entries_[key];
  if (!slot)
    slot = std::make_shared<const std::vector<std::byte>>(
        perf::expected_output(check_case(c, t, op, nranks, rank, count, root)));
  return slot;
}

std::string run_case(Communicator& comm, const GridCase& c, const std::string& algorithm,
                     ReferenceCache* cache) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t es = dtype_size(c.type);
  const CollectiveTraits& traits_of = traits(c.collective);
  const perf::CheckCase cc = check_case(c.collective, c.type, c.op, n, r, c.count, c.root);
  std::vector<std::byte> input = make_input(cc);
  std::shared_ptr<const std::vector<std::byte>> expect_ptr =
      cache ? cache->get(c.collective, c.type, c.op, n, r, c.count, c.root)
            : std::make_shared<const std::vector<std::byte>>(perf::expected_output(cc));
  const std::vector<std::byte>& expect = *expect_ptr;
  if (!has_data(c.collective))
    fail(ErrorCode::internal, "grid: no data to check in ", to_string(c.collective));
  if (c.window && traits_of.in_place != InPlace::same &&
      traits_of.in_place != InPlace::send_in_recv)
    fail(ErrorCode::internal, "grid: window buffers only where send lies in recv in place");
  const size_t out_bytes = buffer_counts(case_spec(comm, c)).output * es;
  const size_t block = static_cast<size_t>(r) * c.count * es;  // this rank's block, in bytes
  // Output buffers start as poison so that an unwritten element shows.
  std::vector<std::byte> out = poisoned(c.type, out_bytes / es);
  std::vector<std::byte> aliased;  // the one buffer of an in-place call that writes into send
  Call call{Call::Kind::collective,
            c.collective,
            input.data(),
            out.data(),
            c.count,
            c.type,
            c.op,
            c.root,
            -1,
            {}};
  call.options.algorithm = algorithm;
  call.options.deterministic = c.deterministic;
  // In place as the collective's in-place form says (collective.h).
  if (c.in_place) switch (traits_of.in_place) {
      case InPlace::same:
        out = input;
        call.send = call.recv = out.data();
        break;
      case InPlace::send_in_recv:
        std::copy(input.begin(), input.end(), out.begin() + static_cast<long>(block));
        call.send = out.data() + block;
        break;
      case InPlace::recv_in_send:
        aliased = input;
        call.send = aliased.data();
        call.recv = aliased.data() + block;
        break;
      case InPlace::none: {
        // No in-place form: an aliased call must be refused before any byte
        // moves (a count of 0 moves nothing and is accepted).
        aliased = input;
        call.send = call.recv = aliased.data();
        try {
          comm.submit(call).wait();
        } catch (const Error& e) {
          if (e.code() == ErrorCode::invalid_argument && c.count > 0 && aliased == input) return "";
          return str_cat("rank ", r, " ", c.describe(), ": unexpected error: ", e.what());
        }
        if (c.count == 0) return "";
        return str_cat("rank ", r, " ", c.describe(), ": aliased ", to_string(c.collective),
                       " was accepted");
      }
    }
  if (c.window) {
    // The same windows on every rank (windows are collective), arranged as
    // the ordinary buffers are: in place, send lies at the same offset
    // inside the recv window.
    Window win_out = comm.window(out_bytes);
    Window win_in = c.in_place ? Window() : comm.window(input.size());
    auto* base = static_cast<std::byte*>(win_out.data());
    if (out_bytes > 0) std::memcpy(base, out.data(), out_bytes);
    if (c.in_place) {
      call.send = base + (static_cast<const std::byte*>(call.send) - out.data());
    } else {
      if (!input.empty()) std::memcpy(win_in.data(), input.data(), input.size());
      call.send = win_in.data();
    }
    call.recv = base;
    finish(comm, comm.submit(call));
    if (out_bytes > 0) std::memcpy(out.data(), base, out_bytes);
  } else {
    finish(comm, comm.submit(call));
  }
  if (!uses_output(c.collective, r, c.root)) return "";  // reduce's recv off the root
  std::vector<std::byte> result = std::move(out);
  if (c.in_place && traits_of.in_place == InPlace::recv_in_send)
    result.assign(aliased.begin() + static_cast<long>(block),
                  aliased.begin() + static_cast<long>(block + c.count * es));
  if (result == expect) return "";
  size_t first = 0;
  while (first + 1 < result.size() && result[first] == expect[first]) ++first;
  return str_cat("rank ", r, "/", n, " ", c.describe(), " algo=", algorithm,
                 ": mismatch at element ", first / es, " of ", result.size() / es);
}

std::vector<GridCase> grid_cases(Collective c, int nranks, bool include_large) {
  std::vector<GridCase> out;
  const auto n = static_cast<size_t>(nranks);
  std::vector<size_t> counts{0, 1, n + 1};
  if (n >= 2) counts.insert(counts.begin() + 2, n - 1);
  const bool reducing = reduces(c);
  std::vector<int> roots{0};
  if (rooted(c)) {
    if (nranks > 1) roots.push_back(nranks - 1);
    if (nranks > 2) roots.push_back(nranks / 2);
  }
  for (size_t count : counts)
    for (int t = 0; t < kDataTypeCount; ++t)
      for (int o = 0; o < (reducing ? kReduceOpCount : 1); ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        if (reducing && !applies(op, type)) continue;  // bitwise on floats: an error
        for (int root : roots)
          for (bool in_place : {false, true}) out.push_back({c, count, type, op, root, in_place});
      }
  if (include_large) {
    constexpr size_t kLarge = 1000003;  // prime: never divides evenly
    const std::pair<DataType, ReduceOp> slice[] = {{DataType::float32, ReduceOp::sum},
                                                   {DataType::int64, ReduceOp::max},
                                                   {DataType::bfloat16, ReduceOp::avg}};
    // allgather and reduce_scatter count per rank block: keep the whole
    // vector near kLarge elements so that the grid stays quick at N = 16.
    const size_t large = per_rank_blocks(c) ? std::max<size_t>(1, kLarge / n) : kLarge;
    for (auto [t, o] : slice)
      for (bool in_place : {false, true})
        out.push_back({c, large, t, reducing ? o : ReduceOp::sum, roots.back(), in_place});
  }
  return out;
}

std::vector<std::string> run_grid(Communicator& comm, const std::vector<GridCase>& cases,
                                  const std::string& algorithm, ReferenceCache* cache) {
  std::vector<std::string> errors;
  const ProgressMode given = progress_of(comm);
  for (const GridCase& c : cases)
    for (int rep = 0; rep < 2; ++rep) {
      // Both progress modes (support/progress.h): the first call advanced
      // by its caller, the second by the progress thread alone.
      use_progress(comm, rep == 0 ? ProgressMode::caller : ProgressMode::thread);
      std::string e = run_case(comm, c, algorithm, cache);
      if (!e.empty() && errors.size() < 8)
        errors.push_back(
            e + str_cat(" (call ", rep + 1, rep == 0 ? ", caller" : ", thread", " progress)"));
    }
  use_progress(comm, given);
  return errors;
}

size_t run_every_algorithm(Communicator& comm, bool include_large,
                           const std::function<bool(const GridCase&)>& keep,
                           ReferenceCache* cache) {
  const int n = comm.size();
  size_t cases_run = 0;
  size_t algos = 0;
  size_t hierarchical = 0;  // hier_* algorithms that ran some case
  std::vector<std::string> errors;
  for (const Algorithm& a : all_algorithms()) {
    if (!has_data(a.collective)) continue;
    ++algos;
    std::vector<GridCase> served;
    for (const auto& c : grid_cases(a.collective, n, include_large)) {
      if (!keep(c)) continue;
      if (supports(a, case_spec(comm, c))) served.push_back(c);
    }
    auto e = run_grid(comm, served, std::string(a.name), cache);
    cases_run += served.size();
    if (a.name.starts_with("hier_") && !served.empty()) ++hierarchical;
    errors.insert(errors.end(), e.begin(), e.end());
  }
  for (const Algorithm* a : algorithms_for(Collective::barrier)) {
    CallOptions o;
    o.algorithm = std::string(a->name);
    comm.barrier(o);
    comm.barrier(o);
  }
  for (const auto& e : errors) std::printf("MISMATCH %s\n", e.c_str());
  std::printf(
      "grid: rank %d of %d, %zu algorithms (%zu hierarchical), %zu cases x 2 calls, %zu "
      "mismatches\n",
      comm.rank(), n, algos, hierarchical, cases_run, errors.size());
  return errors.size();
}

}  // namespace chorus::test
