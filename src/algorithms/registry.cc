// The registry: one row per algorithm. Order within a collective is the
// fallback order: when the requested (or tuned) algorithm does not support a
// case, the first one that does is used, so the simplest comes first.
#include "algorithms/algorithm.h"

#include "core/check.h"

#include <iterator>

namespace chorus {

// Each row names an Algorithm defined in its own file.
#define CHORUS_ALGORITHMS(X)                                         \
  X(kRingAllreduce)                 /* ring.cc */                    \
  X(kRingAllgather)                 /* ring.cc */                    \
  X(kRingReduceScatter)             /* ring.cc */                    \
  X(kBinomialBroadcast)             /* binomial.cc */                \
  X(kBinomialReduce)                /* binomial.cc */                \
  X(kDisseminationBarrier)          /* dissemination.cc */           \
  X(kPairwiseAlltoall)              /* pairwise.cc */                \
  X(kBruckAlltoall)                 /* bruck.cc */                   \
  X(kBidirRingAllreduce)            /* bidir_ring.cc */              \
  X(kBidirRingAllgather)            /* bidir_ring.cc */              \
  X(kBidirRingReduceScatter)        /* bidir_ring.cc */              \
  X(kHalvingDoublingAllreduce)      /* halving_doubling.cc */        \
  X(kRecursiveHalvingReduceScatter) /* halving_doubling.cc */        \
  X(kRecursiveDoublingAllreduce)    /* recursive_doubling.cc */      \
  X(kRecursiveDoublingAllgather)    /* recursive_doubling.cc */      \
  X(kBruckAllgather)                /* bruck.cc */                   \
  X(kDoubleBinaryTreeAllreduce)     /* double_binary_tree.cc */      \
  X(kReduceBroadcastAllreduce)      /* binomial.cc */                \
  X(kPipelinedChainBroadcast)       /* pipelined_chain.cc */         \
  X(kPipelinedChainReduce)          /* pipelined_chain.cc */         \
  X(kScatterAllgatherBroadcast)     /* scatter_allgather.cc */       \
  X(kOneShotAllreduce)              /* one_shot.cc */                \
  X(kTwoShotAllreduce)              /* two_shot.cc */                \
  X(kOneShotAllgather)              /* one_shot_allgather.cc */      \
  X(kHierTwoLevelAllreduce)         /* hier_allreduce.cc */          \
  X(kHierLeaderAllreduce)           /* hier_leader.cc */             \
  X(kHierAllgather)                 /* hier_allgather.cc */          \
  X(kHierReduceScatter)             /* hier_reduce_scatter.cc */     \
  X(kHierBroadcast)                 /* hier_broadcast.cc */          \
  X(kLinearGather)                  /* linear_gather_scatter.cc */   \
  X(kLinearScatter)                 /* linear_gather_scatter.cc */   \
  X(kBinomialGather)                /* binomial_gather_scatter.cc */ \
  X(kBinomialScatter)               /* binomial_gather_scatter.cc */

#define CHORUS_DECLARE_ALGORITHM(name) extern const Algorithm name;
CHORUS_ALGORITHMS(CHORUS_DECLARE_ALGORITHM)
#undef CHORUS_DECLARE_ALGORITHM

namespace {

#define CHORUS_ALGORITHM_ADDRESS(name) &name,
const Algorithm* const kAlgorithms[] = {CHORUS_ALGORITHMS(CHORUS_ALGORITHM_ADDRESS)};
#undef CHORUS_ALGORITHM_ADDRESS

// N = 1: the own contribution is the result.
Program single_rank_program(const CollectiveSpec& spec) {
  const BufferCounts counts = buffer_counts(spec);
  ProgramBuilder b(counts);
  using B = ProgramBuilder;
  if (has_data(spec.collective)) b.copy(B::input(0, counts.input), B::output(0, counts.output));
  return std::move(b).finish();
}

// The average: once the Output holds the sum, divide it by N. Output that a
// rank does not own (the non-roots of reduce) is left alone.
void append_average(Program& program, const CollectiveSpec& spec) {
  if (program.output_count == 0) return;
  if (!uses_output(spec.collective, spec.rank, spec.root)) return;
  Op op;
  op.kind = OpKind::divide;
  op.dst = ProgramBuilder::output(0, program.output_count);
  op.divisor = static_cast<uint32_t>(spec.nranks);
  op.step = 0;
  for (const Op& o : program.ops) op.step = std::max(op.step, o.step + 1);
  op.deps = sink_ops(program);
  program.ops.push_back(std::move(op));
}

}  // namespace

std::span<const Algorithm* const> registry_rows() {
  return kAlgorithms;
}

static_assert(std::size(kAlgorithms) < 255, "call stamps number the algorithms in one byte");

uint8_t algorithm_stamp_id(const Algorithm& algorithm) {
  for (size_t i = 0; i < std::size(kAlgorithms); ++i)
    if (kAlgorithms[i] == &algorithm) return static_cast<uint8_t>(i + 1);
  fail(ErrorCode::internal, "algorithm ", algorithm.name, " is not in the registry");
}

std::string_view algorithm_of_stamp_id(uint8_t id) {
  if (id == 0 || id > std::size(kAlgorithms)) return {};
  return kAlgorithms[id - 1]->name;
}

std::vector<const Algorithm*> algorithms_for(Collective collective) {
  std::vector<const Algorithm*> out;
  for (const Algorithm* a : kAlgorithms)
    if (a->collective == collective) out.push_back(a);
  return out;
}

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm* a : kAlgorithms)
    if (a->collective == collective && a->name == name) return a;
  return nullptr;
}

