#include "perf/soak.h"

#include "algorithms/algorithm.h"
#include "core/check.h"
#include "engine/communicator_impl.h"
#include "perf/perf_check.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

namespace chorus::perf {
namespace {

// This rank's problems kept in full; later ones are only counted.
constexpr size_t kMaxProblems = 20;
// After each call, outstanding asynchronous calls are waited for once there
// are more than a draw of 0..kMaxOutstanding of them.
constexpr size_t kMaxOutstanding = 6;
// With a time limit, the ranks agree every this many calls whether to stop
// (one small allreduce, so that all of them stop after the same call).
constexpr size_t kTimeCheckEvery = 16;
// Buffers start 0..kMaxMisalign elements past a 16-byte boundary.
constexpr uint64_t kMaxMisalign = 7;

// SplitMix64 (Steele, Lea and Flood, 2014): a generator with a fixed
// definition, so that every rank and every build draws the same numbers.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n) for n > 0 (the modulo bias is below n / 2^64).
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool one_in(size_t n) { return below(n) == 0; }

 private:
  uint64_t state_;
};

// How often each kind is drawn, out of the sum: allreduce most, barrier least.
constexpr std::pair<SoakKind, size_t> kKindWeights[] = {
    {SoakKind::allreduce, 3}, {SoakKind::allgather, 2}, {SoakKind::reduce_scatter, 2},
    {SoakKind::broadcast, 2}, {SoakKind::reduce, 2},    {SoakKind::alltoall, 2},
    {SoakKind::barrier, 1},   {SoakKind::send_recv, 2}, {SoakKind::gather, 1},
    {SoakKind::scatter, 1},
};

// Counts that are not a multiple of anything: every chunking leaves a remainder.
constexpr size_t kPrimes[] = {2,   3,    5,    7,    13,    31,     61,     127,    251,
                              509, 1021, 4093, 8191, 65521, 131071, 524287, 1000003};

Collective collective_of(SoakKind k) {
  switch (k) {
    case SoakKind::allreduce:
      return Collective::allreduce;
    case SoakKind::allgather:
      return Collective::allgather;
    case SoakKind::reduce_scatter:
      return Collective::reduce_scatter;
    case SoakKind::broadcast:
      return Collective::broadcast;
    case SoakKind::reduce:
      return Collective::reduce;
    case SoakKind::alltoall:
      return Collective::alltoall;
    case SoakKind::gather:
      return Collective::gather;
    case SoakKind::scatter:
      return Collective::scatter;
    case SoakKind::barrier:
    case SoakKind::send_recv:
      break;
  }
  return Collective::barrier;
}

// What collective.h says of the kind's collective (send_recv and barrier:
// neither reduces nor has a root).
bool reduces(SoakKind k) {
  return chorus::reduces(collective_of(k));
}
bool rooted(SoakKind k) {
  return chorus::rooted(collective_of(k));
}
// The API counts these per rank block: a call's largest buffer is N blocks.
bool blocked(SoakKind k) {
  return per_rank_blocks(collective_of(k));
}

// A count in [0, max_count]: 0 and 1 a tenth of the time each, a count near
// N or 2N a tenth, a prime a fifth, else log-uniform (every power of two
// below max_count as likely as the next).
size_t pick_count(Random& rng, size_t max_count, int nranks) {
  if (max_count == 0) return 0;
  const auto n = static_cast<size_t>(nranks);
  size_t count = 0;
  switch (rng.below(10)) {
    case 0:
      count = 0;
      break;
    case 1:
      count = 1;
      break;
    case 2: {
      const size_t near[] = {n - 1, n, n + 1, 2 * n - 1, 2 * n + 1};
      count = near[rng.below(std::size(near))];
      break;
    }
    case 3:
    case 4: {
      const auto fit =
          static_cast<size_t>(std::upper_bound(std::begin(kPrimes), std::end(kPrimes), max_count) -
                              std::begin(kPrimes));
      count = fit == 0 ? 1 : kPrimes[rng.below(fit)];
      break;
    }
    default: {
      const auto bits = static_cast<size_t>(std::bit_width(max_count));
      const size_t low = size_t{1} << rng.below(bits);
      count = low + rng.below(low);
      break;
    }
  }
  return std::min(count, max_count);
}

// A quarter of the calls let chorus choose; the others name an algorithm
// that serves the call on every rank (the ones chorus itself would consider).
std::string pick_algorithm(Random& rng, const CollectiveSpec& spec) {
  if (rng.one_in(4)) return "";
  const std::vector<const Algorithm*> candidates = candidates_for(spec);
  if (candidates.empty()) return "";
  return std::string(candidates[rng.below(candidates.size())]->name);
}

// The data of message j from rank a is the broadcast input of a virtual root
// a + N j (among N (j + 1) virtual ranks): the receiver expects exactly that,
// and two messages between the same pair carry different values.
CheckCase message_case(const SoakMessage& m, size_t j, int nranks) {
  const int virtual_rank = m.from + nranks * static_cast<int>(j);
  return {Collective::broadcast, m.type,  ReduceOp::sum, nranks * static_cast<int>(j + 1),
          virtual_rank,          m.count, virtual_rank};
}

// A buffer `misalign` bytes past new[]'s alignment (RAII).
class Region {
 public:
  Region(size_t bytes, size_t misalign)
      : storage_(std::make_unique_for_overwrite<std::byte[]>(bytes + misalign)),
        data_(storage_.get() + misalign) {}
  std::byte* data() const { return data_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  std::byte* data_;
};

// One output (or a buffer that must stay as it was) to look at once its call
// has completed.
struct Check {
  const std::byte* data = nullptr;
  size_t count = 0;
  DataType type = DataType::uint8;
  std::string what;                // "output", "input", ...
  std::optional<CheckCase> exact;  // perf_check's expected values
  std::vector<std::byte> before;   // else: these bytes, unchanged
};

// A call that was issued: its buffers, checks and, when asynchronous, Works.
struct Issued {
  SoakCall call;
  std::vector<Region> regions;
  std::vector<Check> checks;
  std::vector<Work> works;
};

// An element's bytes as a hex number (little-endian, as chorus's hosts are).
std::string hex(const std::byte* p, size_t bytes) {
  std::string s = "0x";
  char digits[3];
  for (size_t b = bytes; b-- > 0;) {
    std::snprintf(digits, sizeof digits, "%02x", static_cast<unsigned>(p[b]));
    s += digits;
  }
  return s;
}

class Soaker {
 public:
  Soaker(Communicator& comm, const SoakOptions& options)
      : comm_(comm), o_(options), rank_(comm.rank()), n_(comm.size()) {
    report_.nranks = n_;
    report_.rank = rank_;
    report_.transport = std::string(detail::impl_of(comm).transport().name());
    report_.options = o_;
    corrupt_ = o_.corrupt_one && rank_ == n_ - 1;
  }

