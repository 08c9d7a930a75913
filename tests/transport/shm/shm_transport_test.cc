// The shared-memory transport between real processes: every test fork()s its
// ranks, which meet through a FileStore in a fresh directory and build their
// transport with make_shm_transport. A child reports a failed check through a
// pipe and a non-zero exit; the parent also checks that no /dev/shm entry of
// any child survives.
#include "transport/shm/shm_transport.h"
#include "core/check.h"
#include "core/config.h"
#include "engine/communicator_impl.h"
#include "store/file_store.h"
#include "support/grid.h"

#include <chorus/error.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace chorus {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Throws (and so fails the child) when `ok` is false.
template <typename... Parts>
void require(bool ok, Parts&&... parts) {
  if (!ok) throw std::runtime_error(str_cat(std::forward<Parts>(parts)...));
}

// A deterministic byte of message `k` from `src` to `dst` at position i.
std::byte pattern(int src, int dst, size_t k, size_t i) {
  return static_cast<std::byte>((src * 131 + dst * 31 + k * 7 + i * 13 + (i >> 8)) & 0xff);
}

std::vector<std::byte> make_message(int src, int dst, size_t k, size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(src, dst, k, i);
  return v;
}

void check_message(const std::vector<std::byte>& got, int src, int dst, size_t k) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != pattern(src, dst, k, i))
      throw std::runtime_error(str_cat("message ", k, " from ", src, " to ", dst, " (", got.size(),
                                       " B) differs at byte ", i));
}

// Waits until every id in `ids` has completed.
void wait_all(Transport& t, std::vector<RequestId> ids, Deadline deadline) {
  std::vector<RequestId> done;
  while (!ids.empty()) {
    done.clear();
    t.wait_some(done, deadline);
    require(!done.empty() || Clock::now() < deadline, "rank ", t.rank(), ": timed out with ",
            ids.size(), " requests pending");
    for (RequestId id : done) std::erase(ids, id);
  }
}

Deadline in(std::chrono::milliseconds ms) {
  return Clock::now() + ms;
}

// Names in /dev/shm that a process with this pid created.
std::vector<std::string> shm_entries_of(pid_t pid) {
  std::vector<std::string> out;
  const std::string prefix = str_cat("chorus-", pid, "-");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

struct ChildOutcome {
  pid_t pid = 0;
  int status = 0;
  std::string message;  // what the child reported before it failed
};

using StoreBody = std::function<void(int rank, Store& store)>;
using Body = std::function<void(int rank, Transport& t)>;

// Runs `body` in n forked ranks sharing a FileStore in a fresh directory;
// returns each child's outcome. Children still running after `limit` are
// killed and reported as hung.
std::vector<ChildOutcome> run_forked(int n, const StoreBody& body,
                                     std::chrono::seconds limit = 120s) {
  char templ[] = "/tmp/chorus-shm-test-XXXXXX";
  const char* dir = ::mkdtemp(templ);
  if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
  std::vector<ChildOutcome> out(static_cast<size_t>(n));
  std::vector<int> pipes(static_cast<size_t>(n), -1);
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int code = 0;
      try {
        FileStore store(dir);
        body(r, store);
      } catch (const std::exception& e) {
        const std::string msg = str_cat("rank ", r, ": ", e.what());
        [[maybe_unused]] ssize_t w = ::write(fds[1], msg.data(), msg.size());
        code = 1;
      }
      ::_exit(code);
    }
    ::close(fds[1]);
    out[static_cast<size_t>(r)].pid = pid;
    pipes[static_cast<size_t>(r)] = fds[0];
  }
  const auto end = Clock::now() + limit;
  size_t running = out.size();
  std::vector<bool> reaped(out.size(), false);
  while (running > 0) {
    for (size_t r = 0; r < out.size(); ++r) {
      if (reaped[r]) continue;
      if (::waitpid(out[r].pid, &out[r].status, WNOHANG) == out[r].pid) {
        reaped[r] = true;
        --running;
      }
    }
    if (running == 0) break;
    if (Clock::now() > end) {
      for (size_t r = 0; r < out.size(); ++r)
        if (!reaped[r]) {
          ::kill(out[r].pid, SIGKILL);
          ::waitpid(out[r].pid, &out[r].status, 0);
          out[r].message = "hung: killed after the time limit";
          reaped[r] = true;
        }
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  for (size_t r = 0; r < out.size(); ++r) {
    char buf[4096];
    ssize_t k;
    while ((k = ::read(pipes[r], buf, sizeof buf)) > 0) out[r].message.append(buf, size_t(k));
    ::close(pipes[r]);
  }
  fs::remove_all(dir);
  return out;
}

std::vector<ChildOutcome> run_processes(int n, const ShmOptions& options, const Body& body,
                                        std::chrono::seconds limit = 120s) {
  return run_forked(
      n,
      [&](int rank, Store& store) {
        ShmOptions opt = options;
        opt.deadline = Clock::now() + 30s;
        auto t = make_shm_transport(store, rank, n, opt);
        body(rank, *t);
      },
      limit);
}

// Every child exited 0 and left nothing in /dev/shm.
void expect_all_ok(const std::vector<ChildOutcome>& out) {
  for (size_t r = 0; r < out.size(); ++r) {
    const ChildOutcome& c = out[r];
    EXPECT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)
        << "rank " << r << " failed (status " << c.status << "): " << c.message;
    EXPECT_TRUE(shm_entries_of(c.pid).empty()) << "rank " << r << " left a /dev/shm entry";
  }
}

