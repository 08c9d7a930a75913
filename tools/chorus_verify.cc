// chorus-verify: proves algorithms with the symbolic verifier, prints the
// per-rank counts it measured and docs/ALGORITHMS.md's generated sections.
// See tools/verify_cli.h.
#include "verify_cli.h"

#include <iostream>

int main(int argc, char** argv) {
  return chorus::verify_cli_main(argc, argv, std::cout, std::cerr);
}
