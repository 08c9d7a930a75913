// The public API: argument checks, asynchronous work, failure propagation.
#include "engine/communicator_impl.h"
#include "transport/inproc/inproc_transport.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using testing::run_ranks;

// Runs fn on every rank of a 3-rank group and expects each call to throw
// invalid_argument mentioning `what`.
void expect_invalid(const std::function<void(Communicator&)>& fn, const std::string& what) {
  std::atomic<int> caught{0};
  run_ranks(3, [&](Communicator& comm) {
    try {
      fn(comm);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      ++caught;
      return;
    }
    ADD_FAILURE() << "no error on rank " << comm.rank();
  });
  EXPECT_EQ(caught.load(), 3);
}

TEST(Api, NullBufferWithCount) {
  std::vector<float> v(4);
  expect_invalid(
      [&](Communicator& c) { c.allreduce(nullptr, v.data(), 4, DataType::float32, ReduceOp::sum); },
      "send buffer is null");
  expect_invalid([&](Communicator& c) { c.allgather(v.data(), nullptr, 1, DataType::float32); },
                 "recv buffer is null");
}

TEST(Api, NullBuffersWithZeroCountAreFine) {
  run_ranks(3, [](Communicator& c) {
    c.allreduce(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum);
    c.broadcast(nullptr, nullptr, 0, DataType::int8, 1);
  });
}

TEST(Api, RootOutOfRange) {
  std::vector<float> v(4);
  expect_invalid([&](Communicator& c) { c.broadcast(v.data(), v.data(), 4, DataType::float32, 3); },
                 "root 3 outside [0, 3)");
  expect_invalid(
      [&](Communicator& c) {
        c.reduce(v.data(), v.data(), 4, DataType::float32, ReduceOp::sum, -1);
      },
      "root -1");
}

TEST(Api, EnumValuesOutsideTheEnum) {
  std::vector<float> v(4);
  expect_invalid(
      [&](Communicator& c) {
        c.allreduce(v.data(), v.data(), 4, static_cast<DataType>(42), ReduceOp::sum);
      },
      "invalid DataType value 42");
  expect_invalid(
      [&](Communicator& c) {
        c.allreduce(v.data(), v.data(), 4, DataType::float32, static_cast<ReduceOp>(-3));
      },
      "invalid ReduceOp value -3");
}

TEST(Api, OverlapThatIsNotInPlace) {
  std::vector<float> v(16);
  expect_invalid(
      [&](Communicator& c) {
        c.allreduce(v.data(), v.data() + 1, 4, DataType::float32, ReduceOp::sum);
      },
      "not the in-place form");
  // allgather in place means send == recv + rank * count; recv itself is not.
  expect_invalid(
      [&](Communicator& c) {
        c.allgather(v.data() + (c.rank() + 1) % 3, v.data(), 1, DataType::float32);
      },
      "not the in-place form");
}

TEST(Api, UnknownAlgorithmListsTheKnownOnes) {
  std::vector<float> v(4);
  expect_invalid(
      [&](Communicator& c) {
        CallOptions o;
        o.algorithm = "warp_drive";
        c.allreduce(v.data(), v.data(), 4, DataType::float32, ReduceOp::sum, o);
      },
      "unknown algorithm 'warp_drive'; known: ring");
}

TEST(Api, NoBytesMoveBeforeTheCheck) {
  // A bad call on every rank leaves the communicator usable.
  run_ranks(2, [](Communicator& c) {
    std::vector<int32_t> v(4, c.rank() + 1);
    EXPECT_THROW(c.broadcast(v.data(), v.data(), 4, DataType::int32, 7), Error);
    c.allreduce(v.data(), v.data(), 4, DataType::int32, ReduceOp::sum);
    EXPECT_EQ(v, (std::vector<int32_t>(4, 3)));
  });
}

TEST(Api, AsyncOperationsCompleteInIssueOrder) {
  run_ranks(4, [](Communicator& c) {
    constexpr int kOps = 6;
    std::vector<std::vector<int64_t>> bufs(kOps);
    std::vector<Work> work;
    for (int i = 0; i < kOps; ++i) {
      bufs[static_cast<size_t>(i)].assign(static_cast<size_t>(1000 + i * 517), c.rank() * 10 + i);
      work.push_back(c.allreduce_async(
          bufs[static_cast<size_t>(i)].data(), bufs[static_cast<size_t>(i)].data(),
          bufs[static_cast<size_t>(i)].size(), DataType::int64, ReduceOp::sum));
    }
    // Wait out of order; each must hold its own sum.
    for (int i = kOps - 1; i >= 0; --i) work[static_cast<size_t>(i)].wait();
    for (int i = 0; i < kOps; ++i)
      for (int64_t x : bufs[static_cast<size_t>(i)]) ASSERT_EQ(x, 60 + 4 * i);
    EXPECT_TRUE(work[0].done());
  });
}

