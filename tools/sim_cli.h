// chorus-sim, the command line front end of the simulator: for a collective,
// a rank count and a range of sizes, simulates every chosen algorithm on a
// topology, prints simulated time next to the closed form and the lower bound,
// marks the fastest algorithm of each size and lists the crossover sizes.
//
//   chorus-sim allreduce --ranks 64 -b 8 -e 64M -f 4 --alpha 2us --beta 25GB/s
//       --topology ring --algo ring,halving_doubling --json out.json --plot out.svg
//   (one command line)
//
// tools/chorus_sim.cc is a thin main over sim_cli_main; tests call it directly.
// The sweep itself (and its JSON) is src/analysis/sim_sweep.h; each run
// builds one rank's Program at a time (src/algorithms/simulate.h).
#pragma once

#include <iosfwd>

namespace chorus {

// Runs chorus-sim with argv (argv[0] is the program name). Prints the table to
// `out` and errors to `err`; returns 0 on success, non-zero on bad input or a
// failed simulation.
int sim_cli_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace chorus