ShmOptions small_slots() {
  ShmOptions o;
  o.slot_bytes = 4096;
  o.slots = 4;
  o.spin = 20us;
  return o;
}

// ---------------------------------------------------------------------------

// Every rank sends many messages of varied sizes to every other rank, all
// posted at once; each must arrive intact and in order.
void all_pairs_fifo(int n, const ShmOptions& options, size_t messages) {
  auto out = run_processes(n, options, [&](int rank, Transport& t) {
    std::vector<std::vector<std::byte>> sent, got;
    std::vector<RequestId> ids;
    std::vector<std::tuple<int, size_t, size_t>> recv_of;      // src, k, index into got
    auto size_of = [](size_t k) { return (k * 977) % 9000; };  // 0 .. 2 slots and more
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      for (size_t k = 0; k < messages; ++k) {
        sent.push_back(make_message(rank, peer, k, size_of(k)));
        got.emplace_back(size_of(k));
      }
    }
    size_t i = 0;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      for (size_t k = 0; k < messages; ++k, ++i) {
        ids.push_back(t.isend(peer, sent[i].data(), sent[i].size()));
        ids.push_back(t.irecv(peer, got[i].data(), got[i].size(), nullptr));
        recv_of.emplace_back(peer, k, i);
      }
    }
    wait_all(t, ids, in(60s));
    for (auto [src, k, j] : recv_of) check_message(got[j], src, rank, k);
  });
  expect_all_ok(out);
}

TEST(ShmTransport, FifoOrderTwoProcesses) {
  all_pairs_fifo(2, small_slots(), 400);
}
TEST(ShmTransport, FifoOrderThreeProcesses) {
  all_pairs_fifo(3, small_slots(), 150);
}
TEST(ShmTransport, FifoOrderFourProcesses) {
  all_pairs_fifo(4, small_slots(), 100);
}
TEST(ShmTransport, FifoOrderEightProcesses) {
  all_pairs_fifo(8, small_slots(), 40);
}

std::string path_name(const ::testing::TestParamInfo<bool>& p) {
  return p.param ? "CrossMemory" : "SlotsOnly";
}

// Sizes at every slot boundary, through slots only and with the single-copy path.
class ShmSizes : public ::testing::TestWithParam<bool> {};

