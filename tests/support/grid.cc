#include "support/grid.h"

#include "core/check.h"
#include "core/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace chorus::test {

namespace {

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

// Largest value for sums so that N <= 16 ranks of it stay exact: bfloat16 holds
// integers exactly up to 256, float16 up to 2048.
double sum_modulus(DataType t) { return t == DataType::bfloat16 ? 8 : 61; }

double reduce_values(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
  }
  return 0;
}

template <typename T>
void put_int(void* dst, size_t i, double v) {
  // Through int64 then the modular conversion: integer sums wrap as in chorus.
  static_cast<T*>(dst)[i] = static_cast<T>(static_cast<int64_t>(v));
}

void put(DataType t, void* dst, size_t i, double v) {
  switch (t) {
    case DataType::int8: return put_int<int8_t>(dst, i, v);
    case DataType::uint8: return put_int<uint8_t>(dst, i, v);
    case DataType::int32: return put_int<int32_t>(dst, i, v);
    case DataType::uint32: return put_int<uint32_t>(dst, i, v);
    case DataType::int64: return put_int<int64_t>(dst, i, v);
    case DataType::uint64: return put_int<uint64_t>(dst, i, v);
    case DataType::float16:
      static_cast<uint16_t*>(dst)[i] = float_to_half(static_cast<float>(v));
      return;
    case DataType::bfloat16:
      static_cast<uint16_t*>(dst)[i] = float_to_bfloat16(static_cast<float>(v));
      return;
    case DataType::float32: static_cast<float*>(dst)[i] = static_cast<float>(v); return;
    case DataType::float64: static_cast<double*>(dst)[i] = v; return;
  }
}

// avg of an exact integer sum, rounded as chorus does: integers truncate; the
// float types divide in float32 (float64 in double), then round to the type.
void put_avg(DataType t, void* dst, size_t i, double sum, int n) {
  const auto wrapped = [&](auto type_tag) {
    using T = decltype(type_tag);
    // The sum wraps in T first (as chorus sums in T), then divides in 64 bits.
    const T s = static_cast<T>(static_cast<int64_t>(sum));
    if constexpr (std::is_signed_v<T>)
      static_cast<T*>(dst)[i] = static_cast<T>(static_cast<int64_t>(s) / n);
    else
      static_cast<T*>(dst)[i] = static_cast<T>(static_cast<uint64_t>(s) / static_cast<uint64_t>(n));
  };
  switch (t) {
    case DataType::int8: return wrapped(int8_t{});
    case DataType::uint8: return wrapped(uint8_t{});
    case DataType::int32: return wrapped(int32_t{});
    case DataType::uint32: return wrapped(uint32_t{});
    case DataType::int64: return wrapped(int64_t{});
    case DataType::uint64: return wrapped(uint64_t{});
    case DataType::float16:
      static_cast<uint16_t*>(dst)[i] = float_to_half(static_cast<float>(sum) / static_cast<float>(n));
      return;
    case DataType::bfloat16:
      static_cast<uint16_t*>(dst)[i] =
          float_to_bfloat16(static_cast<float>(sum) / static_cast<float>(n));
      return;
    case DataType::float32:
      static_cast<float*>(dst)[i] = static_cast<float>(sum) / static_cast<float>(n);
      return;
    case DataType::float64: static_cast<double*>(dst)[i] = sum / n; return;
  }
}

}  // namespace

double input_value(Collective c, DataType t, ReduceOp op, int rank, size_t i) {
  const auto r = static_cast<size_t>(rank);
  if (reduces(c)) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        // Integer modulo: the same values as fmod on these small integers, at a
        // fraction of the cost (the reference runs over 10^6-element calls).
        return static_cast<double>((r * 3 + i * 7 + 1) % static_cast<size_t>(sum_modulus(t)));
      case ReduceOp::prod: return (r + i) % 4 == 0 ? 2 : 1;
      case ReduceOp::min:
      case ReduceOp::max: break;
    }
  }
  // Distinct-looking values per (rank, element); exact in every type (< 256 for
  // bfloat16, < 128 for int8).
  return static_cast<double>((r * 37 + i * 11 + 5) % 101);
}

void store(DataType t, const std::vector<double>& values, void* dst) {
  for (size_t i = 0; i < values.size(); ++i) put(t, dst, i, values[i]);
}

std::vector<std::byte> encode(DataType t, const std::vector<double>& values) {
  std::vector<std::byte> out(values.size() * dtype_size(t));
  store(t, values, out.data());
  return out;
}

