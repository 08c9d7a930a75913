#include "support/mismatch.h"

#include <chorus/error.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <sstream>

namespace chorus::testing {
namespace {

// Every rank's contribution: small integers, exact in every dtype used here.
int64_t input_value(int rank, size_t i) {
  return (rank + 1) * 3 + static_cast<int64_t>(i % 11);
}

template <typename T>
std::vector<T> input_of(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(input_value(rank, i));
  return v;
}

// One call of one rank, with the check of its result should it return.
struct Call {
  std::function<void()> run;
  std::function<std::string()> check;  // "" when the output is what was asked
};

template <typename T>
std::string compare(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": wrong output size";
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      std::ostringstream o;
      o << what << ": element " << i << " is " << +got[i] << ", expected " << +want[i];
      return o.str();
    }
  return {};
}

// AllReduce of `count` elements of T with `op` (sum or max) and `algorithm`.
template <typename T>
Call allreduce_call(Communicator& comm, DataType type, ReduceOp op, size_t count,
                    const std::string& algorithm, const CallOptions& base) {
  auto in = std::make_shared<std::vector<T>>(input_of<T>(comm.rank(), count));
  auto out = std::make_shared<std::vector<T>>(count);
  CallOptions o = base;
  o.algorithm = algorithm;
  const int n = comm.size();
  return {[&comm, in, out, type, op, o] {
            comm.allreduce(in->data(), out->data(), in->size(), type, op, o);
          },
          [in, out, op, n] {
            std::vector<T> want(in->size());
            for (size_t i = 0; i < want.size(); ++i) {
              T acc = static_cast<T>(input_value(0, i));
              for (int r = 1; r < n; ++r) {
                const T v = static_cast<T>(input_value(r, i));
                acc = op == ReduceOp::max ? (v > acc ? v : acc) : static_cast<T>(acc + v);
              }
              want[i] = acc;
            }
            return compare(*out, want, "allreduce");
          }};
}

Call allgather_call(Communicator& comm, size_t count, const CallOptions& o) {
  auto in = std::make_shared<std::vector<float>>(input_of<float>(comm.rank(), count));
  auto out = std::make_shared<std::vector<float>>(count * static_cast<size_t>(comm.size()));
  const int n = comm.size();
  return {[&comm, in, out, o] {
            comm.allgather(in->data(), out->data(), in->size(), DataType::float32, o);
          },
          [in, out, n] {
            std::vector<float> want;
            for (int r = 0; r < n; ++r) {
              const auto part = input_of<float>(r, in->size());
              want.insert(want.end(), part.begin(), part.end());
            }
            return compare(*out, want, "allgather");
          }};
}

Call broadcast_call(Communicator& comm, int root, size_t count, const CallOptions& o) {
  auto in = std::make_shared<std::vector<int32_t>>(input_of<int32_t>(comm.rank(), count));
  auto out = std::make_shared<std::vector<int32_t>>(count);
  return {
      [&comm, in, out, root, o] {
        comm.broadcast(in->data(), out->data(), in->size(), DataType::int32, root, o);
      },
      [in, out, root] { return compare(*out, input_of<int32_t>(root, in->size()), "broadcast"); }};
}

// Rank 0 sends `count` elements of `type` with `tag` to `to`; `to` receives
// with its own count, dtype and tag.
Call send_call(Communicator& comm, int to, size_t count, int tag, const CallOptions& base) {
  auto in = std::make_shared<std::vector<int32_t>>(input_of<int32_t>(comm.rank(), count));
  CallOptions o = base;
  o.tag = tag;
  return {[&comm, in, to, o] { comm.send(in->data(), in->size(), DataType::int32, to, o); },
          [] { return std::string(); }};
}
Call recv_call(Communicator& comm, int from, DataType type, size_t count, int tag,
               const CallOptions& base) {
  // int32 and float32 are both 4 bytes: the buffer fits either.
  auto out = std::make_shared<std::vector<int32_t>>(count);
  CallOptions o = base;
  o.tag = tag;
  return {[&comm, out, from, type, o] { comm.recv(out->data(), out->size(), type, from, o); },
          [out, from] { return compare(*out, input_of<int32_t>(from, out->size()), "recv"); }};
}

Call nothing() {
  return {[] {}, [] { return std::string(); }};
}

// The first call of this rank in scenario `kind`.
Call first_call(Communicator& comm, std::string_view kind, const CallOptions& o) {
  const int odd = comm.size() - 1;
  const bool is_odd = comm.rank() == odd;
  constexpr size_t kLarge = size_t{1} << 20;  // AllReduce of 4 MiB: the segmented trees
  constexpr size_t kCount = 4096;
  if (kind == "count_large" || kind == "count_small") {
    const size_t count = !is_odd ? kLarge : kind == "count_large" ? 2 * kLarge : kLarge / 2;
    return allreduce_call<float>(comm, DataType::float32, ReduceOp::sum, count, "", o);
  }
  if (kind == "collective") {
    if (is_odd) return allgather_call(comm, kCount, o);
    return allreduce_call<float>(comm, DataType::float32, ReduceOp::sum, kCount, "", o);
  }
  if (kind == "dtype") {
    if (is_odd) return allreduce_call<float>(comm, DataType::float32, ReduceOp::sum, kCount, "", o);
    return allreduce_call<int32_t>(comm, DataType::int32, ReduceOp::sum, kCount, "", o);
  }
  if (kind == "op")
    return allreduce_call<int32_t>(comm, DataType::int32, is_odd ? ReduceOp::max : ReduceOp::sum,
                                   kCount, "", o);
  if (kind == "root") return broadcast_call(comm, is_odd ? 1 : 0, 1000, o);
  if (kind == "algorithm")
    return allreduce_call<int32_t>(comm, DataType::int32, ReduceOp::sum, kCount,
                                   is_odd ? "halving_doubling" : "ring", o);
  // Point to point: rank 0 sends to the odd rank, which expects another
  // count, tag or dtype; the ranks between them make no first call.
  if (kind == "p2p_count" || kind == "p2p_tag" || kind == "p2p_dtype") {
    if (comm.rank() == 0) return send_call(comm, odd, 100, 1, o);
    if (!is_odd) return nothing();
    const size_t count = kind == "p2p_count" ? 200 : 100;
    const int tag = kind == "p2p_tag" ? 2 : 1;
    const DataType type = kind == "p2p_dtype" ? DataType::float32 : DataType::int32;
    return recv_call(comm, 0, type, count, tag, o);
  }
  throw Error(ErrorCode::invalid_argument, "unknown mismatch kind " + std::string(kind));
}

}  // namespace

