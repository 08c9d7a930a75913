#include "bootstrap/affinity.h"

#include <sched.h>

#include <vector>

namespace chorus {

int bind_local_rank(int local_rank, int local_size) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return -1;
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  if (local_rank < 0 || local_size <= 0 || local_size > static_cast<int>(cores.size())) return -1;
  const int core = cores[static_cast<size_t>(local_rank)];
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  return sched_setaffinity(0, sizeof(one), &one) == 0 ? core : -1;
}

}  // namespace chorus
