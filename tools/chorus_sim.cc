// chorus-sim: simulated time, closed form and lower bound of collective
// algorithms on a network model. See src/sim/sim_cli.h.
#include "sim/sim_cli.h"

#include <iostream>

int main(int argc, char** argv) { return chorus::sim_cli_main(argc, argv, std::cout, std::cerr); }
