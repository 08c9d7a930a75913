// Shared windows (transport/window.h) on ranks that are threads of this
// process: each thread creates its memory file and maps its peers' through
// /proc/<pid>/fd/<fd> as ranks in separate processes do, and the record
// exchange the communicator would run as a collective call is an allgather
// between the threads. SharedWindow: mapping peers' memory, sizes that
// disagree, containment. WindowSet: the control window, staging growth, the
// per-call records (stamps and places), user windows and flags.
#include "transport/window.h"

#include "core/check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using namespace std::chrono_literals;

// An allgather of WindowRecords between n threads, reusable call after call
// (each call is one generation: all n arrive, all n leave with every record).
class Allgather {
 public:
  explicit Allgather(int n) : n_(n), records_(static_cast<size_t>(n)) {}

  std::vector<WindowRecord> operator()(int rank, const WindowRecord& mine) {
    std::unique_lock lock(mu_);
    records_[static_cast<size_t>(rank)] = mine;
    const uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      result_ = records_;
      ++generation_;
      cv_.notify_all();
      return result_;
    }
    // The next generation cannot complete before this thread arrives again,
    // so result_ is still this generation's when the wait ends.
    if (!cv_.wait_for(lock, 60s, [&] { return generation_ != generation; }))
      fail(ErrorCode::timeout, "rank ", rank, ": the other threads never arrived");
    return result_;
  }

  // The exchange of rank `rank`, as a WindowSet or SharedWindow takes it.
  RecordExchange of(int rank) {
    return [this, rank](const WindowRecord& mine) { return (*this)(rank, mine); };
  }

  // Nobody passes until every thread has arrived.
  void barrier(int rank) { (*this)(rank, WindowRecord{}); }

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WindowRecord> records_;
  std::vector<WindowRecord> result_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// Runs body(rank) on n threads; each rank's exception text ("" if none).
std::vector<std::string> run_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

std::byte mark(int rank, size_t i) {
  return static_cast<std::byte>((rank * 37 + i * 11) & 0xff);
}

// Every rank writes its own part; after a barrier, every rank reads every
// peer's part through its own mapping of it, and writes into a peer's part
// land in the peer's memory.
TEST(SharedWindow, EveryRankMapsEveryPeersMemory) {
  constexpr int n = 3;
  constexpr size_t kBytes = 10000;  // not a multiple of the page size
  Allgather exchange(n);
  std::vector<std::shared_ptr<SharedWindow>> windows(n);
  expect_no_errors(run_threads(n, [&](int rank) {
    auto w = SharedWindow::create(rank, n, kBytes, exchange.of(rank));
    windows[static_cast<size_t>(rank)] = w;
    CHORUS_CHECK(w->rank() == rank && w->size() == n && w->bytes() == kBytes);
    CHORUS_CHECK(w->data() == w->base(rank));
    for (size_t i = 0; i < kBytes; ++i) w->data()[i] = mark(rank, i);
    exchange.barrier(rank);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < kBytes; ++i)
        if (w->base(q)[i] != mark(q, i))
          fail(ErrorCode::internal, "rank ", rank, " reads rank ", q, "'s byte ", i, " wrong");
    exchange.barrier(rank);
    // Rank r writes the first byte of rank r + 1's part.
    w->base((rank + 1) % n)[0] = std::byte{0xee};
    exchange.barrier(rank);
    if (w->data()[0] != std::byte{0xee})
      fail(ErrorCode::internal, "rank ", rank, " does not see its peer's write");
  }));
  // Distinct mappings of one memory: the threads' views of rank 0's part
  // are different addresses.
  EXPECT_NE(windows[0]->base(0), windows[1]->base(0));
}

