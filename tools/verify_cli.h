// chorus-verify, the command line front end of the symbolic verifier: proves
// algorithms of the registry and prints the per-rank message, byte and step
// counts it measured, and prints the generated sections of
// docs/ALGORITHMS.md (tests/docs/ compares them with the committed text).
//
//   chorus-verify allreduce --ranks 8,13 --count 1031 [--algo ring,bruck|all]
//   chorus-verify all --ranks 8,13 --count 8192 --windows   the counts docs/ALGORITHMS.md shows
//   chorus-verify allreduce --algo one_shot,two_shot --windows [--window-buffers]
//   chorus-verify --markdown        docs/ALGORITHMS.md's table of algorithms, from the registry
//   chorus-verify --closed-forms    its table of closed forms, from the registry's ClosedForms
//   chorus-verify --closed-forms --json allreduce --ranks 8 --bytes 8,1M --alpha 20us
//       --beta 0.12GB/s   every form's time (and the seed's AllReduce figure) as JSON
//
// Exit status: 0 when every case is proved, 1 when one fails (the error names
// the algorithm, N, count, rank and op), 2 on bad arguments (CLI11's own
// codes for what it rejects itself). tools/chorus_verify.cc is a thin main
// over verify_cli_main; tests call it directly.
#pragma once

#include <iosfwd>
#include <string>

namespace chorus {

// Runs chorus-verify with argv (argv[0] is the program name). Prints to `out`
// and errors to `err`; returns the exit status above.
int verify_cli_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// docs/ALGORITHMS.md's table of algorithms (--markdown): every algorithm of
// the registry by collective, its closed forms and where each is exact, its
// constraints, and the steps and messages per rank the verifier proves at
// N = 8 and 13 (count 8192, the ranks sharing windows).
std::string algorithms_markdown();

// docs/ALGORITHMS.md's table of closed forms (--closed-forms): one row per
// ClosedForm of every algorithm (one for an algorithm without any), its
// formula, where it is exact, and its time at N = 8 and 13 for M = 64 KiB,
// alpha = 2 us, beta = 25 GB/s, gamma = 0.1 ns/B on the ports it assumes.
std::string closed_forms_markdown();

}  // namespace chorus
