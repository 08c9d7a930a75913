#include "perf/tuning_report.h"

#include "core/check.h"
#include "tune/calibration_cache.h"
#include "tune/tuning_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace chorus::perf {
namespace {

std::string fmt_us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", seconds * 1e6);
  return buf;
}

std::string entry_report(const std::filesystem::path& file) {
  std::ostringstream out;
  const std::string name = file.filename().string();
  const std::string probes = str_cat(".p", kCalibrationProbes, ".json");
  const bool current = name.size() > probes.size() &&
                       name.compare(name.size() - probes.size(), probes.size(), probes) == 0;
  out << "## " << file.string()
      << (current ? ""
                  : str_cat("  (another probe revision: not used by this chorus, which uses p",
                            kCalibrationProbes, ")"))
      << "\n";
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  TuningTable t;
  try {
    t = tuning_from_json(text.str(), name);
  } catch (const Error& e) {
    out << "  unreadable: " << e.what() << " (the next job calibrates again and replaces it)\n";
    return out.str();
  }
  for (const auto& [cls, link] : t.links)
    out << "  link " << cls << ": alpha " << fmt_us(link.alpha) << " us, beta " << link.beta / 1e9
        << " GB/s" << (link.curve.empty() ? "" : ", fitted curve") << "\n";
  if (t.calibration)
    out << "  calibrated "
        << (t.calibration->provisional ? "on a busy host (provisional)" : "quiet") << ": "
        << t.calibration->others_running << " other tasks running, load " << t.calibration->loadavg
        << ", " << t.calibration->cores << " cores\n";
  std::vector<LearnedPick> learned = t.learned;
  std::sort(learned.begin(), learned.end(), [](const LearnedPick& a, const LearnedPick& b) {
    return std::tie(a.collective, a.type, a.op, a.window_buffers, a.size_class) <
           std::tie(b.collective, b.type, b.op, b.window_buffers, b.size_class);
  });
  out << "  learned picks: " << learned.size() << "\n";
  if (!learned.empty()) {
    char line[160];
    std::snprintf(line, sizeof line, "    %-15s %-9s %-5s %-7s %21s  %-20s %12s\n", "collective",
                  "type", "op", "buffers", "size(B)", "algorithm", "time(us)");
    out << line;
    for (const LearnedPick& l : learned) {
      const std::string range =
          l.size_class == 0 ? "1"
                            : str_cat((1ull << (l.size_class - 1)) + 1, "-", 1ull << l.size_class);
      std::snprintf(line, sizeof line, "    %-15s %-9s %-5s %-7s %21s  %-20s %12s\n",
                    std::string(to_string(l.collective)).c_str(),
                    std::string(to_string(l.type)).c_str(), std::string(to_string(l.op)).c_str(),
                    l.window_buffers ? "window" : "user", range.c_str(), l.algorithm.c_str(),
                    fmt_us(l.seconds).c_str());
      out << line;
    }
  }
  out << "  model corrections (observed / predicted): " << t.corrections.size() << "\n";
  std::vector<ModelCorrection> whole;
  for (const ModelCorrection& c : t.corrections)
    if (c.algorithm.empty()) whole.push_back(c);
  std::sort(whole.begin(), whole.end(), [](const ModelCorrection& a, const ModelCorrection& b) {
    return std::tie(a.collective, a.type, a.size_class) <
           std::tie(b.collective, b.type, b.size_class);
  });
  for (const ModelCorrection& c : whole)
    out << "    " << to_string(c.collective) << " " << to_string(c.type) << " up to 2^"
        << c.size_class << " B: x" << c.factor << " (" << c.samples << " observations)\n";
  return out.str();
}

}  // namespace

std::string tuning_report(const std::string& cache_dir) {
  std::ostringstream out;
  if (cache_dir.empty())
    return "# no calibration cache directory (neither XDG_CACHE_HOME nor HOME)\n";
  out << "# calibration cache of host " << cache_host_name() << " in " << cache_dir << "\n";
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  const std::string prefix = cache_host_name() + "-";
  for (const auto& e : std::filesystem::directory_iterator(cache_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.rfind(prefix, 0) == 0 && e.path().extension() == ".json")
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) out << "# no entries: the next job calibrates (about a second) and learns\n";
  for (const auto& f : files) out << entry_report(f);
  return out.str();
}

}  // namespace chorus::perf