TEST(Api, DonePollsToCompletion) {
  run_ranks(2, [](Communicator& c) {
    std::vector<float> v(100000, 1.0f);
    Work w = c.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!w.done()) ASSERT_LT(std::chrono::steady_clock::now(), end);
    w.wait();
    EXPECT_EQ(v[99999], 1.0f);
  });
}

TEST(Api, FailingRankMakesPeersFailFast) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_ranks(4, [](Communicator& c) {
      if (c.rank() == 2) throw std::runtime_error("rank two gives up");
      std::vector<float> v(16);
      c.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    });
    FAIL() << "run_ranks should rethrow";
  } catch (const Error& e) {
    FAIL() << "the first exception is rank 2's, got: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank two gives up");
  }
  // Far below the 300 s default timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Api, PeersSeePeerFailure) {
  std::atomic<int> peer_failures{0};
  EXPECT_THROW(run_ranks(3,
                         [&](Communicator& c) {
                           if (c.rank() == 0) throw std::logic_error("boom");
                           std::vector<float> v(16);
                           try {
                             c.allreduce(v.data(), v.data(), v.size(), DataType::float32,
                                         ReduceOp::sum);
                           } catch (const Error& e) {
                             if (e.code() == ErrorCode::peer_failure) ++peer_failures;
                             throw;
                           }
                         }),
               std::logic_error);
  EXPECT_EQ(peer_failures.load(), 2);
}

TEST(Api, PerCallTimeout) {
  std::atomic<int> timeouts{0};
  EXPECT_THROW(
      run_ranks(2,
                [&](Communicator& c) {
                  if (c.rank() == 1) {
                    // Rank 1 is late (but alive) for longer than rank 0 waits.
                    std::this_thread::sleep_for(std::chrono::milliseconds(300));
                    return;
                  }
                  std::vector<float> v(4);
                  CallOptions o;
                  o.timeout = std::chrono::milliseconds(50);
                  o.algorithm = "ring";  // named: the tuner would pick otherwise
                  try {
                    c.allreduce(v.data(), v.data(), 4, DataType::float32, ReduceOp::sum, o);
                  } catch (const Error& e) {
                    if (e.code() == ErrorCode::timeout) ++timeouts;
                    EXPECT_NE(std::string(e.what()).find("allreduce(ring)"), std::string::npos)
                        << e.what();
                    throw;
                  }
                }),
      Error);
  EXPECT_EQ(timeouts.load(), 1);
}

TEST(Api, AvgOfIntegersTruncates) {
  run_ranks(3, [](Communicator& c) {
    std::vector<int32_t> v{c.rank(), 2, -c.rank()};
    c.allreduce(v.data(), v.data(), 3, DataType::int32, ReduceOp::avg);
    EXPECT_EQ(v, (std::vector<int32_t>{1, 2, -1}));  // 3/3, 6/3, -3/3
    std::vector<int32_t> w{c.rank() == 0 ? 2 : 0};
    c.allreduce(w.data(), w.data(), 1, DataType::int32, ReduceOp::avg);
    EXPECT_EQ(w[0], 0);  // 2/3 truncates
  });
}

