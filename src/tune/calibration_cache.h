// The calibration cache: so that users do not calibrate by hand, a
// communicator without CHORUS_TUNING_FILE uses the fitted model cached for
// this host, transport and rank count, and when there is none runs the quick
// calibration (tune/calibration.h: about a second) and stores it.
//
//   $XDG_CACHE_HOME/chorus/<hostname>-<link class>-n<N>.p<P>.json   (a
//   ~/.cache/chorus/...      when XDG_CACHE_HOME is unset   version 2 tuning file)
//
// P is kCalibrationProbes: a chorus whose probes or fits differ from the ones
// that wrote an entry does not use it (it calibrates and writes its own).
//
// An entry also keeps what the tuner learned from the job's calls
// (tune/learner.h: TuningTable::learned and corrections): rank 0 rewrites it
// at each decision, and the next job starts with them.
//
// Every entry records the load its calibration ran under (TuningTable::
// calibration). One taken on a busy host (tune/calibration.h: host_busy) is
// stored marked provisional: later jobs use it, except one whose rank 0 finds
// the host quiet at its start (host_busy over a few samples of the run queue,
// this job's ranks on rank 0's host not counted), which calibrates again and
// replaces it. A quiet entry is kept (until deleted, or the probes change).
//
// Rank 0 reads and writes the file and sends its text to every rank, so all
// ranks predict alike even when their hosts' caches differ. A file that does
// not parse, or holds no fitted model of this link class, is ignored with a
// warning and replaced. CHORUS_TUNING_CACHE=off calibrates at every start-up
// and stores nothing; so does a cache directory that cannot be written (with
// a warning).
#pragma once

#include "core/config.h"
#include "core/deadline.h"
#include "transport/transport.h"
#include "tune/calibration.h"
#include "tune/tuning_file.h"

#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// The revision of the quick calibration's probes and fits; raised whenever
// they change, so that entries they would not have written are not used.
// 5: entries record the load they were calibrated under.
inline constexpr int kCalibrationProbes = 5;

// This host's name as cache files carry it ('/' replaced).
std::string cache_host_name();

// dir/<hostname>-<link>-n<nranks>.p<kCalibrationProbes>.json
std::string cache_file(const std::string& dir, std::string_view link, int nranks);

struct CachedModel {
  TuningTable table;         // fitted; links holds the transport's class
  std::vector<int> host_of;  // each rank's host (tune/calibration.h: host_layout)
  bool from_cache = false;   // false: calibrated now
  std::string path;          // the cache file ("" when the cache is off)
  // Calibrated now although a provisional entry was there (the host was
  // quiet at the start): the entry is replaced. Rank 0's alone (it decides);
  // false on the other ranks.
  bool replaced_provisional = false;
};

// Writes a cache entry atomically (a temporary file renamed over it, its
// directory made); "" on success, else the reason. The learner's picks go
// into the entry this way (Selector::store_learned), rank 0's alone.
std::string write_cache_text(const std::string& path, const std::string& text);

// Collective: every rank of the transport calls it at creation, with no other
// traffic in flight. `sampler` reads the host's load (the calibration's
// probes and the quiet check of a provisional entry); empty: read_host_load.
CachedModel cached_model(Transport& transport, const Config& config, Deadline deadline,
                         const LoadSampler& sampler = {});

}  // namespace chorus
