// calibrate_model over in-process ranks (threads): where the transport shares
// memory, a flag ping-pong between ranks 0 and 1 fits the link's flag_alpha,
// the same on every rank (the others wait for it); where it does not, or
// where a rank cannot map the window, flag_alpha stays unfitted. The times are this host's, under
// whatever load it has: only what holds whatever they are is asserted.
#include "tune/calibration.h"

#include "transport/forwarding_transport.h"
#include "transport/inproc/inproc_transport.h"
#include "transport/window.h"
#include "tune/tuning_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace chorus {
namespace {

// A small calibration: few sizes, small kernels and memory probe, no
// warm-up.
ModelCalibrationOptions small_options() {
  ModelCalibrationOptions o;
  o.pingpong_sizes = {8, 512, 4096, 65536};
  o.kernel_sizes = {4096};
  o.small_trials = 5;
  o.large_trials = 2;
  o.memory_bytes = size_t{1} << 20;
  o.warmup = std::chrono::milliseconds(0);
  return o;
}

// The transport it wraps, altered: sharing no memory (as tcp between ranks of
// one host), or sending window records (transport/window.h) that name no file
// (fd -1), which no peer can map (as across PID namespaces).
enum class Alter { none, no_shared_memory, unmappable_records };
class Altered final : public ForwardingTransport {
 public:
  Altered(std::unique_ptr<Transport> t, Alter alter)
      : ForwardingTransport(std::move(t)), alter_(alter) {}
  bool shares_memory() const override {
    return alter_ != Alter::no_shared_memory && inner().shares_memory();
  }
  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    if (alter_ == Alter::unmappable_records && bytes == sizeof(WindowRecord)) {
      WindowRecord r;
      std::memcpy(&r, data, sizeof r);
      if (r.pid == ::getpid() && r.fd >= 0) {
        r.fd = -1;
        data = &records_.emplace_back(r);
      }
    }
    return inner().isend(peer, data, bytes, stamp);
  }

 private:
  Alter alter_;
  std::deque<WindowRecord> records_;  // what the altered sends point at
};

// calibrate_model on n in-process ranks, rank r's transport altered by
// alter(r); every rank's result.
std::vector<ModelCalibration> calibrate_on(int n, const ModelCalibrationOptions& o,
                                           const std::function<Alter(int)>& alter) {
  auto world = make_inproc_world(n);
  std::vector<ModelCalibration> got(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Altered t(make_inproc_transport(world, r, std::chrono::microseconds{50}), alter(r));
      got[static_cast<size_t>(r)] = calibrate_model(t, Clock::now() + std::chrono::seconds(120), o);
    });
  for (auto& th : threads) th.join();
  return got;
}
std::vector<ModelCalibration> calibrate_on(int n, const ModelCalibrationOptions& o,
                                           Alter alter = Alter::none) {
  return calibrate_on(n, o, [alter](int) { return alter; });
}

TEST(Calibration, AFlagPingPongFitsFlagAlphaWhereTheRanksShareMemory) {
  // N = 3: rank 2 helps create the control window, then waits.
  for (int n : {2, 3}) {
    const std::vector<ModelCalibration> got = calibrate_on(n, small_options());
    const LinkParams& link = got[0].table.links.at("inproc");
    EXPECT_TRUE(link.flag_alpha_fitted()) << "N=" << n;
    EXPECT_GT(link.flag_alpha, 0) << "N=" << n;
    EXPECT_TRUE(std::isfinite(link.flag_alpha)) << "N=" << n;
    // In seconds, not a unit off: a flag's round trip is microseconds, and a
    // loaded host's preemptions stretch it to milliseconds, never to 100 ms.
    EXPECT_LT(link.flag_alpha, 0.1) << "N=" << n;
    for (int r = 1; r < n; ++r)
      EXPECT_EQ(got[static_cast<size_t>(r)].table.links.at("inproc").flag_alpha, link.flag_alpha)
          << "rank " << r << " of " << n;
    // The tuning file carries it.
    const TuningTable back = tuning_from_json(tuning_to_json(got[0].table), "calibrated");
    EXPECT_EQ(back.links.at("inproc").flag_alpha, link.flag_alpha);
  }
}

TEST(Calibration, TheFlagPingPongEndsAtItsBudget) {
  // More round trips than its budget allows (minutes of them): the probe
  // stops at the budget, and still fits flag_alpha.
  ModelCalibrationOptions o = small_options();
  o.flag_round_trips = INT_MAX;
  o.flag_budget = std::chrono::milliseconds(2);
  const std::vector<ModelCalibration> got = calibrate_on(2, o);
  const LinkParams& link = got[0].table.links.at("inproc");
  EXPECT_TRUE(link.flag_alpha_fitted());
  EXPECT_GT(link.flag_alpha, 0);
  EXPECT_LT(got[0].seconds, 60);
}

TEST(Calibration, WithoutSharedMemoryFlagAlphaStaysUnfitted) {
  const std::vector<ModelCalibration> got =
      calibrate_on(2, small_options(), Alter::no_shared_memory);
  const LinkParams& link = got[0].table.links.at("inproc");
  EXPECT_FALSE(link.curve.empty());  // the rest was fitted
  EXPECT_FALSE(link.flag_alpha_fitted());
  EXPECT_EQ(link.one_sided_alpha(), link.alpha);
  EXPECT_EQ(tuning_to_json(got[0].table).find("flag_alpha_s"), std::string::npos);
}

TEST(Calibration, AWindowThatCannotBeMappedLeavesFlagAlphaUnfittedOnEveryRank) {
  // Rank 1's records name no file: rank 0 (N = 2), or ranks 0 and 2 (N = 3),
  // cannot map its part of the control window, while rank 1 maps theirs.
  // The calibration still completes on every rank, alike, without flag_alpha.
  for (int n : {2, 3}) {
    const std::vector<ModelCalibration> got = calibrate_on(
        n, small_options(), [](int r) { return r == 1 ? Alter::unmappable_records : Alter::none; });
    const LinkParams& link = got[0].table.links.at("inproc");
    EXPECT_FALSE(link.curve.empty()) << "N=" << n;
    EXPECT_FALSE(link.flag_alpha_fitted()) << "N=" << n;
    for (int r = 1; r < n; ++r)
      EXPECT_EQ(tuning_to_json(got[static_cast<size_t>(r)].table), tuning_to_json(got[0].table))
          << "rank " << r << " of " << n;
  }
}

}  // namespace
}  // namespace chorus
