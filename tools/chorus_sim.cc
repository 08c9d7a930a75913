// chorus-sim: simulated time, closed form and lower bound of collective
// algorithms on a network model. See tools/sim_cli.h.
#include "sim_cli.h"

#include <iostream>

int main(int argc, char** argv) {
  return chorus::sim_cli_main(argc, argv, std::cout, std::cerr);
}
