#include "support/deterministic_check.h"

#include "algorithms/algorithm.h"
#include "core/check.h"
#include "core/exact_sum.h"
#include "engine/communicator_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace chorus::test {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Layout {
  int mantissa;
  int exponent;
};
Layout layout_of(DataType type) {
  switch (type) {
    case DataType::float16:
      return {10, 5};
    case DataType::bfloat16:
      return {7, 8};
    case DataType::float32:
      return {23, 8};
    case DataType::float64:
      return {52, 11};
    default:
      fail(ErrorCode::internal, "wide_values: ", to_string(type), " is not a floating type");
  }
}

void put(std::byte* out, size_t i, size_t es, uint64_t bits) {
  std::memcpy(out + i * es, &bits, es);  // little-endian: the low bytes
}

}  // namespace

std::vector<std::byte> wide_values(DataType type, size_t count, uint64_t seed, int which,
                                   int contributions) {
  const Layout l = layout_of(type);
  const size_t es = dtype_size(type);
  const uint64_t sign = uint64_t{1} << (l.mantissa + l.exponent);
  const uint64_t max_field = (uint64_t{1} << l.exponent) - 2;  // the largest finite exponent
  const uint64_t mant_mask = (uint64_t{1} << l.mantissa) - 1;
  const uint64_t largest = max_field << l.mantissa | mant_mask;
  std::vector<std::byte> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = mix(seed * 0x100000001b3ull ^ i);  // the element's kind, every rank alike
    const uint64_t v = mix(h ^ static_cast<uint64_t>(which + 1) * 0xd6e8feb86659fd93ull);
    // A random finite value over the whole range, subnormals included.
    auto random_value = [&](uint64_t r) {
      const uint64_t field = (r >> 1) % (max_field + 1);
      return (r & 1 ? sign : 0) | field << l.mantissa | ((r >> 20) & mant_mask);
    };
    uint64_t bits = 0;
    switch (h % 100) {
      default:  // 0 .. 79: random over the range
        bits = random_value(v);
        break;
      case 80:
      case 81:
      case 82:
      case 83:
      case 84:  // +-0
        bits = v & 1 ? sign : 0;
        break;
      case 85:
      case 86:
      case 87:
      case 88:
      case 89: {  // pairs that cancel: contribution 2m + 1 is -(contribution 2m)
        const int base = which & ~1;
        bits = random_value(mix(h ^ static_cast<uint64_t>(base + 1) * 0xd6e8feb86659fd93ull));
        if (which % 2 == 1) bits ^= sign;
        if (which % 2 == 0 && which + 1 >= contributions) bits = 0;  // no partner
        break;
      }
      case 90:
      case 91: {  // the largest finite value, and the others of the opposite sign
        const bool negative = (h >> 40) & 1;
        if (which == 0)
          bits = largest | (negative ? sign : 0);
        else
          bits = (random_value(v) & ~sign) | (negative ? 0 : sign);
        break;
      }
      case 92:
      case 93:
      case 94:
      case 95:
      case 96:
      case 97:
      case 98:
      case 99: {  // a few binades around one exponent: exactly summable
        const uint64_t mid = max_field / 2 + (h >> 32) % 8;
        const uint64_t field = mid - (v >> 1) % 6;
        bits = (v & 1 ? sign : 0) | field << l.mantissa | ((v >> 20) & mant_mask);
        break;
      }
    }
    put(out.data(), i, es, bits);
  }
  return out;
}

std::string DeterministicCase::describe() const {
  return str_cat(to_string(collective), " ", to_string(type), " ", to_string(op), " count=", count,
                 " contributions=", contributions, " stride=", stride, " offset=", offset,
                 window ? " window buffers" : "");
}