std::vector<std::byte> make_input(Collective c, DataType t, ReduceOp op, int nranks, int rank,
                                  size_t count) {
  CollectiveSpec spec{c, nranks, rank, count, dtype_size(t), 0};
  const size_t n = buffer_counts(spec).input;
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input_value(c, t, op, rank, i);
  return encode(t, v);
}

std::vector<std::byte> expected_output(Collective c, DataType t, ReduceOp op, int nranks,
                                       int rank, size_t count, int root) {
  const size_t es = dtype_size(t);
  const auto n = static_cast<size_t>(nranks);
  std::vector<std::byte> out;
  auto reduced = [&](size_t i) {
    double acc = input_value(c, t, op, 0, i);
    for (int j = 1; j < nranks; ++j) acc = reduce_values(op, acc, input_value(c, t, op, j, i));
    return acc;
  };
  auto put_reduced = [&](size_t out_index, size_t in_index) {
    const double v = reduced(in_index);
    if (op == ReduceOp::avg)
      put_avg(t, out.data(), out_index, v, nranks);
    else
      put(t, out.data(), out_index, v);
  };
  switch (c) {
    case Collective::allreduce:
      out.resize(count * es);
      for (size_t i = 0; i < count; ++i) put_reduced(i, i);
      break;
    case Collective::reduce:
      if (rank != root) return {};
      out.resize(count * es);
      for (size_t i = 0; i < count; ++i) put_reduced(i, i);
      break;
    case Collective::reduce_scatter:
      out.resize(count * es);
      for (size_t i = 0; i < count; ++i) put_reduced(i, static_cast<size_t>(rank) * count + i);
      break;
    case Collective::allgather:
      out.resize(count * n * es);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i)
          put(t, out.data(), j * count + i, input_value(c, t, op, static_cast<int>(j), i));
      break;
    case Collective::broadcast:
      out.resize(count * es);
      for (size_t i = 0; i < count; ++i) put(t, out.data(), i, input_value(c, t, op, root, i));
      break;
    case Collective::alltoall:
      // Block j of rank r's output is block r of rank j's input.
      out.resize(count * n * es);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i)
          put(t, out.data(), j * count + i,
              input_value(c, t, op, static_cast<int>(j), static_cast<size_t>(rank) * count + i));
      break;
    case Collective::barrier: break;
  }
  return out;
}

std::string GridCase::describe() const {
  return str_cat(to_string(collective), " count=", count, " ", to_string(type), " ", to_string(op),
                 " root=", root, in_place ? " in-place" : " out-of-place");
}

std::shared_ptr<const std::vector<std::byte>> ReferenceCache::get(Collective c, DataType t,
                                                                  ReduceOp op, int nranks,
                                                                  int rank, size_t count,
                                                                  int root) {
  // Only these collectives expect different bytes on different ranks.
  const bool per_rank = c == Collective::reduce_scatter || c == Collective::alltoall ||
                        c == Collective::reduce;
  const Key key{static_cast<int>(c), static_cast<int>(t), static_cast<int>(op), nranks,
                per_rank ? rank : -1, count, root};
  std::lock_guard lock(mu_);
  auto& slot = entries_[key];
  if (!slot)
    slot = std::make_shared<const std::vector<std::byte>>(
        expected_output(c, t, op, nranks, rank, count, root));
  return slot;
}