TEST(SharedWindow, RanksThatAskForDifferentSizesFail) {
  constexpr int n = 2;
  Allgather exchange(n);
  const auto errors = run_threads(n, [&](int rank) {
    SharedWindow::create(rank, n, rank == 0 ? 4096 : 8192, exchange.of(rank));
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("window of"), std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_NE(errors[static_cast<size_t>(r)].find(r == 0 ? "8192" : "4096"), std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
}

TEST(SharedWindow, ContainsOnlyItsOwnPart) {
  Allgather exchange(1);
  auto w = SharedWindow::create(0, 1, 256, exchange.of(0));
  std::byte* p = w->data();
  EXPECT_TRUE(w->contains(p, 256));
  EXPECT_TRUE(w->contains(p + 100, 156));
  EXPECT_TRUE(w->contains(p + 256, 0));
  EXPECT_FALSE(w->contains(p + 100, 157));
  EXPECT_FALSE(w->contains(p - 1, 1));
  EXPECT_FALSE(w->contains(p, 257));
  int elsewhere = 0;
  EXPECT_FALSE(w->contains(&elsewhere, sizeof elsewhere));
  // A window of no bytes still maps (a part of a minimal length) and holds nothing.
  auto empty = SharedWindow::create(0, 1, 0, exchange.of(0));
  EXPECT_EQ(empty->bytes(), 0u);
  EXPECT_NE(empty->data(), nullptr);
  EXPECT_FALSE(empty->contains(empty->data(), 1));
}

TEST(WindowSet, StagingGrowsToPowersOfTwoAndNeverShrinks) {
  constexpr int n = 2;
  Allgather exchange(n);
  std::vector<std::vector<size_t>> sizes(n);
  expect_no_errors(run_threads(n, [&](int rank) {
    WindowSet set(rank, n, exchange.of(rank));
    CHORUS_CHECK(!set.ready() && set.staging() == nullptr && set.staging_bytes() == 0);
    set.ensure_control();
    CHORUS_CHECK(set.ready());
    auto& seen = sizes[static_cast<size_t>(rank)];
    for (size_t ask : {size_t{1}, size_t{4096}, size_t{4097}, size_t{3000}, size_t{100000}}) {
      set.ensure_staging(ask);
      CHORUS_CHECK(set.staging() != nullptr);
      seen.push_back(set.staging_bytes());
    }
  }));
  const std::vector<size_t> expected{4096, 4096, 8192, 8192, 131072};
  for (int r = 0; r < n; ++r) EXPECT_EQ(sizes[static_cast<size_t>(r)], expected) << "rank " << r;
}

CallStamp stamp_of(uint32_t seq, uint64_t count) {
  return collective_stamp(seq, Collective::allreduce, 2, DataType::float32, ReduceOp::sum, count,
                          0);
}

// Rank 0 publishes its call's stamp and places; rank 1 reads them as a peer
// does: the stamp of the call it asks for only, addresses in rank 0's
// staging window or user window, errors for another call or past the end.
TEST(WindowSet, PeersReadEachOthersRecords) {
  constexpr int n = 2;
  Allgather exchange(n);
  expect_no_errors(run_threads(n, [&](int rank) {
    WindowSet set(rank, n, exchange.of(rank));
    set.ensure_control();
    set.ensure_staging(4096);
    auto user = set.create_user_window(1024);
    SharedPlace found;
    CHORUS_CHECK(set.find_user_window(user->data() + 100, 24, found));
    CHORUS_CHECK(found.window == 1 && found.offset == 100);
    CHORUS_CHECK(!set.find_user_window(user->data() + 1000, 25, found));
    int elsewhere = 0;
    CHORUS_CHECK(!set.find_user_window(&elsewhere, sizeof elsewhere, found));

    const CallStamp mine = stamp_of(5, 32 + static_cast<uint64_t>(rank));
    set.publish_stamp(mine);
    // Input in the staging window at 128, output in user window 1 at 256.
    set.publish_places(5, SharedPlace{0, 128}, SharedPlace{1, 256});
    exchange.barrier(rank);
    const int q = 1 - rank;
    CallStamp theirs;
    CHORUS_CHECK(set.peer_stamp(q, 5, theirs));
    CHORUS_CHECK(theirs == stamp_of(5, 32 + static_cast<uint64_t>(q)));
    CHORUS_CHECK(!set.peer_stamp(q, 6, theirs));

    const auto* in = set.peer_address(q, 5, BufferKind::input, 16, 64);
    const auto* out = set.peer_address(q, 5, BufferKind::output, 8, 64);
    const auto* staged = set.peer_address(q, 5, BufferKind::window, 0, 4096);
    // Where the peer's parts lie in this rank's mappings.
    CHORUS_CHECK(staged != nullptr && in == staged + 128 + 16);
    CHORUS_CHECK(out == user->base(q) + 256 + 8);
    try {
      set.peer_address(q, 6, BufferKind::input, 0, 8);
      fail(ErrorCode::internal, "a read for call 6 of a peer in call 5 was allowed");
    } catch (const Error& e) {
      CHORUS_CHECK(e.code() == ErrorCode::mismatch);
    }
    try {
      set.peer_address(q, 5, BufferKind::output, 1024 - 256 - 8, 16);
      fail(ErrorCode::internal, "a read past the end of a user window was allowed");
    } catch (const Error& e) {
      CHORUS_CHECK(e.code() == ErrorCode::mismatch);
    }
    exchange.barrier(rank);
  }));
}

// A signal raises a flag at one peer for one call; a wait for that call or
// an earlier one is satisfied, a later call's, another flag's or another
// peer's is not.
TEST(WindowSet, SignalsRaiseOneFlagAtOnePeer) {
  constexpr int n = 3;
  Allgather exchange(n);
  expect_no_errors(run_threads(n, [&](int rank) {
    WindowSet set(rank, n, exchange.of(rank));
    set.ensure_control();
    if (rank == 0) set.signal(1, 2, 5);
    exchange.barrier(rank);
    if (rank == 1) {
      CHORUS_CHECK(set.signalled(0, 2, 5));
      CHORUS_CHECK(set.signalled(0, 2, 4));
      CHORUS_CHECK(!set.signalled(0, 2, 6));
      CHORUS_CHECK(!set.signalled(0, 1, 5));
      CHORUS_CHECK(!set.signalled(2, 2, 5));
    }
    if (rank == 2) CHORUS_CHECK(!set.signalled(0, 2, 5));
    exchange.barrier(rank);
  }));
}

}  // namespace
}  // namespace chorus
