// chorus-run: starts N ranks of a program on this host.
//
//   chorus-run -n 4 [--transport shm|tcp] [--store file|tcp] [--elastic [--replace K]]
//              [--] program args...
//
// Its own options come first. The first argument that is neither one of them
// nor an option's value is the program, and the program and everything after
// it reach the program unchanged (`chorus-run -n 1 prog -n 5` gives prog
// "-n 5"); a "--" before the program ends the options and is dropped.
//
// It starts the ranks through tools/launcher.h (chorus-perf's local ranks
// start the same way): a store of its own (a FileStore in a private temporary
// directory, removed at exit; or, with --store tcp, a TcpStore that rank 0
// serves on a free loopback port, with a fresh random CHORUS_STORE_SECRET that
// only its ranks know), CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_STORE (and
// CHORUS_TRANSPORT when --transport is given) for each rank, and torch's
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
// MASTER_PORT (a free loopback port for rank 0's TCPStore), so that a
// torch.distributed script (env://) starts unchanged; it prefixes
// every line the ranks print with "[rank] ". When a rank exits non-zero or is
// killed, the others get --grace seconds to finish on their own (so that they
// can report the peer failure they see), then SIGTERM, then SIGKILL; chorus-run
// then exits non-zero (the first failing rank's status, 128+signal for a
// signal). SIGINT and SIGTERM sent to chorus-run are passed on to the ranks.
//
// With --elastic a rank that fails stops no other: each rank's exit is
// reported as it happens ("chorus-run: rank 3 was killed by signal 9
// (Killed); 3 rank(s) go on"), and with --replace K up to K failed ranks are
// replaced by new processes that join by grow: the k-th with
// CHORUS_JOIN_GENERATION=k and no CHORUS_RANK, so that the program calls
// chorus::join_from_env() where that variable is set (docs/LAUNCHING.md).
//
// `chorus-run --params` prints every CHORUS_* setting (core/config.h's list):
// the value in effect, where it came from (environment or default), its
// default and a one-line description; a malformed value is the error that
// a rank would stop with. `--params --markdown` prints the table of
// docs/LAUNCHING.md (name, default, description), which a docs test compares.
//
// For several hosts, start the ranks with mpirun, srun or torchrun instead;
// chorus::init_from_env() reads their variables.
#include "core/config.h"
#include "core/transport_kind.h"
#include "launcher.h"

#include <chorus/error.h>

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// chorus-run's options that take a value (as separate arguments).
bool takes_value(const std::string& option) {
  return option == "-n" || option == "--nranks" || option == "--transport" || option == "--store" ||
         option == "--grace" || option == "--replace";
}

// Splits the command line into chorus-run's own arguments (argv[0] first)
// and the program with its arguments, verbatim.
void split_command_line(int argc, char** argv, std::vector<std::string>& own,
                        std::vector<std::string>& command) {
  own.assign(argv, argv + 1);
  int i = 1;
  while (i < argc) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the program
    own.push_back(a);
    ++i;
    if (takes_value(a) && i < argc) own.push_back(argv[i++]);
  }
  command.assign(argv + i, argv + argc);
}

// `--params`: one line per setting, in aligned columns.
void print_params(std::FILE* out) {
  const std::vector<chorus::SettingValue> values = chorus::settings_in_effect(chorus::env_var);
  size_t w_name = 0, w_value = 0, w_default = 0;
  for (const auto& v : values) {
    w_name = std::max(w_name, std::strlen(v.setting->name));
    w_value = std::max(w_value, v.value.size());
    w_default = std::max(w_default, v.default_value.size());
  }
  w_name = std::max(w_name, std::strlen("setting"));
  std::fprintf(out, "%-*s  %-*s  %-11s  %-*s  %s\n", static_cast<int>(w_name), "setting",
               static_cast<int>(w_value), "value", "source", static_cast<int>(w_default), "default",
               "description");
  for (const auto& v : values)
    std::fprintf(out, "%-*s  %-*s  %-11s  %-*s  %s\n", static_cast<int>(w_name), v.setting->name,
                 static_cast<int>(w_value), v.value.c_str(), v.source.c_str(),
                 static_cast<int>(w_default), v.default_value.c_str(), v.setting->description);
}

