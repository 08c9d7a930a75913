// Selection: which algorithm runs a call. The one place that decides, in this
// order:
//   1. the name the call gives (CallOptions::algorithm), else the one
//      CHORUS_ALGO gives for this collective ("auto" or none: go on). A name
//      the call gives must exist and serve the call; a CHORUS_ALGO name that
//      does not serve this call falls through (so "ring" can be set for every
//      collective that has a ring);
//   2. the tuner (tuner.h): a measured rule, else the model;
//   3. the first algorithm in registry order that serves the call.
// Between 1 and 2 sits the learner (learner.h), which the communicator asks
// for a call that names no algorithm (learns()): among the candidates the
// tuner proposes (learn_candidates) it runs the one the class's state says,
// by name, through choose().
// "Serves the call" means supported on every rank of the communicator, asked
// once per algorithm and pick, so that all ranks choose among the same
// candidates.
//
// Picks are not cached here: the communicator keeps one cache of its calls'
// algorithms and Programs (engine/communicator_impl.h).
#pragma once

#include "algorithms/algorithm.h"
#include "core/config.h"
#include "transport/transport.h"
#include "tune/learner.h"
#include "tune/tuner.h"

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

namespace chorus {

class Selector {
 public:
  // `tuner` may be null: then the registry order decides.
  Selector(Config config, std::unique_ptr<Tuner> tuner);

  // The algorithm for `spec` (spec.rank is the caller's). Throws
  // Error(invalid_argument) for an unknown name or a named algorithm that
  // cannot serve the call, naming it and the reason.
  const Algorithm& choose(const CollectiveSpec& spec, std::string_view requested);

  Tuner* tuner() { return tuner_.get(); }

  // The learner (CHORUS_TUNER=learn), or null.
  Learner* learner() { return learner_.get(); }
  void set_learner(std::unique_ptr<Learner> learner) { learner_ = std::move(learner); }
  // Whether the learner decides a call of `spec`: there is one, and neither
  // the call nor CHORUS_ALGO names an algorithm of its collective.
  bool learns(const CollectiveSpec& spec, std::string_view requested) const;
  // The candidates of a new call class (Tuner::learn_candidates over the
  // algorithms that serve `spec` on every rank).
  std::vector<LearnCandidate> learn_candidates(const CollectiveSpec& spec);

  // Where the learner's picks are stored: the calibration cache entry this
  // selector's model came from (calibration_cache.h), with the table read
  // from it. Without one (a tuning file, inproc, the cache off) they are
  // kept for this communicator only.
  void set_cache_entry(std::string path, TuningTable table) {
    cache_path_ = std::move(path);
    cache_table_ = std::move(table);
    last_store_ = std::chrono::steady_clock::now();  // the first write waits too
  }
  const std::string& cache_path() const { return cache_path_; }
  // Rewrites the cache entry with the learner's picks and corrections; ""
  // when done or there is nothing to write to, else why it failed.
  std::string store_learned();
  // After a decision: the entry is rewritten when kLearnedWriteGap has
  // passed since the last write (a write costs rank 0 a few hundred
  // microseconds, which the other ranks would wait for inside a call), else
  // at flush_learned(). Returns store_learned()'s "" or reason.
  std::string note_learned();
  // Writes what note_learned() has held back; the communicator calls it
  // when it is destroyed.
  std::string flush_learned();
  static constexpr std::chrono::seconds kLearnedWriteGap{2};

  // Receives the learner's log lines (CHORUS_DEBUG=TUNING); may be empty.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  const std::function<void(const std::string&)>& log() const { return log_; }

 private:
  // The algorithms of spec's collective that every rank supports, registry
  // order.
  std::vector<const Algorithm*> served(const CollectiveSpec& spec, const Algorithm* named,
                                       Support* named_support);

  Config config_;
  // Per collective: CHORUS_ALGO names an algorithm of it (then it does not
  // learn).
  std::array<bool, kCollectiveCount> named_by_config_{};
  std::unique_ptr<Tuner> tuner_;
  std::unique_ptr<Learner> learner_;
  std::string cache_path_;
  TuningTable cache_table_;
  bool learned_dirty_ = false;
  std::chrono::steady_clock::time_point last_store_{};
  std::function<void(const std::string&)> log_;
};

// The selector of a communicator over `transport`. Its tuner's parameters come
// from, in this order:
//   1. CHORUS_TUNING_FILE (config.tuning_file): the entry of the transport's
//      link class (link_class_of), and its rules for that class and N;
//   2. for shm and tcp, a calibration now (calibration.h: milliseconds);
//   3. for inproc (ranks as threads, the test harness) the built-in defaults
//      kInprocAlpha / kInprocBeta: no calibration, so tests stay fast and their
//      choices do not depend on the load of the machine.
// CHORUS_TUNER=off: no tuner and no calibration (registry order); model:
// the tuner alone; learn (the default): the tuner and a learner (learner.h)
// seeded with the table's learned picks and corrections, on processes, or
// on inproc ranks when CHORUS_TUNER=learn is given.
// Collective when it calibrates: every rank calls it at creation, with no
// other traffic on the transport. config.host_id names this rank's host for
// the model's host grouping (the communicator fills it in with bootstrap's
// host_identity() when CHORUS_HOST_ID is unset).
std::unique_ptr<Selector> make_selector(Transport& transport, const Config& config);

}  // namespace chorus
