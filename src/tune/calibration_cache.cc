#include "tune/calibration_cache.h"

#include "core/check.h"
#include "core/log.h"
#include "tune/calibration.h"
#include "tune/rank_exchange.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace chorus {
namespace {

std::string host_name_of_this() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string s(name);
  for (char& c : s)
    if (c == '/') c = '_';
  return s;
}

// The file's text, or "" when it cannot be read.
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string write_cache_text(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return str_cat("cannot create its directory: ", ec.message());
  const std::string tmp = str_cat(path, ".", getpid(), ".tmp");
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return "cannot write it";
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return str_cat("cannot rename it into place: ", ec.message());
  }
  return "";
}

std::string cache_host_name() {
  return host_name_of_this();
}

std::string cache_file(const std::string& dir, std::string_view link, int nranks) {
  return str_cat(dir, "/", cache_host_name(), "-", link, "-n", nranks, ".p", kCalibrationProbes,
                 ".json");
}

// The samples of the quiet check at a job's start (a provisional entry).
constexpr int kStartSamples = 5;
constexpr auto kStartSampleGap = std::chrono::milliseconds(2);

CachedModel cached_model(Transport& t, const Config& config, Deadline deadline,
                         const LoadSampler& sampler) {
  CachedModel out;
  const std::string cls = link_class_of(t.name());
  const bool use_cache = config.tuning_cache && !config.cache_dir.empty();
  if (use_cache) out.path = cache_file(config.cache_dir, cls, t.size());
  out.host_of = host_layout(t, config.host_id, deadline);
  // Rank 0 decides: the cached text, or "" to calibrate.
  std::string text;
  // Rank 0: the learned picks of a provisional entry it replaces.
  std::vector<LearnedPick> kept;
  if (use_cache && t.rank() == 0) {
    text = read_text(out.path);
    if (!text.empty()) {
      try {
        const TuningTable table =
            tuning_from_json(text, str_cat("calibration cache '", out.path, "'"));
        auto it = table.links.find(cls);
        if (it == table.links.end() || it->second.curve.empty())
          fail(ErrorCode::invalid_argument, "calibration cache '", out.path,
               "' holds no fitted model of link class ", cls);
        // A provisional entry (calibrated on a busy host) is used while the
        // host stays busy; a job that finds it quiet calibrates again (a
        // derived communicator does not: Config::derived).
        if (table.calibration && table.calibration->provisional && !config.derived) {
          std::vector<double> running;
          for (int k = 0; k < kStartSamples; ++k) {
            if (k > 0) std::this_thread::sleep_for(kStartSampleGap);
            running.push_back(sampler ? sampler().running : read_host_load().running);
          }
          int local = 0;
          for (int h : out.host_of) local += h == out.host_of[0] ? 1 : 0;
          const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
          if (!host_busy(running, local, cores)) {
            log_message(config.log_level, LogLevel::info, t.rank(), "calibration cache '", out.path,
                        "' is provisional and the host is quiet now: calibrating again");
            text.clear();
            out.replaced_provisional = true;
            kept = table.learned;
          }
        }
      } catch (const Error& e) {
        log_message(config.log_level, LogLevel::warn, t.rank(),
                    "ignoring the calibration cache: ", e.what(), "; calibrating again");
        text.clear();
      }
    }
  }
  broadcast_text(t, text, deadline);
  if (!text.empty()) {
    out.table = tuning_from_json(text, str_cat("calibration cache '", out.path, "'"));
    out.from_cache = true;
    return out;
  }
  ModelCalibrationOptions quick = ModelCalibrationOptions::quick();
  quick.host_identity = config.host_id;
  quick.load_sampler = sampler;
  ModelCalibration cal = calibrate_model(t, deadline, quick);
  out.table = std::move(cal.table);
  out.host_of = std::move(cal.host_of);
  // A replaced provisional entry's learned picks stay: the learner checks
  // each against its own calls on this quiet host early (its drift check)
  // and explores again where it no longer holds. Its corrections, relative
  // to the model replaced, go. Rank 0 sends the table with them to every
  // rank, so that all start alike.
  std::string with_learned;
  if (!kept.empty()) {
    TuningTable table = out.table;
    table.learned = std::move(kept);
    with_learned = tuning_to_json(table);
  }
  broadcast_text(t, with_learned, deadline);
  if (!with_learned.empty())
    out.table = tuning_from_json(with_learned, str_cat("calibration cache '", out.path, "'"));
  const bool provisional = out.table.calibration && out.table.calibration->provisional;
  log_message(config.log_level, LogLevel::info, t.rank(), "tuner: calibrated ", cls,
              " at N=", t.size(), " in ", cal.seconds * 1e3, " ms",
              provisional ? " on a busy host (stored as provisional)" : "");
  if (use_cache && t.rank() == 0)
    if (std::string why = write_cache_text(out.path, tuning_to_json(out.table)); !why.empty())
      log_message(config.log_level, LogLevel::warn, t.rank(), "calibration cache '", out.path,
                  "': ", why, "; it will be calibrated again next time");
  return out;
}

}  // namespace chorus