  SoakReport run(const SoakHooks& hooks) {
    if (rank_ == 0 && hooks.start) hooks.start(report_);
    const auto start = std::chrono::steady_clock::now();
    const size_t segment = detail::impl_of(comm_).config().segment_bytes;
    try {
      for (size_t k = 0; k < o_.calls; ++k) {
        if (o_.time_limit.count() > 0 && k > 0 && k % kTimeCheckEvery == 0 && time_up(start)) {
          report_.time_limit_hit = true;
          break;
        }
        Issued issued;
        issued.call = soak_call(o_.seed, o_.first + k, n_, o_.max_bytes, segment);
        count_call(issued.call);
        const size_t max_outstanding = issued.call.max_outstanding;
        const uint64_t wait_order = issued.call.wait_order;
        stage_ = &issued.call;
        issue(issued);
        if (issued.works.empty())
          evaluate(issued);
        else
          pending_.push_back(std::move(issued));
        stage_ = nullptr;
        if (pending_.size() > max_outstanding) drain(wait_order);
        if (rank_ == 0 && hooks.progress) hooks.progress(k + 1, o_.calls);
      }
      drain(o_.seed);
      // Every rank's wrong elements per call, summed: then every rank knows
      // which calls were wrong anywhere.
      if (!wrong_.empty())
        comm_.allreduce(wrong_.data(), wrong_.data(), wrong_.size(), DataType::uint64,
                        ReduceOp::sum);
      report_.all_ranks = true;
    } catch (const std::exception& e) {
      record_failure(e.what());
    }
    for (size_t k = 0; k < wrong_.size(); ++k) {
      SoakTally& t = report_.kinds[static_cast<size_t>(kinds_[k])];
      t.wrong_elements += wrong_[k];
      t.wrong_calls += wrong_[k] > 0 ? 1 : 0;
    }
    report_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(report_);
  }

 private:
  // Whether the time limit has passed on any rank (collective).
  bool time_up(std::chrono::steady_clock::time_point start) {
    uint32_t up = std::chrono::steady_clock::now() - start >= o_.time_limit ? 1 : 0;
    comm_.allreduce(&up, &up, 1, DataType::uint32, ReduceOp::max);
    return up != 0;
  }