TEST_P(ShmSizes, BoundarySizesArriveIntact) {
  ShmOptions o = small_slots();
  o.cma_threshold = GetParam() ? 8192 : 0;
  const size_t s = o.slot_bytes;
  const std::vector<size_t> sizes = {
      0, 1, s - 1, s, s + 1, 2 * s, 3 * o.slots * s + 7, size_t{64} << 20};
  auto out = run_processes(2, o, [&](int rank, Transport& t) {
    const int peer = 1 - rank;
    for (size_t k = 0; k < sizes.size(); ++k) {
      // One direction at a time, then both at once.
      std::vector<std::byte> msg = make_message(rank, peer, k, sizes[k]);
      std::vector<std::byte> got(sizes[k]);
      if (rank == 0) {
        wait_all(t, {t.isend(peer, msg.data(), msg.size())}, in(60s));
      } else {
        wait_all(t, {t.irecv(peer, got.data(), got.size(), nullptr)}, in(60s));
        check_message(got, peer, rank, k);
      }
      std::fill(got.begin(), got.end(), std::byte{0});
      wait_all(
          t,
          {t.isend(peer, msg.data(), msg.size()), t.irecv(peer, got.data(), got.size(), nullptr)},
          in(60s));
      check_message(got, peer, rank, k);
    }
  });
  expect_all_ok(out);
}

INSTANTIATE_TEST_SUITE_P(Paths, ShmSizes, ::testing::Bool(), path_name);

// dst = local (+) incoming, for slot-spanning sizes, float sum and int32 max,
// with dst aliasing local and apart from it.
class ShmReduce : public ::testing::TestWithParam<bool> {};

TEST_P(ShmReduce, RecvReduceIsExact) {
  ShmOptions o = small_slots();
  o.cma_threshold = GetParam() ? 8192 : 0;
  auto out = run_processes(2, o, [&](int rank, Transport& t) {
    const int peer = 1 - rank;
    for (size_t count :
         {size_t{1}, size_t{1023}, size_t{1024}, size_t{1025}, size_t{50'000}, size_t{300'001}}) {
      std::vector<float> mine(count), theirs(count), sum(count);
      std::vector<int32_t> imine(count), itheirs(count);
      for (size_t i = 0; i < count; ++i) {
        mine[i] = static_cast<float>((i * (rank + 3)) % 1000);
        theirs[i] = static_cast<float>((i * (peer + 3)) % 1000);
        imine[i] = static_cast<int32_t>((i * 7919 + rank * 13) % 2001) - 1000;
        itheirs[i] = static_cast<int32_t>((i * 7919 + peer * 13) % 2001) - 1000;
      }
      Reducer fsum{DataType::float32, ReduceOp::sum, mine.data()};
      std::vector<float> dst(count, -1.0f);
      std::vector<int32_t> idst = imine;  // in place: dst == local
      Reducer imax{DataType::int32, ReduceOp::max, idst.data()};
      wait_all(t,
               {t.isend(peer, mine.data(), count * sizeof(float)),
                t.irecv(peer, dst.data(), count * sizeof(float), &fsum),
                t.isend(peer, imine.data(), count * sizeof(int32_t)),
                t.irecv(peer, idst.data(), count * sizeof(int32_t), &imax)},
               in(60s));
      for (size_t i = 0; i < count; ++i) {
        require(dst[i] == mine[i] + theirs[i], "float sum wrong at ", i, " of ", count);
        require(idst[i] == std::max(imine[i], itheirs[i]), "int32 max wrong at ", i, " of ", count);
      }
    }
  });
  expect_all_ok(out);
}

INSTANTIATE_TEST_SUITE_P(Paths, ShmReduce, ::testing::Bool(), path_name);

