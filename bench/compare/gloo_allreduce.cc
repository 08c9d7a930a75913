// Gloo allreduce sweep (TCP) with chorus-perf's columns.
//   gloo_allreduce --rank R --size N --store DIR [--host ADDR] [-b -e -f -n -w]
// Ranks meet through a gloo FileStore in DIR; each listens on ADDR (default
// 127.0.0.1, loopback; on the testbed, the host's address); float32 sum, out
// of place and in place; time = slowest rank's mean over -n iterations.
#include "compare_common.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <memory>

int main(int argc, char** argv) {
  std::vector<std::string> rest;
  const compare::Sweep s = compare::parse_sweep(argc, argv, &rest);
  int rank = -1, n = -1;
  std::string store_dir;
  std::string host = "127.0.0.1";
  for (size_t i = 0; i + 1 < rest.size(); ++i) {
    if (rest[i] == "--rank") rank = std::atoi(rest[i + 1].c_str());
    if (rest[i] == "--size") n = std::atoi(rest[i + 1].c_str());
    if (rest[i] == "--store") store_dir = rest[i + 1];
    if (rest[i] == "--host") host = rest[i + 1];
  }
  if (rank < 0 || n < 1 || store_dir.empty() || host.empty()) {
    std::fprintf(
        stderr,
        "usage: gloo_allreduce --rank R --size N --store DIR [--host ADDR] [-b -e -f -n -w]\n");
    return 2;
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->connectFullMesh(store, device);

  using Clock = std::chrono::steady_clock;
  const size_t max_count = s.max_bytes / sizeof(float);
  std::vector<float> send(max_count), recv(max_count);
  auto allreduce = [&](float* in, float* out, size_t count) {
    gloo::AllreduceOptions opts(context);
    opts.setInput(in, count);
    opts.setOutput(out, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  };
  auto max_over_ranks = [&](double v) {
    gloo::AllreduceOptions opts(context);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    gloo::allreduce(opts);
    return v;
  };
  if (rank == 0) compare::print_header("gloo", n);
  size_t total_wrong = 0;
  for (size_t bytes = s.min_bytes; bytes <= s.max_bytes;
       bytes = std::max(bytes + 1, static_cast<size_t>(static_cast<double>(bytes) * s.factor))) {
    const size_t count = bytes / sizeof(float);
    compare::Cell cells[2];
    for (int in_place = 0; in_place < 2; ++in_place) {
      float* in = in_place ? recv.data() : send.data();
      compare::fill(send, count, rank);
      compare::fill(recv, count, rank);
      for (int i = 0; i < s.warmup; ++i) allreduce(in, recv.data(), count);
      gloo::BarrierOptions b(context);
      gloo::barrier(b);
      const auto t0 = Clock::now();
      for (int i = 0; i < s.iters; ++i) allreduce(in, recv.data(), count);
      const double t =
          max_over_ranks(std::chrono::duration<double>(Clock::now() - t0).count() / s.iters);
      compare::fill(send, count, rank);
      compare::fill(recv, count, rank);
      allreduce(in, recv.data(), count);
      double wrong = static_cast<double>(compare::count_wrong(recv, count, n));
      {
        gloo::AllreduceOptions opts(context);
        opts.setOutput(&wrong, 1);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
        gloo::allreduce(opts);
      }
      cells[in_place] = {t, static_cast<size_t>(wrong)};
      total_wrong += static_cast<size_t>(wrong);
    }
    if (rank == 0) compare::print_row(count * sizeof(float), n, cells[0], cells[1]);
  }
  if (rank == 0)
    std::printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  return total_wrong ? 1 : 0;
}
