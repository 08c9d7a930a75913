#include "algorithms/one_sided.h"

namespace chorus::one_sided {

Support needs_windows(const CollectiveSpec& spec) {
  if (spec.windows) return Support::yes();
  return Support::no(
      "needs shared windows (every rank on one host, over shm or inproc); this "
      "communicator's transport has none");
}

std::vector<OpIndex> signal_all(ProgramBuilder& b, int rank, int nranks, uint32_t flag,
                                const std::vector<OpIndex>& deps, uint32_t step) {
  std::vector<OpIndex> out;
  for (int k = 1; k < nranks; ++k) out.push_back(b.signal((rank + k) % nranks, flag, deps, step));
  return out;
}

std::vector<OpIndex> wait_all(ProgramBuilder& b, int rank, int nranks, uint32_t flag,
                              uint32_t step) {
  std::vector<OpIndex> out(static_cast<size_t>(nranks), 0);
  for (int k = 1; k < nranks; ++k) {
    const int q = (rank + k) % nranks;
    out[static_cast<size_t>(q)] = b.wait(q, flag, {}, step);
  }
  return out;
}

Opening open(ProgramBuilder& b, const CollectiveSpec& spec, size_t count) {
  Opening o;
  if (!spec.window_buffers) {
    o.at = b.alloc_window(count);
    b.stage_input_at(o.at);
    o.staged.push_back(
        b.copy(ProgramBuilder::input(0, count), ProgramBuilder::window(o.at, count), {}, 0));
  }
  signal_all(b, spec.rank, spec.nranks, kReady, o.staged, 0);
  o.ready = wait_all(b, spec.rank, spec.nranks, kReady, 0);
  return o;
}

std::vector<OpIndex> close(ProgramBuilder& b, int rank, int nranks,
                           const std::vector<OpIndex>& reads, uint32_t step) {
  signal_all(b, rank, nranks, kDone, reads, step);
  std::vector<OpIndex> waits;
  for (int k = 1; k < nranks; ++k) waits.push_back(b.wait((rank + k) % nranks, kDone, {}, step));
  return waits;
}

}  // namespace chorus::one_sided