// Both ranks send 64 MiB to each other at once through 4 small slots: each
// must keep draining its incoming FIFO while its outgoing one is full.
TEST(ShmTransport, BigMessagesBothDirectionsDoNotDeadlock) {
  for (bool cma : {false, true}) {
    ShmOptions o = small_slots();
    o.cma_threshold = cma ? 8192 : 0;
    auto out = run_processes(2, o, [&](int rank, Transport& t) {
      const int peer = 1 - rank;
      const size_t bytes = size_t{64} << 20;
      std::vector<std::byte> msg = make_message(rank, peer, 9, bytes), got(bytes);
      // Send posted first on both sides: the receive is posted only after.
      const RequestId s = t.isend(peer, msg.data(), bytes);
      std::vector<RequestId> done;
      t.poll(done);
      const RequestId r = t.irecv(peer, got.data(), bytes, nullptr);
      wait_all(t, {s, r}, in(60s));
      check_message(got, peer, rank, 9);
    });
    expect_all_ok(out);
  }
}

// Inline sends are eager: they complete once the message sits in its slots,
// before the receive is posted. Here each rank waits for its send before it
// posts its receive, which would deadlock (and time out) with rendezvous
// completion.
TEST(ShmTransport, InlineSendsCompleteBeforeTheirReceiveIsPosted) {
  auto out = run_processes(2, small_slots(), [&](int rank, Transport& t) {
    const int peer = 1 - rank;
    for (size_t bytes : {size_t{8}, size_t{1000}}) {
      std::vector<std::byte> mine(bytes, static_cast<std::byte>(rank + 1)), theirs(bytes);
      wait_all(t, {t.isend(peer, mine.data(), bytes)}, in(10s));
      std::fill(mine.begin(), mine.end(), std::byte{0});  // src is free once the send completed
      wait_all(t, {t.irecv(peer, theirs.data(), bytes, nullptr)}, in(10s));
      for (std::byte b : theirs)
        require(b == static_cast<std::byte>(peer + 1), "wrong byte from peer ", peer);
    }
  });
  expect_all_ok(out);
}

// A size mismatch is Error(mismatch) on the receiver and on the sender. The
// sender's eager send has completed by then, so the sender learns of the
// mismatch at its next call: here a receive from the refusing peer.
TEST(ShmTransport, SizeMismatchFailsBothSides) {
  auto out = run_processes(2, small_slots(), [&](int rank, Transport& t) {
    std::vector<std::byte> buf(200);
    try {
      if (rank == 0) {
        wait_all(t, {t.isend(1, buf.data(), 100)}, in(10s));
        wait_all(t, {t.irecv(1, buf.data(), 8, nullptr)}, in(10s));
      } else {
        wait_all(t, {t.irecv(0, buf.data(), 200, nullptr)}, in(10s));
      }
    } catch (const Error& e) {
      require(e.code() == ErrorCode::mismatch, "expected mismatch, got ", to_string(e.code()), ": ",
              e.what());
      require(std::string(e.what()).find("100") != std::string::npos &&
                  std::string(e.what()).find("200") != std::string::npos,
              "message should name both sizes: ", e.what());
      return;
    }
    require(false, "no error raised for a 100 B send into a 200 B receive");
  });
  expect_all_ok(out);
}

// A rank killed with SIGKILL makes the ranks waiting for it fail with
// peer_failure well before their 5 s deadline, and leaves no /dev/shm entry.
TEST(ShmTransport, KilledPeerIsPeerFailure) {
  auto out = run_processes(3, small_slots(), [&](int rank, Transport& t) {
    if (rank == 2) ::raise(SIGKILL);
    std::vector<std::byte> buf(64);
    try {
      wait_all(t, {t.irecv(2, buf.data(), buf.size(), nullptr)}, in(5s));
    } catch (const Error& e) {
      require(e.code() == ErrorCode::peer_failure, "expected peer_failure, got ",
              to_string(e.code()), ": ", e.what());
      require(std::string(e.what()).find("peer 2") != std::string::npos,
              "message should name peer 2: ", e.what());
      return;
    }
    require(false, "receive from a killed peer completed");
  });
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(WIFSIGNALED(out[2].status) && WTERMSIG(out[2].status) == SIGKILL);
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(WIFEXITED(out[r].status) && WEXITSTATUS(out[r].status) == 0)
        << "rank " << r << ": " << out[r].message;
  for (const auto& c : out) EXPECT_TRUE(shm_entries_of(c.pid).empty());
}

