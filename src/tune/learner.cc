#include "tune/learner.h"

#include "core/check.h"
#include "schedule/rank_math.h"
#include "tune/model_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace chorus {
namespace {

// Tickets: epoch (bits 40+), kind (32..39), candidate (16..31), round (0..15).
enum : uint64_t { kExploreTicket = 1, kWatchTicket = 2 };

// A candidate's typical time: the mean of its samples without the largest
// (from 3 samples on). The mean, not the median: what a job pays is the sum,
// and an algorithm whose calls are mostly fast but now and then slow (a
// wake-up that comes late) costs its mean; a median would hide that tail.
// The largest alone goes, so one page fault or preemption does not decide.
double typical(std::vector<double> v) {
  if (v.empty()) return 0;
  if (v.size() >= 3) v.erase(std::max_element(v.begin(), v.end()));
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// Among `alive` (candidate order), the one of least figure, a later one
// replacing an earlier one only when `margin` faster; figures <= 0 (no
// samples on any rank) do not compete. -1 when none has a figure.
int least(std::span<const int> alive, std::span<const double> figure, double margin) {
  int best = -1;
  for (int c : alive) {
    const double t = figure[static_cast<size_t>(c)];
    if (!(t > 0)) continue;
    if (best < 0 || t < figure[static_cast<size_t>(best)] * (1 - margin)) best = c;
  }
  return best;
}

std::string figures_text(const std::vector<LearnCandidate>& cands, std::span<const double> f,
                         std::span<const int> shown) {
  std::string s;
  for (int c : shown)
    s += str_cat(s.empty() ? "" : " ", cands[static_cast<size_t>(c)].algorithm->name, "=",
                 f[static_cast<size_t>(c)] * 1e6, "us");
  return s;
}

}  // namespace

int size_class_of(size_t bytes) {
  return bytes <= 1 ? 0 : ceil_log2(static_cast<long long>(bytes));
}

std::string describe(const LearnKey& k) {
  return str_cat(to_string(k.collective), " ", to_string(k.type), " ", to_string(k.op), " 2^",
                 k.size_class, " B ", k.window_buffers ? "window" : "user");
}

LearnClass::LearnClass(LearnKey key, std::vector<LearnCandidate> candidates,
                       const LearnSettings& settings, const LearnedPick* cached)
    : key_(key), candidates_(std::move(candidates)), s_(settings) {
  CHORUS_CHECK(!candidates_.empty());
  if (cached == nullptr) return;
  auto it = std::find_if(candidates_.begin(), candidates_.end(), [&](const LearnCandidate& c) {
    return c.algorithm->name == cached->algorithm;
  });
  if (it == candidates_.end()) {
    // The earlier job's winner, no longer predicted among the best: it keeps
    // its place, as the decision to watch.
    const Algorithm* a = find_algorithm(key_.collective, cached->algorithm);
    if (a == nullptr) return;
    candidates_.push_back({a, 0});
    it = candidates_.end() - 1;
  }
  phase_ = LearnPhase::decided;
  decided_ever_ = true;
  winner_ = static_cast<int>(it - candidates_.begin());
  learned_ = cached->seconds;
  // Its first calls in this job pay for its Program and first pages.
  watch_skip_until_ = 2;
  next_check_ = static_cast<uint64_t>(s_.start + s_.first_check);
  check_gap_ = static_cast<uint64_t>(s_.first_check) * 2;
}

const Algorithm& LearnClass::current() const {
  return *candidates_[static_cast<size_t>(phase_ == LearnPhase::decided ? winner_ : 0)].algorithm;
}

int LearnClass::rounds_for_class() const {
  return key_.size_class <= s_.small_class ? s_.rounds_small : s_.rounds_large;
}

void LearnClass::begin_exploring() {
  ++epoch_;
  phase_ = LearnPhase::exploring;
  alive_.clear();
  for (int c = 0; c < static_cast<int>(candidates_.size()); ++c) alive_.push_back(c);
  round_ = position_ = visit_ = 0;
  rounds_ = std::max(1, rounds_for_class());
  dropped_ = false;
  samples_.assign(candidates_.size(), {});
}

Agreement LearnClass::due() const {
  switch (phase_) {
    case LearnPhase::model:
      return Agreement::none;
    case LearnPhase::exploring:
      if (position_ != 0 || visit_ != 0) return Agreement::none;
      if (round_ == s_.drop_after + 1 && !dropped_ && rounds_ > s_.drop_after)
        return Agreement::drop;
      if (round_ == rounds_ + 1) return Agreement::decide;
      return Agreement::none;
    case LearnPhase::decided:
      return candidates_.size() > 1 && calls_ == next_check_ ? Agreement::drift : Agreement::none;
  }
  return Agreement::none;
}

std::vector<double> LearnClass::figures() const {
  std::vector<double> f(candidates_.size(), 0.0);
  switch (due()) {
    case Agreement::drop:
      // The least of the first rounds' times: one slow call (a wake-up, a
      // page fault) does not drop a candidate.
      for (int c : alive_) {
        const auto& v = samples_[static_cast<size_t>(c)];
        f[static_cast<size_t>(c)] = v.empty() ? 0 : *std::min_element(v.begin(), v.end());
      }
      break;
    case Agreement::decide:
      for (int c : alive_) f[static_cast<size_t>(c)] = typical(samples_[static_cast<size_t>(c)]);
      break;
    case Agreement::drift:
      if (watched_.size() * 2 >= static_cast<size_t>(s_.watch))
        f[static_cast<size_t>(winner_)] = typical(watched_);
      break;
    case Agreement::none:
      break;
  }
  return f;
}

std::string LearnClass::agree(std::span<const double> m) {
  const Agreement what = due();
  CHORUS_CHECK(what != Agreement::none && m.size() == candidates_.size());
  observed_.clear();
  decided_now_ = false;
  const std::string head = str_cat("learn ", describe(key_), ": ");
  auto decide = [&](int winner, std::string_view how) {
    if (winner < 0) winner = 0;  // no rank timed any: the model's pick
    decided_now_ = true;
    decided_ever_ = true;
    phase_ = LearnPhase::decided;
    winner_ = winner;
    learned_ = m[static_cast<size_t>(winner)] > 0 ? m[static_cast<size_t>(winner)]
                                                  : candidates_[0].predicted;
    watched_.clear();
    watch_next_ = 0;
    watch_skip_until_ = calls_;
    next_check_ = calls_ + static_cast<uint64_t>(s_.first_check);
    check_gap_ = static_cast<uint64_t>(s_.first_check) * 2;
    return str_cat(head, how, " ", figures_text(candidates_, m, alive_), " -> ",
                   candidates_[static_cast<size_t>(winner)].algorithm->name);
  };
  for (int c : alive_)
    if (what != Agreement::drift && m[static_cast<size_t>(c)] > 0)
      observed_.emplace_back(c, m[static_cast<size_t>(c)]);
  switch (what) {
    case Agreement::drop: {
      dropped_ = true;
      const int best = least(alive_, m, 0);
      const std::string rounds = str_cat("rounds 1-", s_.drop_after);
      if (best < 0) return str_cat(head, rounds, ": no times yet");
      const double tb = m[static_cast<size_t>(best)];
      double spent = 0;
      std::vector<int> kept;
      std::string dropped;
      for (int c : alive_) {
        const double t = m[static_cast<size_t>(c)];
        // Rounds 0 .. drop_after, `burst` calls of each candidate a round.
        spent += (s_.drop_after + 1) * s_.burst * std::max(0.0, t - tb);
        if (t > s_.drop * tb) {
          dropped += str_cat(" ", candidates_[static_cast<size_t>(c)].algorithm->name);
        } else {
          kept.push_back(c);
        }
      }
      std::string shown = figures_text(candidates_, m, alive_);
      alive_ = std::move(kept);
      double per_round = 0;
      for (int c : alive_) per_round += s_.burst * std::max(0.0, m[static_cast<size_t>(c)] - tb);
      const double allowed = s_.budget * s_.budget_calls * tb - spent;
      int more = rounds_ - s_.drop_after;
      if (per_round > 0)
        more = static_cast<int>(
            std::min<double>(more, std::floor(std::max(0.0, allowed) / per_round)));
      rounds_ = s_.drop_after + more;
      std::string line =
          str_cat(head, rounds, " ", shown, dropped.empty() ? "" : str_cat(", dropped", dropped),
                  ", ", more, " more round", more == 1 ? "" : "s");
      if (alive_.size() == 1 || more == 0)
        return str_cat(line, "; ",
                       decide(least(alive_, m, s_.margin), str_cat("decided on ", rounds)));
      return line;
    }
    case Agreement::decide:
      return decide(least(alive_, m, s_.margin), "times");
    case Agreement::drift: {
      const double t = m[static_cast<size_t>(winner_)];
      const std::string name(candidates_[static_cast<size_t>(winner_)].algorithm->name);
      if (t > 0) observed_.emplace_back(winner_, t);
      if (t > 0 && (t > s_.drift * learned_ || t * s_.drift < learned_)) {
        const double was = learned_;
        begin_exploring();
        return str_cat(head, name, " now ", t * 1e6, "us against ", was * 1e6,
                       "us learned: exploring again");
      }
      next_check_ = calls_ + check_gap_;
      check_gap_ = std::min<uint64_t>(check_gap_ * 2, static_cast<uint64_t>(s_.max_check_gap));
      return str_cat(head, name, " now ", t * 1e6, "us, learned ", learned_ * 1e6, "us: kept");
    }
    case Agreement::none:
      break;
  }
  return head;
}

uint64_t LearnClass::make_ticket(int candidate, int slot) const {
  return (static_cast<uint64_t>(epoch_) << 40) |
         ((slot < 0 ? kWatchTicket : kExploreTicket) << 32) |
         (static_cast<uint64_t>(candidate) << 16) | static_cast<uint64_t>(std::max(slot, 0));
}

LearnStep LearnClass::next() {
  CHORUS_CHECK(due() == Agreement::none);
  if (phase_ == LearnPhase::model && candidates_.size() > 1 &&
      calls_ >= static_cast<uint64_t>(s_.start))
    begin_exploring();
  LearnStep step;
  switch (phase_) {
    case LearnPhase::model:
      break;
    case LearnPhase::exploring: {
      const auto n = static_cast<int>(alive_.size());
      step.candidate = alive_[static_cast<size_t>((position_ + round_) % n)];
      // A visit's first call pays for what the candidate before it left
      // behind (ranks out of step, its last completions): not timed.
      if (round_ >= 1 && visit_ >= 1) step.ticket = make_ticket(step.candidate, round_);
      if (++visit_ >= s_.burst) {
        visit_ = 0;
        if (++position_ == n) {
          ++round_;
          position_ = 0;
        }
      }
      break;
    }
    case LearnPhase::decided:
      step.candidate = winner_;
      if (calls_ >= watch_skip_until_) step.ticket = make_ticket(winner_, -1);
      break;
  }
  ++calls_;
  return step;
}

const Algorithm& LearnClass::algorithm_of(uint64_t ticket) const {
  const auto c = static_cast<size_t>((ticket >> 16) & 0xffff);
  return *candidates_[c < candidates_.size() ? c : 0].algorithm;
}

void LearnClass::record(uint64_t ticket, double seconds) {
  if (ticket == 0 || static_cast<int>(ticket >> 40) != epoch_ || !(seconds >= 0)) return;
  const uint64_t kind = (ticket >> 32) & 0xff;
  const auto c = static_cast<size_t>((ticket >> 16) & 0xffff);
  if (c >= candidates_.size()) return;
  if (kind == kExploreTicket && phase_ == LearnPhase::exploring) {
    samples_[c].push_back(seconds);
  } else if (kind == kWatchTicket && phase_ == LearnPhase::decided &&
             static_cast<int>(c) == winner_) {
    const auto w = static_cast<size_t>(std::max(1, s_.watch));
    if (watched_.size() < w) {
      watched_.push_back(seconds);
    } else {
      watched_[watch_next_] = seconds;
      watch_next_ = (watch_next_ + 1) % w;
    }
  }
}

Learner::Learner(LearnSettings settings, std::vector<LearnedPick> cached,
                 std::vector<ModelCorrection> corrections)
    : settings_(settings), cached_(std::move(cached)), corrections_(std::move(corrections)) {}

LearnClass* Learner::at(const LearnKey& key,
                        const std::function<std::vector<LearnCandidate>()>& candidates) {
  auto it = classes_.find(key);
  if (it != classes_.end()) return &it->second;
  const LearnedPick* cached = nullptr;
  for (const LearnedPick& p : cached_)
    if (p.collective == key.collective && p.type == key.type && p.op == key.op &&
        p.size_class == key.size_class && p.window_buffers == key.window_buffers)
      cached = &p;
  std::vector<LearnCandidate> list = candidates();
  if (list.empty()) return nullptr;
  return &classes_.try_emplace(key, key, std::move(list), settings_, cached).first->second;
}

void Learner::correct(const LearnKey& key, const std::string& algorithm, double ratio) {
  if (!(ratio > 0) || !std::isfinite(ratio)) return;
  const DataType type = representative_type(dtype_size(key.type));
  auto it = std::find_if(corrections_.begin(), corrections_.end(), [&](const ModelCorrection& c) {
    return c.collective == key.collective && c.type == type && c.size_class == key.size_class &&
           c.algorithm == algorithm;
  });
  if (it == corrections_.end()) {
    corrections_.push_back({key.collective, type, key.size_class, algorithm, ratio, 1});
    return;
  }
  // A geometric mean in which the newest observation weighs at least 1/8,
  // so that a machine that changes is followed.
  const double n = std::min(it->samples, 7);
  it->factor = std::exp((std::log(it->factor) * n + std::log(ratio)) / (n + 1));
  ++it->samples;
}

void Learner::observe(const LearnKey& key, std::string_view algorithm, double seconds,
                      double predicted) {
  if (!(predicted > 0)) return;
  correct(key, std::string(algorithm), seconds / predicted);
  correct(key, "", seconds / predicted);
}

bool Learner::absorb(const LearnClass& c) {
  for (const auto& [k, seconds] : c.observed()) {
    const LearnCandidate& cand = c.candidates()[static_cast<size_t>(k)];
    if (!(cand.predicted > 0)) continue;
    const double ratio = seconds / cand.predicted;
    correct(c.key(), std::string(cand.algorithm->name), ratio);
    correct(c.key(), "", ratio);
  }
  return c.decided_now();
}

std::vector<LearnedPick> Learner::learned() const {
  std::vector<LearnedPick> out;
  auto same = [](const LearnedPick& p, const LearnKey& k) {
    return p.collective == k.collective && p.type == k.type && p.op == k.op &&
           p.size_class == k.size_class && p.window_buffers == k.window_buffers;
  };
  for (const LearnedPick& p : cached_) {
    auto it = std::find_if(classes_.begin(), classes_.end(),
                           [&](const auto& kv) { return same(p, kv.first); });
    if (it == classes_.end() || it->second.decision() == nullptr) out.push_back(p);
  }
  // A class exploring again after a drift keeps its last decision until the
  // next one: the next job checks it early.
  for (const auto& [k, c] : classes_)
    if (c.decision() != nullptr && c.learned_seconds() > 0)
      out.push_back({k.collective, k.type, k.op, k.size_class, k.window_buffers,
                     std::string(c.decision()->name), c.learned_seconds()});
  return out;
}

double correction_factor(std::span<const ModelCorrection> corrections, Collective collective,
                         DataType type, std::string_view algorithm, int size_class) {
  // The nearest observed classes below and above, of the algorithm's own
  // factors (own) and of the class-wide ones (wide).
  const ModelCorrection* own[2] = {nullptr, nullptr};
  const ModelCorrection* wide[2] = {nullptr, nullptr};
  for (const ModelCorrection& c : corrections) {
    if (c.collective != collective || c.type != type) continue;
    const ModelCorrection** near = nullptr;
    if (c.algorithm.empty()) {
      near = wide;
    } else if (!algorithm.empty() && c.algorithm == algorithm) {
      near = own;
    } else {
      continue;
    }
    if (c.size_class <= size_class && (near[0] == nullptr || c.size_class > near[0]->size_class))
      near[0] = &c;
    if (c.size_class >= size_class && (near[1] == nullptr || c.size_class < near[1]->size_class))
      near[1] = &c;
  }
  auto between = [size_class](const ModelCorrection* below, const ModelCorrection* above) {
    if (below == above) return below->factor;
    const double w = static_cast<double>(size_class - below->size_class) /
                     static_cast<double>(above->size_class - below->size_class);
    return std::exp(std::log(below->factor) * (1 - w) + std::log(above->factor) * w);
  };
  // The algorithm's own where it was observed at or around this class.
  if (own[0] != nullptr && own[1] != nullptr) return between(own[0], own[1]);
  if (wide[0] == nullptr && wide[1] == nullptr) {
    const ModelCorrection* one = own[0] != nullptr ? own[0] : own[1];
    return one != nullptr ? one->factor : 1;
  }
  if (wide[0] == nullptr) return wide[1]->factor;
  if (wide[1] == nullptr) return wide[0]->factor;
  return between(wide[0], wide[1]);
}

}  // namespace chorus