TEST(Api, BitwiseOperatorsCombineIntegersAndRefuseFloats) {
  run_ranks(3, [](Communicator& c) {
    // Rank r holds bit r and bit 4, so and keeps bit 4, or has bits 0-2 and
    // 4, xor has bits 0-2 (bit 4 three times).
    const auto mine = static_cast<uint16_t>((1u << c.rank()) | 0x10u);
    std::vector<uint64_t> wide{mine, uint64_t{mine} << 48};
    c.allreduce(wide.data(), wide.data(), 2, DataType::uint64, ReduceOp::bor);
    EXPECT_EQ(wide, (std::vector<uint64_t>{0x17, uint64_t{0x17} << 48}));
    int8_t narrow = static_cast<int8_t>(mine | 0x80u);
    c.allreduce(&narrow, &narrow, 1, DataType::int8, ReduceOp::band);
    EXPECT_EQ(static_cast<uint8_t>(narrow), 0x90u);
    int32_t x = mine;
    c.allreduce(&x, &x, 1, DataType::int32, ReduceOp::bxor);
    EXPECT_EQ(x, 0x17);
    float f = 1;
    try {
      c.allreduce(&f, &f, 1, DataType::float32, ReduceOp::band);
      ADD_FAILURE() << "band of float32 was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("ReduceOp band applies to integer types only, not "
                                           "float32"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(f, 1.0f);  // refused before any byte moved
  });
}

TEST(Api, GatherAndScatterAtEveryRootInPlaceAndNot) {
  run_ranks(5, [](Communicator& c) {
    const int n = c.size();
    for (int root = 0; root < n; ++root) {
      std::vector<int32_t> mine{c.rank() * 10 + root, -c.rank()};
      std::vector<int32_t> all(2 * static_cast<size_t>(n), -1);
      c.gather(mine.data(), c.rank() == root ? all.data() : nullptr, 2, DataType::int32, root);
      for (int j = 0; c.rank() == root && j < n; ++j) {
        EXPECT_EQ(all[2 * static_cast<size_t>(j)], j * 10 + root);
        EXPECT_EQ(all[2 * static_cast<size_t>(j) + 1], -j);
      }
      // In place on the root: its block already lies in the gathered buffer.
      if (c.rank() == root) {
        std::fill(all.begin(), all.end(), -1);
        std::copy(mine.begin(), mine.end(), all.begin() + 2 * root);
        c.gather(all.data() + 2 * root, all.data(), 2, DataType::int32, root);
        for (int j = 0; j < n; ++j) EXPECT_EQ(all[2 * static_cast<size_t>(j)], j * 10 + root);
      } else {
        c.gather(mine.data(), nullptr, 2, DataType::int32, root);
      }
      // Scatter the gathered blocks back, once out of place, once in place.
      std::vector<int32_t> back(2, 0);
      c.scatter(c.rank() == root ? all.data() : nullptr, back.data(), 2, DataType::int32, root);
      EXPECT_EQ(back, mine);
      if (c.rank() == root) {
        c.scatter(all.data(), all.data() + 2 * root, 2, DataType::int32, root);
        EXPECT_EQ(all[2 * static_cast<size_t>(root)], root * 10 + root);
      } else {
        std::fill(back.begin(), back.end(), 0);
        c.scatter_async(nullptr, back.data(), 2, DataType::int32, root).wait();
        EXPECT_EQ(back, mine);
      }
    }
  });
}

// A one-rank communicator of this thread's own, outside run_ranks.
Communicator solo() {
  return make_communicator(
      make_inproc_transport(make_inproc_world(1), 0, std::chrono::microseconds{0}), Config{});
}

TEST(Api, AWorkThatOutlivesItsCommunicatorIsAnError) {
  std::vector<float> v(8, 1.0f);
  Work pending;
  {
    Communicator comm = solo();
    pending = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
  }
  for (int i = 0; i < 2; ++i) {
    try {
      if (i == 0)
        pending.wait();
      else
        pending.done();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("Communicator has been destroyed"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(Work().wait(), Error);
}

TEST(Api, AMovedFromCommunicatorIsAnError) {
  Communicator first = solo();
  Communicator second = std::move(first);
  std::vector<int32_t> v(4, 7);
  EXPECT_THROW((void)first.rank(), Error);
  try {
    first.allreduce(v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << e.what();
  }
  second.allreduce(v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum);
  EXPECT_EQ(v, std::vector<int32_t>(4, 7));
}

TEST(Api, TimeoutsOfAThousandYearsWork) {
  run_ranks(2, [](Communicator& comm) {
    CallOptions forever;
    forever.timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365) * 1000);
    std::vector<float> v(16, 1.0f);
    comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum, forever);
    EXPECT_EQ(v[0], 2.0f);
    forever.timeout = std::chrono::milliseconds::max();
    comm.barrier(forever);
  });
}

TEST(Api, ScratchThatCannotBeAllocatedIsAnErrorNamingTheSize) {
  // 2^50 bytes (a PiB) is more than any machine here has.
  detail::ScratchPool pool;
  try {
    pool.take(size_t{1} << 50);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::system) << e.what();
    EXPECT_NE(std::string(e.what()).find("1125899906842624 bytes of scratch"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(pool.take(64).data, nullptr);
}

// Both ranks block on a receive the other never sends; a second thread of
// rank 0 aborts. Rank 0's call raises aborted with the reason, and rank 1's
// names rank 0 and the reason: neither waits for the (long) timeout.
TEST(Api, AbortFromAnotherThreadEndsABlockedCallOnEveryRank) {
  std::vector<std::string> errors(2);
  std::vector<ErrorCode> codes(2, ErrorCode::internal);
  run_ranks(2, [&](Communicator& comm) {
    CallOptions patient;
    patient.timeout = std::chrono::minutes(10);
    std::thread aborter;
    if (comm.rank() == 0)
      aborter = std::thread([&comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        comm.abort("operator pressed stop");
      });
    float x = 0;
    try {
      comm.recv(&x, 1, DataType::float32, 1 - comm.rank(), patient);
      ADD_FAILURE() << "rank " << comm.rank() << ": no error";
    } catch (const Error& e) {
      codes[static_cast<size_t>(comm.rank())] = e.code();
      errors[static_cast<size_t>(comm.rank())] = e.what();
    }
    if (aborter.joinable()) aborter.join();
    // Later calls raise it too.
    EXPECT_THROW(comm.barrier(), Error);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], ErrorCode::aborted) << errors[static_cast<size_t>(r)];
    EXPECT_NE(errors[static_cast<size_t>(r)].find("operator pressed stop"), std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
  EXPECT_NE(errors[1].find("peer 0 aborted"), std::string::npos) << errors[1];
}

TEST(Api, AbortWithNoCallInFlightReachesThePeers) {
  std::vector<std::string> errors(3);
  run_ranks(3, [&](Communicator& comm) {
    if (comm.rank() == 2) comm.abort("rank 2 is done");
    std::vector<int32_t> v(8, 1);
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum);
      ADD_FAILURE() << "rank " << comm.rank() << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
      errors[static_cast<size_t>(comm.rank())] = e.what();
    }
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("rank 2 is done"), std::string::npos) << e;
}

TEST(Api, TheFlightRecordHoldsTheLast64Calls) {
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(32, 1.0f);
    for (int i = 0; i < 70; ++i)
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::max);
    if (comm.rank() == 0) comm.send(v.data(), 5, DataType::float32, 1);
    if (comm.rank() == 1) comm.recv(v.data(), 5, DataType::float32, 0);
    const auto record = nlohmann::json::parse(comm.flight_record());
    EXPECT_EQ(record["rank"], comm.rank());
    EXPECT_EQ(record["size"], 2);
    const auto& calls = record["calls"];
    ASSERT_EQ(calls.size(), 64u);
    EXPECT_EQ(calls.front()["seq"], 7);  // 71 calls, the first 7 gone
    EXPECT_EQ(calls.back()["seq"], 70);
    const auto& last_allreduce = calls[calls.size() - 2];
    EXPECT_EQ(last_allreduce["call"], "allreduce");
    EXPECT_FALSE(last_allreduce["algorithm"].get<std::string>().empty());
    EXPECT_EQ(last_allreduce["dtype"], "float32");
    EXPECT_EQ(last_allreduce["op"], "max");
    EXPECT_EQ(last_allreduce["count"], 32);
    EXPECT_EQ(last_allreduce["state"], "done");
    EXPECT_GE(last_allreduce["end_us"].get<double>(), last_allreduce["start_us"].get<double>());
    EXPECT_EQ(calls.back()["call"], comm.rank() == 0 ? "send to peer" : "recv from peer");
    EXPECT_EQ(calls.back()["peer"], 1 - comm.rank());
    EXPECT_EQ(calls.back()["count"], 5);
  });
}

TEST(Api, AFailedCallIsWrittenToTheFlightRecorderDirectory) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("chorus_flight_" + std::to_string(::getpid())))
          .string();
  setenv("CHORUS_FLIGHT_RECORDER", dir.c_str(), 1);
  run_ranks(2, [](Communicator& comm) {
    if (comm.rank() == 1) return;  // never sends: rank 0's receive fails
    float x;
    CallOptions quick;
    quick.timeout = std::chrono::milliseconds(200);
    EXPECT_THROW(comm.recv(&x, 1, DataType::float32, 1, quick), Error);
  });
  unsetenv("CHORUS_FLIGHT_RECORDER");
  std::ifstream in(dir + "/chorus-flight-rank0.json");
  ASSERT_TRUE(in.good()) << "no flight record in " << dir;
  const auto record = nlohmann::json::parse(in);
  const auto& call = record["calls"].back();
  EXPECT_EQ(call["call"], "recv from peer");
  EXPECT_EQ(call["state"], "failed");
  EXPECT_NE(call["pending"].get<std::string>().find("recv from peer 1"), std::string::npos)
      << call.dump();
  EXPECT_FALSE(call["error"].get<std::string>().empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chorus