// abort() on one rank fails its peers with peer_failure carrying the reason.
// The ranks acknowledge each other through the store: rank 0 aborts once
// both peers wait for it, and lives on until both have failed, so that they
// learn of the abort from the flag, not from its process exiting.
TEST(ShmTransport, AbortReachesPeers) {
  constexpr int n = 3;
  auto out = run_forked(n, [&](int rank, Store& store) {
    ShmOptions opt = small_slots();
    opt.deadline = Clock::now() + 30s;
    auto t = make_shm_transport(store, rank, n, opt);
    if (rank == 0) {
      for (int q = 1; q < n; ++q) store.get(str_cat("waiting/", q), in(30s));
      t->abort(ErrorCode::internal, "allreduce(ring): injected failure");
      for (int q = 1; q < n; ++q) store.get(str_cat("judged/", q), in(30s));
      return;
    }
    // Tells rank 0 that this rank is done, however it leaves.
    struct Judged {
      Store& store;
      int rank;
      ~Judged() {
        try {
          store.set(str_cat("judged/", rank), {1});
        } catch (const Error&) {
          // Rank 0 then times out waiting, and reports it.
        }
      }
    } judged{store, rank};
    std::vector<std::byte> buf(64);
    const RequestId id = t->irecv(0, buf.data(), buf.size(), nullptr);
    store.set(str_cat("waiting/", rank), {1});
    try {
      wait_all(*t, {id}, in(5s));
    } catch (const Error& e) {
      require(e.code() == ErrorCode::peer_failure, "expected peer_failure: ", e.what());
      require(std::string(e.what()).find("injected failure") != std::string::npos,
              "reason missing: ", e.what());
      return;
    }
    require(false, "receive from an aborted peer completed");
  });
  expect_all_ok(out);
}

// A deadline that passes makes wait_some return with nothing; the transport
// is still usable afterwards.
TEST(ShmTransport, DeadlinePassingReturnsEmpty) {
  auto out = run_processes(2, small_slots(), [&](int rank, Transport& t) {
    uint64_t value = 0, go = 1;
    if (rank == 0) {
      const RequestId r = t.irecv(1, &value, sizeof value, nullptr);
      std::vector<RequestId> done;
      t.wait_some(done, in(200ms));
      require(done.empty(), "wait_some completed a receive nobody sent");
      wait_all(t, {t.isend(1, &go, sizeof go), r}, in(10s));
      require(value == 42, "wrong value ", value);
    } else {
      wait_all(t, {t.irecv(0, &go, sizeof go, nullptr)}, in(10s));
      value = 42;
      wait_all(t, {t.isend(0, &value, sizeof value)}, in(10s));
    }
  });
  expect_all_ok(out);
}

// A peer that destroys its transport while this rank still expects a message
// from it is a peer_failure, even though its process lives on.
TEST(ShmTransport, ClosedPeerIsPeerFailure) {
  auto out = run_processes(2, small_slots(), [&](int rank, Transport& t) {
    if (rank == 1) return;  // the transport is destroyed on return
    std::vector<std::byte> buf(8);
    try {
      wait_all(t, {t.irecv(1, buf.data(), buf.size(), nullptr)}, in(5s));
    } catch (const Error& e) {
      require(e.code() == ErrorCode::peer_failure, "expected peer_failure: ", e.what());
      return;
    }
    require(false, "receive from a closed peer completed");
  });
  expect_all_ok(out);
}