  void count_call(const SoakCall& call) {
    SoakTally& t = report_.kinds[static_cast<size_t>(call.kind)];
    ++t.calls;
    t.in_place += call.in_place ? 1 : 0;
    t.async += call.async ? 1 : 0;
    t.named_algorithm += call.algorithm.empty() ? 0 : 1;
    ++report_.calls;
    wrong_.push_back(0);
    kinds_.push_back(call.kind);
  }

  void record_failure(const std::string& what) {
    if (stage_ != nullptr) {
      ++report_.kinds[static_cast<size_t>(stage_->kind)].failures;
      problem(str_cat("rank ", rank_, ": ", describe(*stage_), ": FAILED: ", what));
    } else {
      ++report_.failures_outside_calls;
      problem(str_cat("rank ", rank_, ": after call ", o_.first + report_.calls,
                      " (the soak's own allreduce): FAILED: ", what));
    }
  }

  void problem(std::string line) {
    if (report_.problems.size() < kMaxProblems) report_.problems.push_back(std::move(line));
  }

  std::byte* region(Issued& is, size_t bytes, size_t elem_size) {
    return is.regions.emplace_back(bytes, elem_size * misalign_.below(kMaxMisalign + 1)).data();
  }
  static void expect_exact(Issued& is, const std::byte* data, size_t count, const CheckCase& c,
                           std::string what) {
    is.checks.push_back({data, count, c.type, std::move(what), c, {}});
  }
  static void expect_unchanged(Issued& is, const std::byte* data, size_t count, DataType type,
                               std::string what) {
    is.checks.push_back({data, count, type, std::move(what), std::nullopt,
                         std::vector<std::byte>(data, data + count * dtype_size(type))});
  }

  void issue(Issued& is) {
    const SoakCall& call = is.call;
    misalign_ = Random(call.rank_salt + static_cast<uint64_t>(rank_));
    if (call.kind == SoakKind::send_recv)
      issue_messages(is);
    else
      issue_collective(is);
  }

  void issue_collective(Issued& is) {
    const SoakCall& call = is.call;
    CallOptions opts;
    opts.algorithm = call.algorithm;
    const Collective coll = collective_of(call.kind);
    Call api{Call::Kind::collective,
             coll,
             nullptr,
             nullptr,
             call.count,
             call.type,
             call.op,
             call.root,
             -1,
             opts};
    if (call.kind == SoakKind::barrier) {
      issue(is, api);
      return;
    }
    const size_t es = dtype_size(call.type);
    const CheckCase cc{coll, call.type, call.op, n_, rank_, call.count, call.root};
    const BufferCounts bc = buffer_counts({coll, n_, rank_, call.count, es, call.root});
    const bool gets_output = uses_output(coll, rank_, call.root);
    const void* send = nullptr;
    void* recv = nullptr;
    if (!call.in_place) {
      std::byte* in = region(is, bc.input * es, es);
      std::byte* out = region(is, bc.output * es, es);
      fill_input(cc, in);
      poison(call.type, out, bc.output);
      expect_unchanged(is, in, bc.input, call.type, "input");
      if (gets_output)
        expect_exact(is, out, bc.output, cc, "output");
      else
        expect_unchanged(is, out, bc.output, call.type, "output (a non-root's, never written)");
      send = in;
      recv = out;
    } else {
      const size_t block = call.count * es;
      const size_t mine = static_cast<size_t>(rank_) * block;
      // The in-place form as collective.h says (on every rank: off the
      // root of gather and scatter the unused buffer is there all the same).
      switch (traits(coll).in_place) {
        case InPlace::send_in_recv: {  // allgather, gather
          std::byte* buf = region(is, bc.output * es, es);
          poison(call.type, buf, bc.output);
          fill_input(cc, buf + mine);
          if (gets_output)
            expect_exact(is, buf, bc.output, cc, "output");
          else
            expect_unchanged(is, buf + mine, call.count, call.type, "input (a non-root's)");
          send = buf + mine;
          recv = buf;
          break;
        }
        case InPlace::recv_in_send: {  // reduce_scatter, scatter
          std::byte* buf = region(is, bc.input * es, es);
          fill_input(cc, buf);
          expect_exact(is, buf + mine, call.count, cc, "output");
          expect_unchanged(is, buf, static_cast<size_t>(rank_) * call.count, call.type,
                           "input blocks before this rank's");
          expect_unchanged(is, buf + mine + block, static_cast<size_t>(n_ - rank_ - 1) * call.count,
                           call.type, "input blocks after this rank's");
          send = buf;
          recv = buf + mine;
          break;
        }
        case InPlace::same:
        case InPlace::none: {  // alltoall is never drawn in place
          std::byte* buf = region(is, call.count * es, es);
          fill_input(cc, buf);
          if (gets_output)
            expect_exact(is, buf, call.count, cc, "output");
          else
            expect_unchanged(is, buf, call.count, call.type,
                             "buffer (a non-root's, never written)");
          send = buf;
          recv = buf;
          break;
        }
      }
    }
    api.send = send;
    api.recv = recv;
    issue(is, api);
  }