// `--params --markdown`: docs/LAUNCHING.md's table, from the defaults alone.
void print_params_markdown(std::FILE* out) {
  const std::vector<chorus::SettingValue> values =
      chorus::settings_in_effect(chorus::env_from_map({}));
  std::fprintf(out, "| variable | default | meaning |\n|---|---|---|\n");
  for (const auto& v : values) {
    std::string description = v.setting->description;
    std::string escaped;
    for (char ch : description) {
      if (ch == '|') escaped += '\\';
      escaped += ch;
    }
    std::fprintf(out, "| `%s` | %s | %s |\n", v.setting->name, v.default_value.c_str(),
                 escaped.c_str());
  }
}

int run(int argc, char** argv) {
  CLI::App app{"chorus-run: start N local ranks of a chorus program"};
  int nranks = 0;
  std::string transport;
  std::string store_kind = "file";
  double grace = 1.0;
  bool elastic = false;
  int replace = 0;
  std::vector<std::string> command;
  bool params = false;
  bool markdown = false;
  app.add_option("-n,--nranks", nranks, "number of ranks (required to start a job)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--params", params,
               "print every CHORUS_* setting: value in effect, its source, default, description");
  app.add_flag("--markdown", markdown,
               "with --params: the table of docs/LAUNCHING.md (setting, default, description)");
  app.add_option("--transport", transport, "force a transport for every peer")
      ->check(CLI::IsMember(chorus::transport_name_list(chorus::process_transports())));
  app.add_option("--store", store_kind, "rendezvous store: a private directory or a TcpStore")
      ->check(CLI::IsMember({"file", "tcp"}));
  app.add_option("--grace", grace,
                 "seconds the other ranks get to exit on their own after one fails")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_flag("--elastic", elastic,
               "a rank that fails stops no other: each rank's exit is reported as it happens, and "
               "the job succeeds when no rank exits non-zero on its own (killed ranks are what it "
               "survives) and one exits 0");
  app.add_option("--replace", replace,
                 "with --elastic: replace up to this many failed ranks, each by a new process that "
                 "joins by grow (CHORUS_JOIN_GENERATION=1, 2, ...; docs/LAUNCHING.md)")
      ->check(CLI::Range(0, 4096));
  app.set_version_flag("--version", "chorus-run " CHORUS_VERSION);
  app.footer(
      "[--] program [args...]   the program each rank runs; it and every argument after "
      "it are passed on unchanged");
  std::vector<std::string> own;
  split_command_line(argc, argv, own, command);
  std::vector<const char*> own_argv;
  for (const auto& a : own) own_argv.push_back(a.c_str());
  CLI11_PARSE(app, static_cast<int>(own_argv.size()), own_argv.data());
  if (markdown && !params) {
    std::fprintf(stderr, "chorus-run: --markdown needs --params\n");
    return 2;
  }
  if (params) {
    if (markdown)
      print_params_markdown(stdout);
    else
      print_params(stdout);
    return 0;
  }
  if (nranks < 1) {
    std::fprintf(stderr, "chorus-run: -n N is required\n%s", app.help().c_str());
    return 2;
  }
  if (replace > 0 && !elastic) {
    std::fprintf(stderr, "chorus-run: --replace needs --elastic\n");
    return 2;
  }
  if (command.empty()) {
    std::fprintf(stderr, "chorus-run: no program given\n%s", app.help().c_str());
    return 2;
  }

  // The store, each rank's variables, core binding, the "[rank] " prefixes and
  // stopping the ranks are the launcher's (tools/launcher.h).
  chorus::LocalLaunch launch;
  launch.tool = "chorus-run";
  launch.nranks = nranks;
  launch.tcp_store = store_kind == "tcp";
  launch.transport = transport;
  launch.grace = std::chrono::duration<double>(grace);
  launch.elastic = elastic;
  launch.replacements = replace;
  std::vector<char*> cargv;
  for (auto& c : command) cargv.push_back(c.data());
  cargv.push_back(nullptr);
  auto rank_main = [&](int) {
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "chorus-run: cannot run %s: %s\n", cargv[0], std::strerror(errno));
    return 127;
  };
  return chorus::launch_local_ranks(launch, rank_main).status;
}

}  // namespace

// A bad setting (CHORUS_BIND=bogus) or a failure to set up the job is one
// line naming it and exit status 2, never an uncaught exception.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-run: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-run: error: %s\n", e.what());
  }
  return 2;
}
