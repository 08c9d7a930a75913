// Selection: which algorithm runs a call. The one place that decides, in this
// order:
//   1. the name the call gives (CallOptions::algorithm), else the one
//      CHORUS_ALGO gives for this collective ("auto" or none: go on). A name
//      the call gives must exist and serve the call; a CHORUS_ALGO name that
//      does not serve this call falls through (so "ring" can be set for every
//      collective that has a ring);
//   2. the tuner (tuner.h): a measured rule, else the model;
//   3. the first algorithm in registry order that serves the call.
// "Serves the call" means supported on every rank of the communicator, asked
// once per algorithm and pick, so that all ranks choose among the same
// candidates.
//
// Picks are not cached here: the communicator keeps one cache of its calls'
// algorithms and Programs (api/communicator_impl.h).
#pragma once

#include "algorithms/algorithm.h"
#include "core/config.h"
#include "transport/transport.h"
#include "tune/tuner.h"

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

 private:
  Config config_;
  std::unique_ptr<Tuner> tuner_;
};

// The selector of a communicator over `transport`. Its tuner's parameters come
// from, in this order:
//   1. CHORUS_TUNING_FILE (config.tuning_file): the entry of the transport's
//      link class (link_class_of), and its rules for that class and N;
//   2. for shm and tcp, a calibration now (calibration.h: milliseconds);
//   3. for inproc (ranks as threads, the test harness) the built-in defaults
//      kInprocAlpha / kInprocBeta: no calibration, so tests stay fast and their
//      choices do not depend on the load of the machine.
// Collective when it calibrates: every rank calls it at creation, with no
// other traffic on the transport. config.host_id names this rank's host for
// the model's host grouping (the communicator fills it in with bootstrap's
// host_identity() when CHORUS_HOST_ID is unset).
std::unique_ptr<Selector> make_selector(Transport& transport, const Config& config);

}  // namespace chorus