  // Submits one call: left outstanding when the soak drew it asynchronous.
  void issue(Issued& is, const Call& api) {
    if (is.call.async)
      is.works.push_back(comm_.submit(api));
    else
      comm_.submit(api).wait();
  }

  // This rank's sends and receives of the batch, in batch order: with
  // blocking calls the lowest unfinished message always has both its ranks
  // at it, so the batch cannot deadlock.
  void issue_messages(Issued& is) {
    const SoakCall& call = is.call;
    for (size_t j = 0; j < call.messages.size(); ++j) {
      const SoakMessage& m = call.messages[j];
      if (m.from != rank_ && m.to != rank_) continue;
      const CheckCase mc = message_case(m, j, n_);
      const size_t es = dtype_size(m.type);
      std::byte* buf = region(is, m.count * es, es);
      if (m.from == rank_) {
        fill_input(mc, buf);
        expect_unchanged(is, buf, m.count, m.type, str_cat("send buffer of message ", j));
        issue(is, Call::send_to(buf, m.count, m.type, m.to));
      } else {
        poison(m.type, buf, m.count);
        expect_exact(is, buf, m.count, mc, str_cat("message ", j));
        issue(is, Call::recv_from(buf, m.count, m.type, m.from));
      }
    }
  }

  // Waits for every outstanding call, in an order drawn from `order`, and
  // checks each as it completes.
  void drain(uint64_t order) {
    Random rng(order);
    for (size_t i = pending_.size(); i > 1; --i) std::swap(pending_[i - 1], pending_[rng.below(i)]);
    while (!pending_.empty()) {
      Issued& is = pending_.back();
      stage_ = &is.call;
      for (Work& w : is.works) w.wait();
      evaluate(is);
      stage_ = nullptr;
      pending_.pop_back();
    }
  }

  void evaluate(Issued& is) {
    uint64_t& wrong = wrong_[is.call.index - o_.first];
    for (Check& c : is.checks) {
      const size_t es = dtype_size(c.type);
      size_t bad = 0;
      size_t first = 0;
      std::vector<std::byte> want;
      if (c.exact) {
        if (corrupt_ && c.count > 0) {
          const_cast<std::byte*>(c.data)[0] ^= std::byte{0xFF};
          corrupt_ = false;
        }
        bad = count_wrong(*c.exact, c.data);
        if (bad > 0) want = expected_output(*c.exact);
      } else {
        want = std::move(c.before);
        for (size_t i = 0; i < c.count; ++i)
          bad += std::memcmp(c.data + i * es, want.data() + i * es, es) != 0 ? 1 : 0;
      }
      if (bad == 0) continue;
      while (first < c.count && std::memcmp(c.data + first * es, want.data() + first * es, es) == 0)
        ++first;
      wrong += bad;
      problem(str_cat("rank ", rank_, ": ", describe(is.call), ": ", bad, " of ", c.count,
                      " elements of the ", c.what, " wrong; first at element ", first, ": got ",
                      hex(c.data + first * es, es), ", want ", hex(want.data() + first * es, es)));
    }
  }