const std::vector<std::string>& mismatch_kinds() {
  static const std::vector<std::string> kinds{
      "count_large", "count_small", "collective", "dtype",   "op",
      "root",        "algorithm",   "p2p_count",  "p2p_tag", "p2p_dtype"};
  return kinds;
}

MismatchOutcome run_mismatch_case(Communicator& comm, std::string_view kind) {
  const std::string odd = "rank " + std::to_string(comm.size() - 1) + " ";
  CallOptions o;
  o.timeout = std::chrono::seconds(30);  // a missed mismatch fails as a timeout, not a hang
  std::string problems;
  const auto start = std::chrono::steady_clock::now();
  double seconds_to_error = -1;
  auto expect_mismatch = [&](const Error& e, const char* call) {
    if (seconds_to_error < 0)
      seconds_to_error =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string msg = e.what();
    if (e.code() != ErrorCode::mismatch)
      problems += std::string(call) + " raised " + std::string(to_string(e.code())) +
                  " instead of mismatch: " + msg + "\n";
    else if (msg.find("mismatched calls: ") == std::string::npos ||
             msg.find(odd) == std::string::npos)
      problems += std::string(call) + "'s error does not name both sides: " + msg + "\n";
  };
  Call first = first_call(comm, kind, o);
  try {
    first.run();
    // Returned: allowed only with exactly the data this rank asked for.
    const std::string wrong = first.check();
    if (!wrong.empty()) problems += "the mismatched call returned wrong data: " + wrong + "\n";
  } catch (const Error& e) {
    expect_mismatch(e, "the mismatched call");
  }
  std::vector<int32_t> v(64, comm.rank() + 1);
  try {
    comm.allreduce(v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum, o);
    problems += "the AllReduce after the mismatched call returned\n";
  } catch (const Error& e) {
    expect_mismatch(e, "the AllReduce after it");
  }
  return {problems, seconds_to_error};
}

}  // namespace chorus::testing
