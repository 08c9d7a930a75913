// chorus-perf --tuning-report: what the calibration cache holds for this host
// (tune/calibration_cache.h), in words: every entry of this host under
// `cache_dir`, with its link class, N and probe revision (and whether this
// chorus uses it), the load its calibration ran under, the picks the tuner
// learned from calls (tune/learner.h), per call class, and the model's
// learned corrections.
#pragma once

#include <string>

namespace chorus::perf {

std::string tuning_report(const std::string& cache_dir);

}  // namespace chorus::perf
