// The executor on hand-written Programs over in-process transports.
#include "exec/executor.h"
#include "algorithms/algorithm.h"
#include "engine/communicator_impl.h"
#include "transport/inproc/inproc_transport.h"

#include <gtest/gtest.h>

#include <thread>

namespace chorus {
namespace {

using B = ProgramBuilder;

// Runs programs[r] on rank r (threads), each with its own buffers.
void run_programs(const std::vector<Program>& programs, std::vector<std::vector<float>>& in,
                  std::vector<std::vector<float>>& out, ReduceOp op = ReduceOp::sum) {
  const int n = static_cast<int>(programs.size());
  auto world = make_inproc_world(n);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto t = make_inproc_transport(world, r, std::chrono::microseconds(0));
        Engine engine(*t);
        const auto& p = programs[static_cast<size_t>(r)];
        std::vector<float> scratch(p.scratch_count);
        auto e = std::make_shared<Execution>(
            prepare(p),
            ExecBuffers{in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                        scratch.data()},
            DataType::float32, op, CallLabel{"test", "hand"},
            Clock::now() + std::chrono::seconds(10));
        engine.enqueue(e);
        engine.wait(*e);
      } catch (const std::exception& ex) {
        errors[static_cast<size_t>(r)] = ex.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(Executor, SendRecvReduceAndLocalOps) {
  // Rank 0 sends input[0,2) to rank 1, which reduces it into its own input
  // and copies the sum to output[2,4); rank 1 sends back, rank 0 receives.
  B b0({4, 4}), b1({4, 4});
  b0.send(1, B::input(0, 2));
  b0.recv(1, B::output(0, 2));
  OpIndex rr = b1.recv_reduce(0, B::input(0, 2), B::output(0, 2));
  OpIndex cp = b1.copy(B::output(0, 2), B::output(2, 2), {rr});
  b1.send(0, B::output(2, 2), {cp});
  b1.reduce(B::input(2, 2), B::output(2, 2), {cp});  // after the copy; races with the send
  std::vector<Program> progs{std::move(b0).finish(), std::move(b1).finish()};
  // The last reduce writes output[2,4) while the send may still read it:
  // make it wait for the send instead.
  progs[1].ops[3].deps = {2};
  std::vector<std::vector<float>> in{{1, 2, 3, 4}, {10, 20, 30, 40}};
  std::vector<std::vector<float>> out{{0, 0, 0, 0}, {0, 0, 0, 0}};
  run_programs(progs, in, out);
  EXPECT_EQ(out[0], (std::vector<float>{11, 22, 0, 0}));
  EXPECT_EQ(out[1], (std::vector<float>{11, 22, 41, 62}));
}

TEST(Executor, ScratchAndZeroByteMessages) {
  B b0({0, 3}), b1({3, 0});
  const size_t s = b1.alloc_scratch(3);
  OpIndex r = b1.recv(0, B::scratch(s, 0));  // empty message orders the send
  b1.send(0, B::input(0, 3), {r});
  b0.send(1, B::input(0, 0));
  b0.recv(1, B::output(0, 3));
  std::vector<Program> progs{std::move(b0).finish(), std::move(b1).finish()};
  std::vector<std::vector<float>> in{{}, {7, 8, 9}};
  std::vector<std::vector<float>> out{{0, 0, 0}, {}};
  run_programs(progs, in, out);
  EXPECT_EQ(out[0], (std::vector<float>{7, 8, 9}));
}

TEST(Executor, MessagesOnAChannelMatchInProgramOrder) {
  // Rank 0's second send is ready first (no deps) but must not overtake the
  // first one, which waits for a local copy.
  B b0({4, 4}), b1({0, 4});
  OpIndex c = b0.copy(B::input(0, 2), B::output(0, 2));
  b0.send(1, B::output(0, 2), {c});
  b0.send(1, B::input(2, 2));
  b1.recv(0, B::output(0, 2));
  b1.recv(0, B::output(2, 2));
  std::vector<Program> progs{std::move(b0).finish(), std::move(b1).finish()};
  std::vector<std::vector<float>> in{{1, 2, 3, 4}, {}};
  std::vector<std::vector<float>> out{{0, 0, 0, 0}, {0, 0, 0, 0}};
  run_programs(progs, in, out);
  EXPECT_EQ(out[1], (std::vector<float>{1, 2, 3, 4}));
}

TEST(Executor, SizeMismatchIsAnError) {
  auto world = make_inproc_world(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      B b({4, 4});
      if (r == 0)
        b.send(1, B::input(0, 4));
      else
        b.recv(0, B::output(0, 2));
      std::vector<float> in(4, 1), out(4, 0);
      try {
        auto t = make_inproc_transport(world, r, std::chrono::microseconds(0));
        Engine engine(*t);
        auto e = std::make_shared<Execution>(
            prepare(std::move(b).finish()), ExecBuffers{in.data(), out.data(), nullptr},
            DataType::float32, ReduceOp::sum, CallLabel{"test", "hand"},
            Clock::now() + std::chrono::seconds(10));
        engine.enqueue(e);
        engine.wait(*e);
      } catch (const Error& ex) {
        errors[static_cast<size_t>(r)] = std::string(to_string(ex.code())) + ": " + ex.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    EXPECT_NE(e.find("mismatch:"), std::string::npos) << e;
    EXPECT_NE(e.find("16 B"), std::string::npos) << e;
  }
}

TEST(Executor, TimeoutNamesWhatItWaitsFor) {
  auto world = make_inproc_world(2);
  auto t = make_inproc_transport(world, 0, std::chrono::microseconds(0));
  Engine engine(*t);
  B b({0, 1});
  b.recv(1, B::output(0, 1));
  std::vector<float> out(1);
  auto e = std::make_shared<Execution>(
      prepare(std::move(b).finish()), ExecBuffers{nullptr, out.data(), nullptr}, DataType::float32,
      ReduceOp::sum, CallLabel{"allreduce", "ring"}, Clock::now() + std::chrono::milliseconds(50));
  engine.enqueue(e);
  try {
    engine.wait(*e);
    FAIL() << "expected a timeout";
  } catch (const Error& ex) {
    EXPECT_EQ(ex.code(), ErrorCode::timeout);
    const std::string m = ex.what();
    EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
    EXPECT_NE(m.find("allreduce(ring)"), std::string::npos) << m;
    EXPECT_NE(m.find("recv from peer 1"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// The ops a large call writes with non-temporal stores: an op is final
// exactly when it writes Output and no other op of its Program reads an
// overlapping part of Output (as src, or as the dst a reduce or divide reads
// first), checked against every pair of ops for every registered algorithm.
TEST(FinalOutput, MarksExactlyTheOutputWritesNoOtherOpReads) {
  auto overlap = [](const Region& a, const Region& b) {
    return a.buffer == BufferKind::output && b.buffer == BufferKind::output && a.count > 0 &&
           b.count > 0 && a.offset < b.end() && b.offset < a.end();
  };
  auto reads_src = [](OpKind k) {
    return k == OpKind::send || k == OpKind::recv_reduce || k == OpKind::copy ||
           k == OpKind::reduce || k == OpKind::get_reduce;
  };
  size_t finals = 0, kept = 0;
  for (const Algorithm& a : all_algorithms()) {
    for (int n : {2, 3, 4}) {
      CollectiveSpec spec{a.collective, n, 0, size_t{4096} * static_cast<size_t>(n) + 5, 4, 0};
      spec.windows = true;
      if (!supports(a, spec)) continue;
      for (int r = 0; r < n; ++r) {
        spec.rank = r;
        const auto prepared = prepare(build_program(a, spec));
        const auto& ops = prepared->program.ops;
        ASSERT_EQ(prepared->final_output.size(), ops.size());
        for (size_t i = 0; i < ops.size(); ++i) {
          const Op& o = ops[i];
          const bool writes = o.kind != OpKind::send && o.kind != OpKind::signal &&
                              o.kind != OpKind::wait && o.kind != OpKind::divide &&
                              o.dst.buffer == BufferKind::output && o.dst.count > 0;
          bool read = false;
          for (size_t j = 0; j < ops.size() && !read; ++j) {
            if (j == i) continue;
            const Op& x = ops[j];
            read =
                (reads_src(x.kind) && overlap(x.src, o.dst)) ||
                ((x.kind == OpKind::reduce || x.kind == OpKind::divide) && overlap(x.dst, o.dst));
          }
          const bool want = writes && !read;
          EXPECT_EQ(prepared->final_output[i] != 0, want)
              << a.name << " N=" << n << " rank " << r << " op " << i << " (" << describe(o) << ")";
          (want ? finals : kept) += writes ? 1 : 0;
        }
      }
    }
  }
  // Both kinds occur: results that are forwarded, and final ones.
  EXPECT_GT(finals, 0u);
  EXPECT_GT(kept, 0u);
}

}  // namespace
}  // namespace chorus