  Communicator& comm_;
  const SoakOptions o_;
  const int rank_;
  const int n_;
  SoakReport report_;
  std::vector<uint64_t> wrong_;      // wrong elements per call made
  std::vector<SoakKind> kinds_;      // the kind of each call made
  std::vector<Issued> pending_;      // asynchronous calls not yet waited for
  const SoakCall* stage_ = nullptr;  // the call a failure now belongs to
  Random misalign_{0};
  bool corrupt_ = false;
};

}  // namespace

std::string_view to_string(SoakKind kind) {
  switch (kind) {
    case SoakKind::send_recv:
      return "send_recv";
    case SoakKind::barrier:
      return "barrier";
    default:
      return chorus::to_string(collective_of(kind));
  }
}

void SoakTally::add(const SoakTally& o) {
  calls += o.calls;
  in_place += o.in_place;
  async += o.async;
  named_algorithm += o.named_algorithm;
  wrong_calls += o.wrong_calls;
  wrong_elements += o.wrong_elements;
  failures += o.failures;
}

SoakTally SoakReport::total() const {
  SoakTally t;
  for (const SoakTally& k : kinds) t.add(k);
  t.failures += failures_outside_calls;
  return t;
}

SoakCall soak_call(uint64_t seed, size_t index, int nranks, size_t max_bytes,
                   size_t segment_bytes) {
  // Call i's draws depend on (seed, i) only.
  Random rng(Random(seed).next() ^ Random(~static_cast<uint64_t>(index)).next());
  const auto n = static_cast<size_t>(nranks);
  SoakCall c;
  c.index = index;
  size_t weight_sum = 0;
  for (auto [kind, w] : kKindWeights)
    if (nranks > 1 || kind != SoakKind::send_recv) weight_sum += w;
  size_t draw = rng.below(weight_sum);
  for (auto [kind, w] : kKindWeights) {
    if (nranks == 1 && kind == SoakKind::send_recv) continue;  // no peer to talk to
    if (draw < w) {
      c.kind = kind;
      break;
    }
    draw -= w;
  }
  c.type = static_cast<DataType>(rng.below(kDataTypeCount));
  c.op = static_cast<ReduceOp>(rng.below(kReduceOpCount));
  if (!reduces(c.kind) || !applies(c.op, c.type)) c.op = ReduceOp::sum;
  c.root = rooted(c.kind) ? static_cast<int>(rng.below(n)) : 0;
  c.max_outstanding = rng.below(kMaxOutstanding + 1);
  c.wait_order = rng.next();
  c.rank_salt = rng.next();
  if (c.kind == SoakKind::send_recv) {
    c.async = rng.one_in(2);
    const size_t messages = 1 + rng.below(2 * n);
    for (size_t j = 0; j < messages; ++j) {
      SoakMessage m;
      m.from = static_cast<int>(rng.below(n));
      m.to = static_cast<int>((static_cast<size_t>(m.from) + 1 + rng.below(n - 1)) % n);
      m.type = static_cast<DataType>(rng.below(kDataTypeCount));
      m.count = pick_count(rng, max_bytes / dtype_size(m.type), nranks);
      c.messages.push_back(m);
    }
    return c;
  }
  const Collective coll = collective_of(c.kind);
  size_t es = 1;  // a barrier's, as the communicator plans it
  if (c.kind != SoakKind::barrier) {
    es = dtype_size(c.type);
    c.count = pick_count(rng, max_bytes / (es * (blocked(c.kind) ? n : 1)), nranks);
    c.in_place = traits(coll).in_place != InPlace::none && rng.one_in(2);
  }
  c.async = rng.one_in(3);
  const CollectiveSpec spec{
      coll, nranks, 0, c.count, es, c.root, segment_bytes, c.op == ReduceOp::avg};
  c.algorithm = pick_algorithm(rng, spec);
  return c;
}

std::string describe(const SoakCall& c) {
  std::string s = str_cat("call ", c.index, ": ", to_string(c.kind));
  if (c.kind == SoakKind::send_recv) {
    s += c.async ? " async:" : " blocking:";
    for (size_t j = 0; j < c.messages.size(); ++j) {
      const SoakMessage& m = c.messages[j];
      s += str_cat(j == 0 ? " " : ", ", m.from, "->", m.to, " count=", m.count, " ",
                   chorus::to_string(m.type));
    }
    return s;
  }
  if (c.kind != SoakKind::barrier) {
    s += str_cat(" count=", c.count, " ", chorus::to_string(c.type));
    if (reduces(c.kind)) s += str_cat(" ", chorus::to_string(c.op));
    if (rooted(c.kind)) s += str_cat(" root=", c.root);
  }
  s += str_cat(" algo=", c.algorithm.empty() ? "auto" : c.algorithm);
  if (c.kind != SoakKind::barrier) s += c.in_place ? " in-place" : " out-of-place";
  if (c.async) s += " async";
  return s;
}

SoakReport run_soak(Communicator& comm, const SoakOptions& options, const SoakHooks& hooks) {
  return Soaker(comm, options).run(hooks);
}

}  // namespace chorus::perf
