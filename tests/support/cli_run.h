// run_cli: runs a tool's command-line part (a `<tool>_cli_main` of tools/) on
// `args` with its output and errors captured, as tests/tools/ drive them.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace chorus::test {

struct CliRun {
  int rc;
  std::string out, err;
};

// `main` as tools/*_cli.h declare theirs; `program` is argv[0].
using CliMain = int (*)(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

inline CliRun run_cli(CliMain main, const char* program, std::vector<std::string> args) {
  args.insert(args.begin(), program);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int rc = main(static_cast<int>(argv.size()), argv.data(), out, err);
  return {rc, out.str(), err.str()};
}

}  // namespace chorus::test
