// The tuner that learns: it times the calls it runs and keeps, per call
// class, the algorithm that was fastest on this machine, rather than trusting
// the fitted model's ranking alone.
//
// A call class is (collective, dtype, op, size class, buffer kind) on one
// communicator (so also one N and link class): LearnKey. For each class:
//
//   calls 0 .. start-1     the model's pick (a class called rarely keeps it)
//   exploring              rounds over the candidates: the model's pick and
//                          those predicted within `within` of the best (the
//                          next best always, min_candidates in all: the
//                          model's errors reach 2x here), at most
//                          max_candidates. Round 0 warms each one up
//                          (its Program, its first pages); rounds 1 .. R are
//                          timed. Within round r the candidates run rotated
//                          by r, so the order is a function of the class's
//                          call number alone, the same on every rank. Each
//                          visit of a candidate is `burst` calls in a row,
//                          the first not timed: it pays for what the
//                          candidate before left behind (ranks out of step,
//                          a one-sided algorithm's last completions).
//     after round D        agreement (D = drop_after): each candidate's
//                          least time so far (maximum over ranks); one
//                          slower than `drop` x the best is dropped, and the
//                          rounds left are cut to what the budget allows
//                          (below)
//     after round R        agreement: each candidate's typical time, the
//                          mean of its samples without the largest (maximum over
//                          ranks); the winner is the least, a later candidate
//                          replacing an earlier one only when `margin`
//                          faster
//   decided                the winner; its times are watched, and at the
//                          class's calls decided+16, +32, +64, ... (gaps
//                          doubling to 1024) the ranks agree on the typical time of
//                          its last `watch` times: one that moved more than
//                          `drift` x from the learned time explores again.
//
// Agreement is one exchange of a few doubles per decision
// (CommunicatorImpl::learn_agree: every rank's figures, maximum over ranks),
// made at the same call of the class on every rank, so decisions never
// diverge; the figures are of this rank's own calls, so one slow rank makes
// a candidate slow for all (the call's time is its slowest rank's).
//
// Budget: the exploration's cost over the eventual winner, counted from the
// agreed times after round D (rounds 0 .. D spent, each later round the sum
// of the survivors' excess, `burst` calls each), is held to `budget` x the winner's time x
// budget_calls (5% of the class's first 1,000 calls); the rounds left are cut
// to fit, and with none left the class decides at once.
//
// The learner is pure state: it never touches a transport or a clock. Its
// caller times calls (record) and carries the agreements out (figures, then
// agree with the maximum over ranks). So tests drive it with timings of
// their choosing, and the decision for given timings is deterministic.
#pragma once

#include "algorithms/algorithm.h"
#include "tune/tuning_file.h"

#include <chorus/types.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus {

struct LearnKey {
  Collective collective = Collective::allreduce;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int size_class = 0;  // size_class_of(the call's bytes)
  bool window_buffers = false;
  auto operator<=>(const LearnKey&) const = default;
};

// ceil(log2(bytes)); 0 for 0 and 1 byte: classes of a factor of 2.
int size_class_of(size_t bytes);

// "allreduce float32 sum 2^20 B user"
std::string describe(const LearnKey& key);

struct LearnSettings {
  int max_candidates = 3;
  double within = 2.0;     // candidates: predicted within this factor of the best,
  int min_candidates = 2;  // and at least this many where there are
  int start = 6;           // calls of a class that run the model's pick first
  int rounds_small = 8;    // timed rounds of a class up to small_class
  int rounds_large = 4;    // and above
  int small_class = 16;    // 64 KiB
  int burst = 2;           // calls of a candidate in a row while exploring
  int drop_after = 2;      // timed rounds before the drop agreement
  double drop = 2.0;       // dropped then when slower than this x the best
  double margin = 0.03;    // a later candidate wins only when this much faster
  double drift = 1.5;      // explore again when the watched time moves this far
  int watch = 16;          // winner times the drift check takes the typical time of
  int first_check = 16;    // class calls after a decision before the first check
  int max_check_gap = 1024;
  double budget = 0.05;     // exploration's cost over the winner, as a share of
  int budget_calls = 1000;  // this many calls of the winner
};

// One algorithm a class may run, with the model's (uncorrected) prediction
// for the call that opened the class.
struct LearnCandidate {
  const Algorithm* algorithm = nullptr;
  double predicted = 0;  // seconds
};

enum class LearnPhase { model, exploring, decided };

// What a call of a class runs, and how its time is to be recorded.
struct LearnStep {
  int candidate = 0;    // index into the class's candidates
  uint64_t ticket = 0;  // pass to record(); 0: the call is not timed
};

// An agreement's kind, as the log names it.
enum class Agreement { none, drop, decide, drift };

class LearnClass {
 public:
  // candidates[0] is the model's pick. `cached`: a decision of an earlier job
  // (from the calibration cache): the class starts decided on it, its first
  // drift check comes `first_check` calls after `start`.
  LearnClass(LearnKey key, std::vector<LearnCandidate> candidates, const LearnSettings& settings,
             const LearnedPick* cached = nullptr);