std::vector<std::string> check_deterministic(Communicator& comm, const DeterministicCase& c) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t es = dtype_size(c.type);
  const bool rs = c.collective == Collective::reduce_scatter;
  const size_t total = rs ? c.count * static_cast<size_t>(n) : c.count;
  const int root = n - 1;
  // This rank's contribution, if it holds one.
  int mine = -1;
  for (int j = 0; j < c.contributions; ++j)
    if ((j * c.stride + c.offset) % n == r) mine = j;
  // Part j of a contribution (ReduceScatter: the part rank j receives):
  // its elements depend on their index alone, not on the length.
  auto part_values = [&](size_t j, size_t length, int which) {
    return wide_values(c.type, length, c.seed + 7919 * j, which, c.contributions);
  };
  const size_t parts = rs ? static_cast<size_t>(n) : 1;
  std::vector<std::byte> input(total * es);
  if (mine >= 0)
    for (size_t j = 0; j < parts; ++j) {
      const std::vector<std::byte> v = part_values(j, c.count, mine);
      std::memcpy(input.data() + j * c.count * es, v.data(), v.size());
    }
  // What every path must give: the contributions of a reference at least as
  // long summed on this rank; the call's result is its prefix.
  const size_t reference = std::max(c.count, c.reference_count);
  const size_t mine_part = rs ? static_cast<size_t>(r) : 0;
  std::vector<std::byte> all;
  for (int j = 0; j < c.contributions; ++j) {
    const std::vector<std::byte> v = part_values(mine_part, reference, j);
    all.insert(all.end(), v.begin(), v.end());
  }
  std::vector<std::byte> expect(reference * es);
  exact::sum_gathered(c.type, all.data(), reference, c.contributions,
                      c.op == ReduceOp::avg ? static_cast<uint32_t>(n) : 1, expect.data());
  const size_t out_count = c.count;
  const bool checks = c.collective != Collective::reduce || r == root;

  // The integer pass's algorithms: those that serve an int64 call of the
  // fixed forms' length.
  CollectiveSpec spec{c.collective, n, r, c.count * exact::lanes(c.type), 8, root};
  spec.windows = detail::impl_of(comm).transport().shares_memory();
  spec.host_of = detail::impl_of(comm).host_of();
  std::vector<std::string> names{""};
  for (const Algorithm* a : algorithms_for(c.collective))
    if (supported_everywhere(*a, spec)) names.emplace_back(a->name);

  std::optional<Window> in_window;
  std::optional<Window> out_window;
  if (c.window) {
    in_window = comm.window(input.size());
    out_window = comm.window(out_count * es);
  }
  std::vector<std::string> wrong;
  std::vector<std::byte> out_buffer(out_count * es);
  for (const std::string& name : names) {
    std::byte* in = in_window ? static_cast<std::byte*>(in_window->data()) : input.data();
    std::byte* out = out_window ? static_cast<std::byte*>(out_window->data()) : out_buffer.data();
    if (in_window) std::memcpy(in, input.data(), input.size());
    std::memset(out, 0x5a, out_count * es);
    CallOptions options;
    options.algorithm = name;
    options.deterministic = true;
    switch (c.collective) {
      case Collective::allreduce:
        comm.allreduce(in, out, c.count, c.type, c.op, options);
        break;
      case Collective::reduce_scatter:
        comm.reduce_scatter(in, out, c.count, c.type, c.op, options);
        break;
      case Collective::reduce:
        comm.reduce(in, out, c.count, c.type, c.op, root, options);
        break;
      default:
        fail(ErrorCode::internal, "check_deterministic: ", to_string(c.collective));
    }
    if (!checks) continue;
    const std::byte* want = expect.data();
    if (std::memcmp(out, want, out_count * es) == 0) continue;
    size_t i = 0;
    while (std::memcmp(out + i * es, want + i * es, es) == 0) ++i;
    uint64_t got_bits = 0;
    uint64_t want_bits = 0;
    std::memcpy(&got_bits, out + i * es, es);
    std::memcpy(&want_bits, want + i * es, es);
    wrong.push_back(str_cat("rank ", r, " of ", n, ": ", c.describe(), " algorithm '", name,
                            "': element ", i, rs ? " of its part" : "", " is 0x", std::hex,
                            got_bits, ", expected 0x", want_bits));
  }
  return wrong;
}

std::vector<std::string> check_deterministic_suite(Communicator& comm, bool windows) {
  const int n = comm.size();
  // A stride coprime to n: the contributions land on permuted ranks.
  int stride = std::max(1, n - 1);
  while (std::gcd(stride, n) != 1) --stride;
  std::vector<std::string> wrong;
  std::vector<size_t> counts{1, static_cast<size_t>(n) + 1, 10007};
  if (n > 2) counts.push_back(static_cast<size_t>(n) - 1);
  const std::vector<int> sets = n >= 3 ? std::vector<int>{1, 3} : std::vector<int>{1, n};
  uint64_t seed = 11;
  for (Collective coll : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce})
    for (DataType t : {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64})
      for (int k : sets) {
        ++seed;  // one data set per group: its counts are prefixes of each other
        for (size_t count : counts) {
          DeterministicCase c;
          c.collective = coll;
          c.type = t;
          c.count = count;
          c.reference_count = 10007;
          c.contributions = k;
          c.seed = seed;
          c.stride = stride;
          c.offset = n / 2;
          c.window = windows;
          c.op = t == DataType::float64 && k > 1 ? ReduceOp::avg : ReduceOp::sum;
          for (std::string& s : check_deterministic(comm, c)) wrong.push_back(std::move(s));
        }
      }
  return wrong;
}

}  // namespace chorus::test
