// Bucketed gradients whose AllReduces overlap a simulated backward pass, as
// a data-parallel trainer runs them.
//
// The backward pass produces the gradient buckets last layer first; each
// bucket's AllReduce starts as soon as the bucket is ready, and the step
// waits for them all at its end. Meanwhile chorus's progress thread moves the
// bytes (CHORUS_PROGRESS=thread, the default). The step is timed both ways:
//   sequential  compute every bucket, then AllReduce each (blocking);
//   overlapped  compute bucket b, allreduce_async(b), ..., wait for all.
//
//   chorus-run -n 2 ./overlap            # processes (shm), as a job runs
//   ./overlap                            # 2 ranks as threads of this process
//   g++ -std=c++20 -O2 overlap.cc $(pkg-config --cflags --libs chorus)
#include <chorus/chorus.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace {

constexpr int kBuckets = 8;
constexpr size_t kBucketFloats = size_t{1} << 20;  // 4 MiB each
constexpr int kSteps = 6;

// One layer's share of the backward pass: arithmetic in registers.
double backward_layer(long work) {
  double a = 1.0, b = 2.0;
  for (long i = 0; i < work; ++i) {
    a = a * 0.9999999 + 1e-9;
    b = b * 0.9999998 + 2e-9;
  }
  return a + b;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void train(chorus::Communicator& comm) {
  std::vector<std::vector<float>> buckets(kBuckets, std::vector<float>(kBucketFloats));
  const long work = 3'000'000;  // about a millisecond or more of arithmetic per layer
  volatile double sink = 0;
  auto fill = [&](int step) {
    for (auto& g : buckets) std::fill(g.begin(), g.end(), float(comm.rank() + step));
  };
  auto check = [&](int step) {
    const int n = comm.size();
    const float expect = float(n * (n - 1) / 2 + n * step);
    for (const auto& g : buckets)
      if (g.front() != expect || g.back() != expect) throw std::runtime_error("wrong gradient sum");
  };
  std::vector<double> sequential, overlapped;
  for (int step = 0; step < kSteps; ++step) {
    fill(step);
    comm.barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int b = kBuckets - 1; b >= 0; --b) sink = sink + backward_layer(work);
    for (auto& g : buckets)
      comm.allreduce(g.data(), g.data(), g.size(), chorus::DataType::float32,
                     chorus::ReduceOp::sum);
    sequential.push_back(seconds_since(t0));
    check(step);

    fill(step);
    comm.barrier();
    t0 = std::chrono::steady_clock::now();
    std::vector<chorus::Work> pending;
    for (int b = kBuckets - 1; b >= 0; --b) {
      sink = sink + backward_layer(work);
      auto& g = buckets[static_cast<size_t>(b)];
      pending.push_back(comm.allreduce_async(g.data(), g.data(), g.size(),
                                             chorus::DataType::float32, chorus::ReduceOp::sum));
    }
    for (chorus::Work& w : pending) w.wait();
    overlapped.push_back(seconds_since(t0));
    check(step);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (comm.rank() == 0)
    std::printf(
        "%d ranks over %s, %d buckets of %zu MiB, progress=%s: step %.1f ms sequential, %.1f ms "
        "overlapped\n",
        comm.size(), comm.transport().c_str(), kBuckets, kBucketFloats * sizeof(float) >> 20,
        comm.progress().c_str(), median(sequential) * 1e3, median(overlapped) * 1e3);
}

}  // namespace

int main() {
  try {
    if (std::getenv("CHORUS_RANK") != nullptr) {
      chorus::Communicator comm = chorus::init_from_env();
      train(comm);
    } else {
      chorus::testing::run_ranks(2, train);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap: %s\n", e.what());
    return 1;
  }
  return 0;
}