  const LearnKey& key() const { return key_; }
  const std::vector<LearnCandidate>& candidates() const { return candidates_; }
  LearnPhase phase() const { return phase_; }
  // The winner once decided, else the model's pick.
  const Algorithm& current() const;
  // The last decision (this job's or the cache's), also while the class
  // explores again after a drift; null before any.
  const Algorithm* decision() const {
    return decided_ever_ ? candidates_[static_cast<size_t>(winner_)].algorithm : nullptr;
  }
  double learned_seconds() const { return learned_; }
  uint64_t calls() const { return calls_; }
  int explorations() const { return epoch_; }

  // Whether the ranks must agree before the next call (and what about).
  Agreement due() const;
  // This rank's figures for that agreement (one per candidate; 0 = none).
  std::vector<double> figures() const;
  // The figures' maximum over ranks: the state moves on, identically on
  // every rank. Returns the log line of what was agreed.
  std::string agree(std::span<const double> max_over_ranks);
  // The next call: which candidate, and whether it is timed. Call only when
  // due() is none.
  LearnStep next();
  // A timed call took `seconds` on this rank (any order; stale tickets,
  // of an exploration that has ended, are ignored).
  void record(uint64_t ticket, double seconds);
  // The algorithm a ticket of next() runs.
  const Algorithm& algorithm_of(uint64_t ticket) const;

  // Agreed observations of the last agreement: (candidate, seconds).
  const std::vector<std::pair<int, double>>& observed() const { return observed_; }
  // Whether the last agreement decided the class (a winner, now learned).
  bool decided_now() const { return decided_now_; }

 private:
  void begin_exploring();
  int rounds_for_class() const;
  uint64_t make_ticket(int candidate, int slot) const;

  LearnKey key_;
  std::vector<LearnCandidate> candidates_;
  const LearnSettings& s_;
  LearnPhase phase_ = LearnPhase::model;
  uint64_t calls_ = 0;
  int epoch_ = 0;  // explorations begun; tickets carry it
  // Exploring.
  std::vector<int> alive_;  // candidate indices still in the race
  int round_ = 0, position_ = 0, rounds_ = 0;
  int visit_ = 0;                             // calls of the current visit made
  bool dropped_ = false;                      // the drop agreement happened
  std::vector<std::vector<double>> samples_;  // per candidate, this rank's timed rounds
  // Decided.
  bool decided_ever_ = false;
  int winner_ = 0;
  double learned_ = 0;
  uint64_t next_check_ = 0;
  uint64_t check_gap_ = 0;
  std::vector<double> watched_;  // ring of the winner's last times
  size_t watch_next_ = 0;
  uint64_t watch_skip_until_ = 0;  // calls before this are not watched
  std::vector<std::pair<int, double>> observed_;
  bool decided_now_ = false;
};

// The classes of one communicator, and what they have learned: the winners
// and the model's corrections (ModelCorrection), as the calibration cache
// keeps them.
class Learner {
 public:
  explicit Learner(LearnSettings settings = {}, std::vector<LearnedPick> cached = {},
                   std::vector<ModelCorrection> corrections = {});

  const LearnSettings& settings() const { return settings_; }
  // The class of `key`, made with `candidates()` on its first call; null
  // (and nothing kept) when that gives none.
  LearnClass* at(const LearnKey& key,
                 const std::function<std::vector<LearnCandidate>()>& candidates);
  const std::map<LearnKey, LearnClass>& classes() const { return classes_; }

  // After an agreement of `c`: takes its observations into the corrections
  // and its decision into the learned picks. Returns whether either changed
  // (then the cache is worth writing).
  bool absorb(const LearnClass& c);
  // An observation agreed by every rank outside the classes (chorus-perf's
  // rows of a named algorithm: the maximum over ranks of a mean call time):
  // `seconds` against the model's uncorrected `predicted` goes into the
  // corrections of `algorithm` and of the class. Every rank must make the
  // same observations.
  void observe(const LearnKey& key, std::string_view algorithm, double seconds, double predicted);
  // Every learned pick: this job's decisions over those it started with.
  std::vector<LearnedPick> learned() const;
  const std::vector<ModelCorrection>& corrections() const { return corrections_; }

  // Test hook: replaces each timed call's measured seconds (on this rank)
  // before it is recorded.
  using TimingHook = std::function<double(const LearnKey&, const Algorithm&, double measured)>;
  void set_timing_hook(TimingHook hook) { hook_ = std::move(hook); }
  const TimingHook& timing_hook() const { return hook_; }

 private:
  void correct(const LearnKey& key, const std::string& algorithm, double ratio);

  LearnSettings settings_;
  std::vector<LearnedPick> cached_;
  std::vector<ModelCorrection> corrections_;
  std::map<LearnKey, LearnClass> classes_;
  TimingHook hook_;
};

// The correction factor a table's corrections give a prediction of
// `algorithm` of `collective` on elements of `type` (representative_type)
// in `size_class`: the algorithm's own where observed at the class or on
// both sides of it (interpolated geometrically between the nearest), else
// the size class's, interpolated the same way (the nearest one beyond the
// observed range), else the algorithm's nearest own, else 1.
double correction_factor(std::span<const ModelCorrection> corrections, Collective collective,
                         DataType type, std::string_view algorithm, int size_class);

}  // namespace chorus
