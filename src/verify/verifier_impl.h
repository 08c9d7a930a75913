// The symbolic verifier's one class, shared by the files that implement its
// steps (verifier.h says what it proves). Internal to src/verify:
//
//   verifier.cc            the order of the steps, error messages, verify_programs()
//   verifier_structure.cc  1. structure: regions, deps, root rules, one-sided ops
//   verifier_matching.cc   2. matching of messages and of signals with waits, the
//                          global op graph, the event run and deadlocks (4.)
//   verifier_races.cc      3. layouts, races, the one-sided gets against their
//                          peers' writes
//   verifier_symbolic.cc   5. the symbolic run's content and the result check
//   verifier_stats.cc      the per-rank counts (RankStats)
//
// A problem found anywhere is thrown as a Failure and caught in
// verify_programs(), the first one found being the one reported.
#pragma once

#include "schedule/collective.h"
#include "schedule/matching.h"
#include "schedule/program.h"
#include "verify/happens_before.h"
#include "verify/race_check.h"
#include "verify/rank_set.h"
#include "verify/symbolic_memory.h"
#include "verify/verifier.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus::verify_internal {

using SetId = RankSetPool::Id;
inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// Thrown inside the verifier only, to unwind to verify_programs() with the
// first problem found; never leaves src/verify.
struct Failure {
  VerifyError error;
};

// Where an op is in an event run (Verifier::run_events).
enum class OpState : uint8_t {
  not_started,  // its deps, channel predecessor or signal are not done yet
  started,      // a message op that waits for its partner to start
  completed,
};

class Verifier {
 public:
  Verifier(const CollectiveSpec& spec, std::span<const Program> programs, std::string_view name,
           VerifyResult& result)
      : spec_(spec), programs_(programs), name_(name), result_(result), pool_(spec.nranks) {}

  // Runs every check; throws Failure at the first problem.
  void run();

 private:
  // The memory of every rank under one layout.
  struct World {
    bool in_place = false;
    std::vector<Layout> layouts;
    std::vector<std::unique_ptr<SymbolicMemory>> memory;
    std::optional<OpRef> poison;  // first op that reduced undefined data
  };

  // ---- messages (verifier.cc) ----
  std::string context() const;
  const Op& op_at(int r, OpIndex i) const { return programs_[static_cast<size_t>(r)].ops[i]; }
  VerifyError error(VerifyErrorKind kind, int rank, OpIndex op, const std::string& what) const;
  [[noreturn]] void fail(VerifyErrorKind kind, int rank, OpIndex op, const std::string& what);
  CollectiveSpec rank_spec(int r) const {
    CollectiveSpec s = spec_;
    s.rank = r;
    return s;
  }

  // ---- 1. structure (verifier_structure.cc) ----
  void check_region(int r, OpIndex i, const Region& region, const Program& p, const char* role);
  void check_one_sided(int r, OpIndex i, const Op& o);
  void check_stamp_checks(int r);
  void check_staging(int r, size_t at, size_t count, const char* what);
  void check_structure(int r);
  void check_cycles(int r);
  void check_remote_regions(int r);
  Region remote_region(const Op& o) const;
  std::string remote_name(const Op& o) const;

  // ---- 2. matching, the op graph, the event run (verifier_matching.cc) ----
  void match();
  void number_ops();
  uint32_t global(int r, OpIndex i) const {
    return static_cast<uint32_t>(base_[static_cast<size_t>(r)] + i);
  }
  OpIndex local(uint32_t g) const { return static_cast<OpIndex>(g - base_[rank_of_[g]]); }
  void match_flags();
  void build_graph();
  void order_ops();
  size_t run_events(bool data, bool eager, bool timing);
  [[noreturn]] void report_deadlock(size_t done);

  // ---- 3. layouts and races (verifier_races.cc) ----
  bool in_place_exists() const;
  Layout layout_for(int r, bool in_place) const;
  void set_layout_name(bool in_place) { layout_name_ = in_place ? "in_place" : "out_of_place"; }
  void check_races(bool in_place);
  void check_unordered_races();
  void check_remote_reads(bool with_in_place);

  // ---- 5. the symbolic run and the result (verifier_symbolic.cc) ----
  // Content divided by N (the average) carries kAveraged on its set id; rank
  // set ids are far below it.
  static constexpr RankSetPool::Id kAveraged = 1u << 30;
  static bool averaged(RankSetPool::Id set) {
    return set != RankSetPool::kUndefined && (set & kAveraged) != 0;
  }
  std::string content(const Segment& s, size_t k) const;
  void combine(int r, OpIndex op, const Region& dst, const Segments& a, const Segments& b,
               Segments& out);
  void apply_local(int r, OpIndex i);
  void apply_local(World& w, int r, OpIndex i, const Op& o);
  void apply_message(int sender, OpIndex si, int receiver, OpIndex ri);
  void apply_message(World& w, int sender, const Op& so, int receiver, OpIndex ri, const Op& ro);
  void init_world(World& w, bool in_place);
  void enter(World& w);
  void leave();
  void simulate(bool with_in_place);
  std::optional<Segments> expected(int r) const;
  std::optional<Segments> unaveraged_expected(int r) const;
  void check_output(const World& w, int r);
  void check_barrier();

  // ---- stats (verifier_stats.cc) ----
  // Counts op o of a rank into its stats; the step of a peer op goes to
  // `steps`, whose distinct values finish_rank_stats() counts.
  void count_op(RankStats& st, const Op& o, std::vector<uint32_t>& steps) const;
  void finish_rank_stats(RankStats& st, std::vector<uint32_t>& steps);
  // Every rank's latency depth, from the event run's completion times.
  void record_timing();

  const CollectiveSpec& spec_;
  std::span<const Program> programs_;
  std::string_view name_;
  VerifyResult& result_;
  RankSetPool pool_;
  std::string_view layout_name_;
  Matching matching_;
  bool one_sided_ = false;  // some Program has one-sided ops

  std::vector<size_t> base_;
  std::vector<uint32_t> rank_of_, prereq_, chan_next_, partner_, dep_off_, dependents_;
  std::vector<uint32_t> waiting_, t_start_, t_done_;
  std::vector<OpState> state_;
  std::vector<SetId> know_start_, know_end_;
  // One-sided: a wait's signal (kNone for other ops; empty without one-sided
  // ops), happens-before, and the race sweep's pairs that deps do not order.
  std::vector<uint32_t> signal_of_;
  HappensBefore hb_;
  std::vector<RaceFinding> unordered_;
  std::vector<std::pair<int, bool>> unordered_where_;  // rank, in place

  std::vector<World> worlds_;
  World* world_ = nullptr;  // the one being updated, for messages
  Segments seg_a_, seg_b_, seg_c_;
};

}  // namespace chorus::verify_internal
