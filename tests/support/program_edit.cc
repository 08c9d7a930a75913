#include "support/program_edit.h"

#include <algorithm>
#include <vector>

namespace chorus::test {

void erase_op(Program& p, OpIndex i) {
  const std::vector<OpIndex> inherited = p.ops[i].deps;
  p.ops.erase(p.ops.begin() + i);
  for (Op& o : p.ops) {
    std::vector<OpIndex> deps;
    for (OpIndex d : o.deps) {
      if (d == i)
        deps.insert(deps.end(), inherited.begin(), inherited.end());
      else
        deps.push_back(d > i ? d - 1 : d);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    o.deps = std::move(deps);
  }
}

}  // namespace chorus::test
