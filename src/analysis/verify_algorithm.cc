// verify(algorithm, spec): the registry's builders put through the verifier.
#include "analysis/verify_algorithm.h"

#include "algorithms/deterministic.h"
#include "core/check.h"
#include "core/exact_sum.h"

namespace chorus {

VerifyResult verify(const Algorithm& algorithm, const CollectiveSpec& requested) {
  // The algorithm fixes the collective; the request gives the sizes.
  CollectiveSpec base = requested;
  base.collective = algorithm.collective;
  VerifyResult result;
  std::vector<Program> programs;
  const std::string context = str_cat(to_string(base.collective), "(", algorithm.name,
                                      ") N=", base.nranks, " count=", base.count);
  if (base.nranks < 1) {
    result.supported = false;
    result.reason = str_cat("nranks must be >= 1, got ", base.nranks);
    return result;
  }
  programs.reserve(static_cast<size_t>(base.nranks));
  int declined = 0;
  for (int r = 0; r < base.nranks; ++r) {
    CollectiveSpec s = base;
    s.rank = r;
    const Support sup = supports(algorithm, s);
    if (!sup) {
      if (declined == 0) result.reason = sup.reason;
      ++declined;
      continue;
    }
    try {
      programs.push_back(build_program(algorithm, s));
    } catch (const std::exception& e) {
      result.error = VerifyError{VerifyErrorKind::build_failed, r, kNoOp, "",
                                 str_cat(context, ": rank ", r, ": build threw: ", e.what())};
      return result;
    }
  }
  if (declined == base.nranks) {
    result.supported = false;
    return result;
  }
  if (declined > 0) {
    result.error = VerifyError{
        VerifyErrorKind::unsupported_mix, -1, kNoOp, "",
        str_cat(context, ": ", declined, " of ", base.nranks, " ranks decline the case (",
                result.reason, ") while the others accept it")};
    result.reason.clear();
    return result;
  }
  return verify_programs(base, programs, algorithm.name);
}

VerifyResult verify_deterministic_plan(const DeterministicPlan& plan) {
  VerifyResult last;
  for (const DeterministicPart& p : plan.parts) {
    const Algorithm* algo = find_algorithm(p.spec.collective, p.algorithm);
    if (algo == nullptr)
      fail(ErrorCode::invalid_argument, "verify_deterministic: no ", to_string(p.spec.collective),
           " algorithm '", p.algorithm, "' for the ", to_string(p.role), " part of the ",
           to_string(plan.road), " road");
    VerifyResult r = verify(*algo, p.spec);
    if (!r.ok() || !r.supported) return r;
    last = std::move(r);
  }
  return last;
}

VerifyResult verify_deterministic(const Algorithm& algorithm, const CollectiveSpec& base,
                                  DataType type) {
  const bool scatter =
      algorithm.collective == Collective::alltoall && base.collective == Collective::allreduce;
  if (!scatter && algorithm.collective != base.collective)
    fail(ErrorCode::invalid_argument, "verify_deterministic: ", algorithm.name, " is a ",
         to_string(algorithm.collective), " algorithm, the call a ", to_string(base.collective));
  const std::string name(algorithm.name);
  if (!scatter)
    return verify_deterministic_plan(
        deterministic_plan(base, type, DeterministicRoad::whole, name));
  return verify_deterministic_plan(deterministic_plan(
      base, type, DeterministicRoad::scatter, "",
      [&](const CollectiveSpec& part, DataType t, ReduceOp op) {
        return part.collective == Collective::alltoall ? name
                                                       : default_deterministic_pick(part, t, op);
      }));
}

}  // namespace chorus