TEST(ShmTransport, BadArgumentsAreRejected) {
  char templ[] = "/tmp/chorus-shm-test-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  FileStore store(templ);
  ShmOptions o;
  EXPECT_THROW(make_shm_transport(store, 2, 2, o), Error);
  o.slot_bytes = 100;  // not a multiple of a cache line
  EXPECT_THROW(make_shm_transport(store, 0, 2, o), Error);
  o = ShmOptions{};
  o.slots = 1;
  EXPECT_THROW(make_shm_transport(store, 0, 2, o), Error);
  // A group of one needs no peer and no segment.
  auto t = make_shm_transport(store, 0, 1, ShmOptions{});
  EXPECT_THROW(t->isend(0, nullptr, 0), Error);
  fs::remove_all(templ);
}

// ---------------------------------------------------------------------------
// End to end: communicators over shm in forked processes run the collective
// grid exactly.

// must_serve: the algorithm has to accept some case at this N (power-of-two
// algorithms, for one, decline N = 3).
void run_grid_over_shm(int n, Collective c, const std::string& algorithm, bool large,
                       bool must_serve = true) {
  auto out = run_forked(n, [&](int rank, Store& store) {
    Config config;
    config.timeout = 60'000ms;
    ShmOptions opt;
    opt.spin = config.spin;
    opt.deadline = Clock::now() + 30s;
    Communicator comm = make_communicator(make_shm_transport(store, rank, n, opt), config);
    std::vector<test::GridCase> served;
    const Algorithm* a = find_algorithm(c, algorithm);
    require(a != nullptr, "no algorithm ", algorithm);
    auto cases = test::grid_cases(c, n, large);
    if (test::needs_windows(*a)) cases = test::with_window_buffers(cases);
    for (const auto& g : cases)
      if (supports(*a, test::case_spec(comm, g))) served.push_back(g);
    require(!must_serve || !served.empty(), algorithm, " serves no case of the grid");
    const auto errors = test::run_grid(comm, served, algorithm);
    require(errors.empty(), errors.size(),
            " mismatches, first: ", errors.empty() ? "" : errors.front());
  });
  expect_all_ok(out);
}

TEST(ShmGrid, RingAllreduceTwoProcesses) {
  run_grid_over_shm(2, Collective::allreduce, "ring", true);
}
TEST(ShmGrid, RingAllreduceThreeProcesses) {
  run_grid_over_shm(3, Collective::allreduce, "ring", true);
}
TEST(ShmGrid, RingAllreduceFourProcesses) {
  run_grid_over_shm(4, Collective::allreduce, "ring", true);
}
// The one-sided algorithms at N = 1 to 5 and 8 (every N up to one past a
// power of two, odd and even, and the largest), over ordinary buffers
// (staged through the staging window) and over buffers in shared windows,
// with the large case at N = 2 and N = 5.
TEST(ShmGrid, OneSidedAlgorithmsOneToEightProcesses) {
  for (const Algorithm& a : all_algorithms()) {
    if (!test::needs_windows(a)) continue;
#ifdef CHORUS_REDUCED_GRIDS  // sanitizer builds: fewer rank counts, one large case
    for (int n : {1, 2, 3, 5}) {
      const bool large = n == 2;
#else
    for (int n : {1, 2, 3, 4, 5, 8}) {
      const bool large = n == 2 || n == 5;
#endif
      SCOPED_TRACE(str_cat(to_string(a.collective), "(", a.name, ") N=", n));
      run_grid_over_shm(n, a.collective, std::string(a.name), large);
    }
  }
}

// Every registered algorithm over shm at N = 2, 3, 4 (and 8, reduced), with
// the large case, is tests/multiprocess's multiprocess_grid_shm_N*, through
// chorus-run and init_from_env(); the one-sided ones over windows are above.

}  // namespace
}  // namespace chorus
