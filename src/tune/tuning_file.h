// The tuning file: link parameters and measured rules for the tuner, as JSON.
//
// Written by chorus-perf --calibrate (write_tuning_file), read at communicator
// creation from CHORUS_TUNING_FILE:
//   {"format": "chorus-tuning", "version": 2,
//    "gamma_s_per_B": 1e-10, "ports": 1,
//    "links": {"shm": {"alpha_s": 1.2e-6, "beta_Bps": 8.5e9,
//                      "curve": [[4096, 6e-11], [65536, 4e-11], [67108864, 1.1e-10]],
//                      "half_duplex": true, "mem_traffic": 4, "flag_alpha_s": 1e-7},
//              "tcp": {"alpha_s": 2.5e-5, "beta_Bps": 1.1e9}},
//    "host": {"memory_Bps": 3.2e10, "cores": 2},
//    "compute": {"copy": [[65536, 5e-11], ...],
//                "kernels": {"float32.sum": [[65536, 9e-11], ...], ...}},
//    "rules": [{"collective": "allreduce", "link": "shm", "ranks": 2,
//               "min_bytes": 8, "algorithm": "recursive_doubling"}, ...],
//    "learned": [{"collective": "allreduce", "type": "float32", "op": "sum",
//                 "size_class": 20, "buffers": "user", "algorithm": "ring",
//                 "time_s": 1.2e-4}, ...],
//    "corrections": [{"collective": "allreduce", "type": "float32",
//                     "size_class": 20, "algorithm": "ring", "factor": 0.8,
//                     "samples": 3}, ...]}
//
// Version 2 adds the fitted machine model (model/machine_model.h): a link's
// curve, half_duplex and mem_traffic, the host and the compute rates. All of
// them are optional; a version 1 file (alpha and beta only) still loads and
// gives the plain alpha-beta-gamma model. A link's flag_alpha_s (the latency
// of a signal over shared windows, LinkParams::flag_alpha) is optional too:
// written where the calibration measured it, absent otherwise (and in files
// written before it existed), and then alpha stands in for it.
//
// Rules are measured decisions: chorus-perf --calibrate times every algorithm
// at each size of a sweep and records the fastest (see tuner.h for how they
// are used). "learned" and "corrections" are what the tuner learned from a
// job's own calls (tune/learner.h), as the calibration cache keeps them: the
// winner of each call class, and the factors by which observed times
// correct the model's predictions. A file without them is the same model
// with nothing learned.
#pragma once

#include "core/collective.h"
#include "model/cost_model.h"
#include "model/machine_model.h"

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// A float sum streams two inputs and one output through the cache at roughly
// 10 GB/s: 0.1 ns per reduced byte.
inline constexpr double kDefaultGamma = 1e-10;

// One measured decision. Sizes are the collective's M (model_bytes): the
// vector for allreduce, broadcast, reduce; the gathered output for allgather;
// the input for reduce_scatter and alltoall.
struct TuningRule {
  Collective collective = Collective::allreduce;
  std::string link;
  int nranks = 0;
  size_t min_bytes = 0;
  std::string algorithm;
  friend bool operator==(const TuningRule&, const TuningRule&) = default;
};

// The load a calibration ran under (tune/calibration.h), as the calibration
// cache records it ("calibration" in the file; absent from files written by
// chorus-perf --calibrate). `provisional`: the host was busy, so a later job
// that finds it quiet replaces the entry (docs/ALGORITHMS.md, "The
// calibration cache").
struct CalibrationLoad {
  bool provisional = false;
  double others_running = 0;  // median runnable tasks besides the job's ranks (busiest host)
  double loadavg = 0;         // /proc/loadavg's 1-minute figure (highest host), for information
  int cores = 0;              // hardware threads of a host
  int samples = 0;            // run-queue samples taken per rank
  friend bool operator==(const CalibrationLoad&, const CalibrationLoad&) = default;
};

// A call class's learned winner (tune/learner.h: LearnKey). size_class is
// ceil(log2(bytes of the call's vector)); time_s the winner's agreed typical time.
struct LearnedPick {
  Collective collective = Collective::allreduce;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int size_class = 0;
  bool window_buffers = false;
  std::string algorithm;
  double seconds = 0;
  friend bool operator==(const LearnedPick&, const LearnedPick&) = default;
};

// observed / predicted time of the calls of one collective, element type
// (model_sim.h: representative_type of its size) and size class, as a
// geometric mean over `samples` agreed observations: of one algorithm, or,
// with an empty algorithm, of every algorithm observed there. The model's
// prediction is multiplied by it (MachineSim::time).
struct ModelCorrection {
  Collective collective = Collective::allreduce;
  DataType type = DataType::float32;
  int size_class = 0;
  std::string algorithm;  // "" = the whole size class
  double factor = 1;
  int samples = 0;
  friend bool operator==(const ModelCorrection&, const ModelCorrection&) = default;
};

struct TuningTable {
  std::map<std::string, LinkParams> links;  // by link class
  std::vector<TuningRule> rules;
  double gamma = kDefaultGamma;
  int ports = 1;
  HostParams host;                             // version 2: fitted
  ComputeModel compute;                        // version 2: fitted
  std::optional<CalibrationLoad> calibration;  // the calibration cache's record
  std::vector<LearnedPick> learned;            // the calibration cache's learned picks
  std::vector<ModelCorrection> corrections;    // and the model's learned corrections
  // Whether the file carries a fitted model (a link with a curve).
  bool fitted() const {
    for (const auto& [name, p] : links)
      if (!p.curve.empty()) return true;
    return false;
  }
};

// JSON text <-> table; bad text throws Error(invalid_argument) naming `where`.
TuningTable tuning_from_json(std::string_view text, std::string_view where);
std::string tuning_to_json(const TuningTable& table);
TuningTable read_tuning_file(const std::string& path);
// Writes `table`, keeping the link classes of an existing file at `path` that
// `table` does not mention (so shm and tcp can be calibrated separately).
void write_tuning_file(const std::string& path, const TuningTable& table);

// The link class the tuner uses for a transport name: core/transport_kind.h's
// link_class ("shm+tcp" is tuned for its slowest links, "tcp"); a name that
// is no transport's stays as it is.
std::string link_class_of(std::string_view transport_name);

}  // namespace chorus
