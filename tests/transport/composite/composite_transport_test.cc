// The composite transport on its own, over in-process stand-ins for its two
// inner transports: two "hosts" of two ranks each (host A holds ranks 1 and
// 3, host B ranks 0 and 2, so that local and global ranks differ). Each
// rank's "shm" transport is an in-process world of its host's ranks, its
// "tcp" one a world of all four that reports only the other host's ranks
// (as a tcp transport connected to those alone does). Recorders between the
// composite and each inner transport show where every call went.
#include "transport/composite/composite_transport.h"
#include "support/wait_all.h"

#include "transport/forwarding_transport.h"
#include "transport/inproc/inproc_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

namespace chorus {
namespace {

using namespace std::chrono_literals;

// What the composite asked of one inner transport.
class Recorder final : public ForwardingTransport {
 public:
  // `reported`: the ranks whose progress this transport reports (all: empty).
  Recorder(std::unique_ptr<Transport> inner, std::vector<int> reported)
      : ForwardingTransport(std::move(inner)), reported_(std::move(reported)) {}

  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    sends.push_back(peer);
    return inner().isend(peer, data, bytes, stamp);
  }
  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer, const CallStamp& stamp,
                  WriteMode store) override {
    recvs.push_back(peer);
    return inner().irecv(peer, dst, bytes, reducer, stamp, store);
  }
  void begin_call(const CallStamp& stamp) override {
    ++calls;
    inner().begin_call(stamp);
  }
  std::vector<PeerProgress> peer_progress(Deadline deadline) override {
    std::vector<PeerProgress> all = inner().peer_progress(deadline);
    if (reported_.empty()) return all;
    std::erase_if(all, [&](const PeerProgress& p) {
      return std::find(reported_.begin(), reported_.end(), p.rank) == reported_.end();
    });
    return all;
  }
  void abort(ErrorCode cause, const std::string& reason) override {
    aborted = true;
    inner().abort(cause, reason);
  }
  void interrupt() override {
    ++interrupts;
    inner().interrupt();
  }

  std::vector<int> sends;  // the peers, in this transport's own ranks
  std::vector<int> recvs;
  int calls = 0;
  bool aborted = false;
  int interrupts = 0;

 private:
  std::vector<int> reported_;
};

constexpr int kRanks = 4;
constexpr std::array<int, kRanks> kHost{1, 0, 1, 0};   // rank -> host: B, A, B, A
constexpr std::array<int, kRanks> kLocal{0, 0, 1, 1};  // rank -> its rank on its host

// Four composite transports, with their recorders.
struct Job {
  Job() {
    std::array<std::shared_ptr<InprocWorld>, 2> hosts{make_inproc_world(2), make_inproc_world(2)};
    auto wide = make_inproc_world(kRanks);
    for (int g = 0; g < kRanks; ++g) {
      std::vector<int> local_of_global(kRanks, -1), remote;
      for (int q = 0; q < kRanks; ++q) {
        if (q == g) continue;
        if (kHost[static_cast<size_t>(q)] == kHost[static_cast<size_t>(g)])
          local_of_global[static_cast<size_t>(q)] = kLocal[static_cast<size_t>(q)];
        else
          remote.push_back(q);
      }
      auto shm = std::make_unique<Recorder>(
          make_inproc_transport(hosts[static_cast<size_t>(kHost[static_cast<size_t>(g)])],
                                kLocal[static_cast<size_t>(g)], 0us),
          std::vector<int>{});
      auto tcp = std::make_unique<Recorder>(make_inproc_transport(wide, g, 0us), remote);
      shm_of.push_back(shm.get());
      tcp_of.push_back(tcp.get());
      ranks.push_back(
          make_composite_transport(g, kRanks, std::move(shm), local_of_global, std::move(tcp)));
    }
  }
  Transport& operator[](int g) { return *ranks[static_cast<size_t>(g)]; }

  std::vector<Recorder*> shm_of;
  std::vector<Recorder*> tcp_of;
  std::vector<std::unique_ptr<Transport>> ranks;
};

using test::wait_all;

CallStamp call(uint32_t seq) {
  return collective_stamp(seq, Collective::allgather, 1, DataType::int32, ReduceOp::sum, 1, 0);
}

TEST(CompositeTransport, NamesItself) {
  Job job;
  EXPECT_EQ(job[2].kind(), TransportKind::shm_tcp);
  EXPECT_EQ(job[2].name(), "shm+tcp");
  EXPECT_EQ(job[2].rank(), 2);
  EXPECT_EQ(job[2].size(), kRanks);
  EXPECT_FALSE(job[2].shares_memory());
}