std::string algorithm_names(Collective collective) {
  std::string s;
  for (const Algorithm* a : algorithms_for(collective)) {
    if (!s.empty()) s += ", ";
    s += a->name;
  }
  return s;
}

Support check_common(const CollectiveSpec& spec) {
  if (spec.nranks < 1) return Support::no(str_cat("nranks must be >= 1, got ", spec.nranks));
  if (spec.rank < 0 || spec.rank >= spec.nranks)
    return Support::no(str_cat("rank ", spec.rank, " outside [0, ", spec.nranks, ")"));
  if (spec.root < 0 || spec.root >= spec.nranks)
    return Support::no(str_cat("root ", spec.root, " outside [0, ", spec.nranks, ")"));
  if (spec.elem_size == 0) return Support::no("element size 0");
  return Support::yes();
}

Support supports(const Algorithm& algorithm, const CollectiveSpec& spec) {
  if (spec.collective != algorithm.collective)
    return Support::no(str_cat(algorithm.name, " is an algorithm of ",
                               to_string(algorithm.collective), ", not of ",
                               to_string(spec.collective)));
  if (Support s = check_common(spec); !s) return s;
  if (spec.nranks == 1 || algorithm.own_support == nullptr) return Support::yes();
  return algorithm.own_support(spec);
}

Support supported_everywhere(const Algorithm& algorithm, const CollectiveSpec& spec) {
  CollectiveSpec s = spec;
  for (int r = 0; r < spec.nranks; ++r) {
    s.rank = r;
    if (Support ok = supports(algorithm, s); !ok) return ok;
  }
  return Support::yes();
}

std::vector<const Algorithm*> candidates_for(const CollectiveSpec& spec) {
  std::vector<const Algorithm*> out;
  for (const Algorithm* a : algorithms_for(spec.collective))
    if (supported_everywhere(*a, spec)) out.push_back(a);
  return out;
}

Program build_program(const Algorithm& algorithm, const CollectiveSpec& spec) {
  Program program = spec.nranks == 1 ? single_rank_program(spec) : algorithm.build(spec);
  if (spec.average) append_average(program, spec);
  return program;
}

std::vector<Program> build_all(const Algorithm& algorithm, const CollectiveSpec& spec) {
  std::vector<Program> programs;
  programs.reserve(static_cast<size_t>(spec.nranks));
  CollectiveSpec s = spec;
  for (int r = 0; r < spec.nranks; ++r) {
    s.rank = r;
    if (Support ok = supports(algorithm, s); !ok)
      fail(ErrorCode::invalid_argument, to_string(spec.collective), "(", algorithm.name,
           ") does not support N = ", spec.nranks, ", count ", spec.count, ": ", ok.reason);
    programs.push_back(build_program(algorithm, s));
  }
  return programs;
}

Prediction closed_form(const Algorithm& algorithm, int nranks, double bytes,
                       const CostParams& params) {
  if (nranks == 1) return Prediction::time(0);
  if (algorithm.costs.empty())
    return Prediction::none(str_cat(to_string(algorithm.collective), "(", algorithm.name,
                                    ") has no closed form in the cost model"));
  const ClosedForm& f = algorithm.costs.front();
  if (f.ports != 0 && f.ports != params.ports)
    return Prediction::none(str_cat(to_string(algorithm.collective), "(", algorithm.name,
                                    ")'s closed form assumes ", f.ports, " port(s), not ",
                                    params.ports));
  return f.at(nranks, bytes, params);
}

const ClosedForm* closed_form_on(const Algorithm& algorithm, std::string_view topology, int nranks,
                                 int ports) {
  for (const ClosedForm& f : algorithm.costs)
    if (closed_form_applies(f, topology, nranks, ports)) return &f;
  return nullptr;
}

}  // namespace chorus