std::string run_case(Communicator& comm, const GridCase& c, const std::string& algorithm,
                     ReferenceCache* cache) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t es = dtype_size(c.type);
  const auto nn = static_cast<size_t>(n);
  CallOptions opts;
  opts.algorithm = algorithm;
  std::vector<std::byte> input = make_input(c.collective, c.type, c.op, n, r, c.count);
  std::shared_ptr<const std::vector<std::byte>> expect_ptr =
      cache ? cache->get(c.collective, c.type, c.op, n, r, c.count, c.root)
            : std::make_shared<const std::vector<std::byte>>(
                  expected_output(c.collective, c.type, c.op, n, r, c.count, c.root));
  const std::vector<std::byte>& expect = *expect_ptr;
  // Output buffers start as a poison pattern so that an unwritten element shows.
  constexpr std::byte kPoison{0xA5};
  std::vector<std::byte> result;
  switch (c.collective) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce: {
      std::vector<std::byte> out(c.count * es, kPoison);
      if (c.in_place) out = input;
      const void* send = c.in_place ? out.data() : input.data();
      if (c.collective == Collective::allreduce)
        comm.allreduce(send, out.data(), c.count, c.type, c.op, opts);
      else if (c.collective == Collective::broadcast)
        comm.broadcast(send, out.data(), c.count, c.type, c.root, opts);
      else
        comm.reduce(send, out.data(), c.count, c.type, c.op, c.root, opts);
      if (c.collective == Collective::reduce && r != c.root) return "";
      result = std::move(out);
      break;
    }
    case Collective::allgather: {
      std::vector<std::byte> out(c.count * nn * es, kPoison);
      const void* send = input.data();
      if (c.in_place) {
        std::copy(input.begin(), input.end(), out.begin() + static_cast<long>(static_cast<size_t>(r) * c.count * es));
        send = out.data() + static_cast<size_t>(r) * c.count * es;
      }
      comm.allgather(send, out.data(), c.count, c.type, opts);
      result = std::move(out);
      break;
    }
    case Collective::reduce_scatter: {
      if (c.in_place) {
        std::vector<std::byte> buf = input;
        std::byte* recv = buf.data() + static_cast<size_t>(r) * c.count * es;
        comm.reduce_scatter(buf.data(), recv, c.count, c.type, c.op, opts);
        result.assign(recv, recv + c.count * es);
      } else {
        std::vector<std::byte> out(c.count * es, kPoison);
        comm.reduce_scatter(input.data(), out.data(), c.count, c.type, c.op, opts);
        result = std::move(out);
      }
      break;
    }
    case Collective::alltoall: {
      std::vector<std::byte> out(c.count * nn * es, kPoison);
      if (c.in_place) {
        // AllToAll has no in-place form: an aliased call must be refused
        // before any byte moves (a count of 0 moves nothing and is accepted).
        std::vector<std::byte> buf = input;
        try {
          comm.alltoall(buf.data(), buf.data(), c.count, c.type, opts);
        } catch (const Error& e) {
          if (e.code() == ErrorCode::invalid_argument && c.count > 0 && buf == input) return "";
          return str_cat("rank ", r, " ", c.describe(), ": unexpected error: ", e.what());
        }
        if (c.count == 0) return "";
        return str_cat("rank ", r, " ", c.describe(), ": aliased alltoall was accepted");
      }
      comm.alltoall(input.data(), out.data(), c.count, c.type, opts);
      result = std::move(out);
      break;
    }
    default: fail(ErrorCode::internal, "grid: unsupported collective ", to_string(c.collective));
  }
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
  if (c == Collective::broadcast || c == Collective::reduce) {
    if (nranks > 1) roots.push_back(nranks - 1);
    if (nranks > 2) roots.push_back(nranks / 2);
  }
  for (size_t count : counts)
    for (int t = 0; t < kDataTypeCount; ++t)
      for (int o = 0; o < (reducing ? kReduceOpCount : 1); ++o)
        for (int root : roots)
          for (bool in_place : {false, true})
            out.push_back({c, count, static_cast<DataType>(t), static_cast<ReduceOp>(o), root,
                           in_place});
  if (include_large) {
    constexpr size_t kLarge = 1000003;  // prime: never divides evenly
    const std::pair<DataType, ReduceOp> slice[] = {{DataType::float32, ReduceOp::sum},
                                                   {DataType::int64, ReduceOp::max},
                                                   {DataType::bfloat16, ReduceOp::avg}};
    // allgather and reduce_scatter count per rank block: keep the whole
    // vector near kLarge elements so that the grid stays quick at N = 16.
    const bool blocked = c == Collective::allgather || c == Collective::reduce_scatter ||
                         c == Collective::alltoall;
    const size_t large = blocked ? std::max<size_t>(1, kLarge / n) : kLarge;
    for (auto [t, o] : slice)
      for (bool in_place : {false, true})
        out.push_back({c, large, t, reducing ? o : ReduceOp::sum, roots.back(), in_place});
  }
  return out;
}

std::vector<std::string> run_grid(Communicator& comm, const std::vector<GridCase>& cases,
                                  const std::string& algorithm, ReferenceCache* cache) {
  std::vector<std::string> errors;
  for (const GridCase& c : cases)
    for (int rep = 0; rep < 2; ++rep) {
      std::string e = run_case(comm, c, algorithm, cache);
      if (!e.empty() && errors.size() < 8) errors.push_back(e + str_cat(" (call ", rep + 1, ")"));
    }
  return errors;
}

}  // namespace chorus::test