// Every rank sends to every other and receives from every other: each
// message arrives, a peer on the same host goes through "shm" under its
// local rank, the others through "tcp" under their global rank, and every
// completion carries the id the composite handed out.
TEST(CompositeTransport, RoutesEachPeerToTheTransportThatReachesIt) {
  Job job;
  std::array<std::array<int32_t, kRanks>, kRanks> out{}, in{};
  std::array<std::vector<RequestId>, kRanks> ids;
  for (int g = 0; g < kRanks; ++g)
    for (int q = 0; q < kRanks; ++q) {
      if (q == g) continue;
      out[g][q] = 100 * g + q;
      in[g][q] = -1;
      ids[static_cast<size_t>(g)].push_back(job[g].isend(q, &out[g][q], 4));
      ids[static_cast<size_t>(g)].push_back(job[g].irecv(q, &in[g][q], 4, nullptr));
    }
  for (int g = 0; g < kRanks; ++g) {
    const auto& mine = ids[static_cast<size_t>(g)];
    EXPECT_EQ(std::set<RequestId>(mine.begin(), mine.end()).size(), mine.size())
        << "rank " << g << " handed out an id twice";
    wait_all(job[g], mine);
  }
  for (int g = 0; g < kRanks; ++g)
    for (int q = 0; q < kRanks; ++q)
      if (q != g) {
        EXPECT_EQ(in[g][q], 100 * q + g) << "rank " << g << " from " << q;
      }
  // Rank 3 (host A, local 1): rank 1 is its local 0; ranks 0 and 2 are remote.
  EXPECT_EQ(job.shm_of[3]->sends, std::vector<int>({0}));
  EXPECT_EQ(job.shm_of[3]->recvs, std::vector<int>({0}));
  EXPECT_EQ(job.tcp_of[3]->sends, std::vector<int>({0, 2}));
  EXPECT_EQ(job.tcp_of[3]->recvs, std::vector<int>({0, 2}));
  // Rank 0 (host B, local 0): rank 2 is its local 1.
  EXPECT_EQ(job.shm_of[0]->sends, std::vector<int>({1}));
  EXPECT_EQ(job.tcp_of[0]->sends, std::vector<int>({1, 3}));
}

// A mismatch found by the "shm" side speaks of that group's ranks; the
// composite restates it with the job's.
TEST(CompositeTransport, AStampMismatchOverShmNamesTheJobsRanks) {
  Job job;
  int32_t out = 1, in = 0;
  job[1].isend(3, &out, 4, call(2));
  job[3].irecv(1, &in, 4, nullptr, call(3));
  std::vector<RequestId> done;
  try {
    job[3].wait_some(done, Clock::now() + 10s);
    FAIL() << "a message of call 2 completed a receive of call 3";
  } catch (const StampMismatch& m) {
    EXPECT_EQ(m.rank, 3);
    EXPECT_EQ(m.peer, 1);
    EXPECT_EQ(m.mine.seq, 3u);
    EXPECT_EQ(m.theirs.seq, 2u);
  }
  EXPECT_EQ(in, 0);
}

// The stall report joins both transports' reports, with the job's ranks, in
// rank order.
TEST(CompositeTransport, PeerProgressJoinsBothTransportsInRankOrder) {
  Job job;
  job[1].begin_call(call(4));
  EXPECT_EQ(job.shm_of[1]->calls, 1);
  EXPECT_EQ(job.tcp_of[1]->calls, 1);
  const std::vector<PeerProgress> report = job[3].peer_progress(Clock::now());
  ASSERT_EQ(report.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(report[static_cast<size_t>(i)].rank, i);
  EXPECT_EQ(report[1].last, call(4));  // from "shm", where rank 1 is local 0
  EXPECT_EQ(report[1].collectives_entered, 4u);
  EXPECT_EQ(report[0].last, CallStamp{});
}

TEST(CompositeTransport, AbortAndInterruptReachBothTransports) {
  Job job;
  job[2].interrupt();
  EXPECT_EQ(job.shm_of[2]->interrupts, 1);
  EXPECT_EQ(job.tcp_of[2]->interrupts, 1);
  // The interrupted wait returns at once, with nothing.
  int32_t in = 0;
  job[2].irecv(1, &in, 4, nullptr);
  std::vector<RequestId> done;
  const auto start = Clock::now();
  job[2].wait_some(done, Clock::now() + 30s);
  EXPECT_TRUE(done.empty());
  EXPECT_LT(Clock::now() - start, 20s);
  job[2].abort(ErrorCode::internal, "rank 2 gave up");
  EXPECT_TRUE(job.shm_of[2]->aborted);
  EXPECT_TRUE(job.tcp_of[2]->aborted);
  // Its peers on both transports learn of it at their next call.
  EXPECT_THROW(job[0].begin_call(call(1)), PeerAborted);
  EXPECT_THROW(job[1].begin_call(call(1)), PeerAborted);
}

}  // namespace
}  // namespace chorus
