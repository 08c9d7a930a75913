// The symbolic verifier; see verifier.h for what it proves and
// verifier_impl.h for the files of its steps. The order: structural checks
// per rank, then the shared matching (of messages, and of signals with
// waits), then the race sweep per rank and layout, for one-sided Programs the
// happens-before checks of every get (verify/happens_before.h), then one
// event-driven run of all ranks per layout that moves symbolic content
// (verify/symbolic_memory.h) instead of data. This file holds that order, the
// error messages and verify_programs().
#include "verify/verifier.h"

#include "core/check.h"
#include "verify/verifier_impl.h"

#include <utility>

namespace chorus {

std::string_view to_string(VerifyErrorKind kind) {
  switch (kind) {
    case VerifyErrorKind::unsupported_mix:
      return "unsupported_mix";
    case VerifyErrorKind::build_failed:
      return "build_failed";
    case VerifyErrorKind::program_count:
      return "program_count";
    case VerifyErrorKind::buffer_size:
      return "buffer_size";
    case VerifyErrorKind::bad_op_kind:
      return "bad_op_kind";
    case VerifyErrorKind::region_out_of_bounds:
      return "region_out_of_bounds";
    case VerifyErrorKind::region_count_mismatch:
      return "region_count_mismatch";
    case VerifyErrorKind::self_dependency:
      return "self_dependency";
    case VerifyErrorKind::forward_dependency:
      return "forward_dependency";
    case VerifyErrorKind::missing_dependency:
      return "missing_dependency";
    case VerifyErrorKind::dependency_cycle:
      return "dependency_cycle";
    case VerifyErrorKind::input_written:
      return "input_written";
    case VerifyErrorKind::forbidden_access:
      return "forbidden_access";
    case VerifyErrorKind::bad_peer:
      return "bad_peer";
    case VerifyErrorKind::unmatched_send:
      return "unmatched_send";
    case VerifyErrorKind::unmatched_receive:
      return "unmatched_receive";
    case VerifyErrorKind::count_mismatch:
      return "count_mismatch";
    case VerifyErrorKind::overlapping_operands:
      return "overlapping_operands";
    case VerifyErrorKind::race:
      return "race";
    case VerifyErrorKind::deadlock:
      return "deadlock";
    case VerifyErrorKind::double_contribution:
      return "double_contribution";
    case VerifyErrorKind::misaligned_reduce:
      return "misaligned_reduce";
    case VerifyErrorKind::wrong_result:
      return "wrong_result";
    case VerifyErrorKind::barrier_incomplete:
      return "barrier_incomplete";
    case VerifyErrorKind::bad_spec:
      return "bad_spec";
    case VerifyErrorKind::no_windows:
      return "no_windows";
    case VerifyErrorKind::bad_flag:
      return "bad_flag";
    case VerifyErrorKind::bad_remote_region:
      return "bad_remote_region";
    case VerifyErrorKind::remote_not_staged:
      return "remote_not_staged";
    case VerifyErrorKind::unmatched_wait:
      return "unmatched_wait";
    case VerifyErrorKind::unmatched_signal:
      return "unmatched_signal";
    case VerifyErrorKind::duplicate_signal:
      return "duplicate_signal";
    case VerifyErrorKind::duplicate_wait:
      return "duplicate_wait";
    case VerifyErrorKind::read_before_signal:
      return "read_before_signal";
    case VerifyErrorKind::overwrite_before_read:
      return "overwrite_before_read";
    case VerifyErrorKind::read_after_return:
      return "read_after_return";
    case VerifyErrorKind::unchecked_read:
      return "unchecked_read";
  }
  return "invalid";
}

namespace verify_internal {

void Verifier::run() {
  if (static_cast<int>(programs_.size()) != spec_.nranks)
    fail(VerifyErrorKind::program_count, -1, kNoOp,
         str_cat("got ", programs_.size(), " programs for ", spec_.nranks, " ranks"));
  result_.ranks.assign(programs_.size(), RankStats{});
  for (int r = 0; r < spec_.nranks; ++r) check_structure(r);
  for (const Program& p : programs_) one_sided_ = one_sided_ || p.one_sided();
  if (one_sided_)
    for (int r = 0; r < spec_.nranks; ++r) check_remote_regions(r);
  match();
  number_ops();
  if (one_sided_) {
    match_flags();
    for (int r = 0; r < spec_.nranks; ++r) check_stamp_checks(r);
  }
  build_graph();
  if (one_sided_) order_ops();
  const bool has_in_place = in_place_exists();
  result_.in_place_checked = has_in_place;
  check_races(false);
  if (has_in_place) check_races(true);
  if (one_sided_) {
    // A get that does not wait for its data also unorders what the wait
    // ordered at both ranks: report the cause before the races.
    check_remote_reads(has_in_place);
    check_unordered_races();
  }
  simulate(has_in_place);
}

// ---- messages -------------------------------------------------------------

std::string Verifier::context() const {
  std::string s = str_cat(to_string(spec_.collective), "(", name_, ") N=", spec_.nranks,
                          " count=", spec_.count);
  if (rooted(spec_.collective)) s += str_cat(" root=", spec_.root);
  if (!layout_name_.empty()) s += str_cat(" ", layout_name_);
  return s;
}

VerifyError Verifier::error(VerifyErrorKind kind, int rank, OpIndex op,
                            const std::string& what) const {
  std::string where;
  if (rank >= 0 && op != kNoOp && op < programs_[static_cast<size_t>(rank)].ops.size())
    where = str_cat("rank ", rank, " op ", op, " (", describe(op_at(rank, op)), "): ");
  else if (rank >= 0)
    where = str_cat("rank ", rank, ": ");
  return VerifyError{kind, rank, op, std::string(layout_name_),
                     str_cat(context(), ": ", where, what)};
}

void Verifier::fail(VerifyErrorKind kind, int rank, OpIndex op, const std::string& what) {
  throw Failure{error(kind, rank, op, what)};
}

}  // namespace verify_internal

VerifyResult verify_programs(const CollectiveSpec& spec, std::span<const Program> programs,
                             std::string_view algorithm) {
  VerifyResult result;
  std::string bad;
  if (spec.nranks < 1)
    bad = str_cat("nranks must be >= 1, got ", spec.nranks);
  else if (spec.root < 0 || spec.root >= spec.nranks)
    bad = str_cat("root ", spec.root, " outside [0, ", spec.nranks, ")");
  if (!bad.empty()) {
    result.error = VerifyError{VerifyErrorKind::bad_spec, -1, kNoOp, "",
                               str_cat(to_string(spec.collective), "(", algorithm,
                                       ") N=", spec.nranks, " count=", spec.count, ": ", bad)};
    return result;
  }
  try {
    verify_internal::Verifier(spec, programs, algorithm, result).run();
  } catch (verify_internal::Failure& f) {
    result.error = std::move(f.error);
  }
  return result;
}

}  // namespace chorus