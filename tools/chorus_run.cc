// chorus-run: starts N ranks of a program on this host.
//
//   chorus-run -n 4 [--transport shm|tcp] [--store file|tcp] [--] program args...
//
// Its own options come first. The first argument that is neither one of them
// nor an option's value is the program, and the program and everything after
// it reach the program unchanged (`chorus-run -n 1 prog -n 5` gives prog
// "-n 5"); a "--" before the program ends the options and is dropped.
//
// It makes a store of its own (a FileStore in a private temporary directory,
// removed at exit; or, with --store tcp, a TcpStore that rank 0 serves on a
// free loopback port, with a fresh random CHORUS_STORE_SECRET that only its
// ranks know), sets CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_STORE (and
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
// For several hosts, start the ranks with mpirun, srun or torchrun instead;
// chorus::init_from_env() reads their variables.
#include "bootstrap/affinity.h"
#include "core/config.h"
#include "net/socket.h"
#include "store/store_auth.h"

#include <chorus/error.h>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// One rank's child process and the pipes of its stdout and stderr.
struct Rank {
  pid_t pid = -1;
  chorus::Fd out;
  chorus::Fd err;
  std::string out_partial;
  std::string err_partial;
  bool exited = false;
  int status = 0;
};

// Removes the private store directory when chorus-run exits, however it does.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "chorus-run.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      std::perror("chorus-run: mkdtemp");
      std::exit(2);
    }
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes complete lines of `buf` to `to`, each prefixed with the rank; keeps
// the unfinished tail for later (or flushes it when `flush`).
void emit_lines(int rank, std::string& buf, FILE* to, bool flush) {
  size_t start = 0;
  while (true) {
    const size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::fprintf(to, "[%d] %.*s\n", rank, static_cast<int>(nl - start), buf.data() + start);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    std::fprintf(to, "[%d] %s\n", rank, buf.c_str());
    buf.clear();
  }
  std::fflush(to);
}

// Reads what is available on a rank's pipe; false at EOF.
bool drain(int rank, chorus::Fd& fd, std::string& partial, FILE* to) {
  char buf[65536];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n > 0) {
    partial.append(buf, static_cast<size_t>(n));
    emit_lines(rank, partial, to, false);
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  emit_lines(rank, partial, to, true);
  fd.reset();
  return false;
}

uint16_t free_loopback_port() {
  chorus::Fd fd = chorus::listen_on(chorus::resolve("127.0.0.1", 0, "chorus-run"), "chorus-run");
  return chorus::local_port(fd.get());
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// chorus-run's options that take a value (as separate arguments).
bool takes_value(const std::string& option) {
  return option == "-n" || option == "--nranks" || option == "--transport" ||
         option == "--store" || option == "--grace";
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

int run(int argc, char** argv) {
  CLI::App app{"chorus-run: start N local ranks of a chorus program"};
  int nranks = 0;
  std::string transport;
  std::string store_kind = "file";
  double grace = 1.0;
  std::vector<std::string> command;
  app.add_option("-n,--nranks", nranks, "number of ranks")->required()->check(CLI::Range(1, 4096));
  app.add_option("--transport", transport, "force a transport for every peer")
      ->check(CLI::IsMember({"shm", "tcp"}));
  app.add_option("--store", store_kind, "rendezvous store: a private directory or a TcpStore")
      ->check(CLI::IsMember({"file", "tcp"}));
  app.add_option("--grace", grace,
                 "seconds the other ranks get to exit on their own after one fails")
      ->check(CLI::Range(0.0, 3600.0));
  app.set_version_flag("--version", "chorus-run " CHORUS_VERSION);
  app.footer("[--] program [args...]   the program each rank runs; it and every argument after "
             "it are passed on unchanged");
  std::vector<std::string> own;
  split_command_line(argc, argv, own, command);
  std::vector<const char*> own_argv;
  for (const auto& a : own) own_argv.push_back(a.c_str());
  CLI11_PARSE(app, static_cast<int>(own_argv.size()), own_argv.data());
  if (command.empty()) {
    std::fprintf(stderr, "chorus-run: no program given\n%s", app.help().c_str());
    return 2;
  }

  // Every CHORUS_* setting the ranks will read is checked before any of them
  // starts, so that a bad one ends the job at once with its name.
  const chorus::Config config = chorus::Config::from_env();

  TempDir dir;
  const std::string store = store_kind == "tcp"
                                ? "tcp://127.0.0.1:" + std::to_string(free_loopback_port())
                                : "file://" + dir.path() + "/store";
  // The TcpStore admits only processes that hold this secret: its ranks.
  const std::string secret = store_kind == "tcp" ? chorus::random_secret() : "";
  // For torch.distributed's env:// start-up: rank 0 serves torch's TCPStore
  // on this port (chorus's own store never reads MASTER_*: CHORUS_STORE is set).
  std::string master_port = std::to_string(free_loopback_port());
  while (store.ends_with(":" + master_port)) master_port = std::to_string(free_loopback_port());

  // Signals arrive through a signalfd, so that no handler and no global state
  // is needed; the children get the default disposition back before exec.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGPIPE);
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &mask, &old_mask);
  chorus::Fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd.valid()) {
    std::perror("chorus-run: signalfd");
    return 2;
  }

  const bool bind = config.bind_cores;
  std::vector<Rank> ranks(static_cast<size_t>(nranks));
  std::vector<char*> cargv;
  for (auto& c : command) cargv.push_back(c.data());
  cargv.push_back(nullptr);
  for (int r = 0; r < nranks; ++r) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      std::perror("chorus-run: pipe");
      return 2;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("chorus-run: fork");
      return 2;
    }
    if (pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      if (bind) chorus::bind_local_rank(r, nranks);
      ::setenv("CHORUS_RANK", std::to_string(r).c_str(), 1);
      ::setenv("CHORUS_WORLD_SIZE", std::to_string(nranks).c_str(), 1);
      ::setenv("CHORUS_STORE", store.c_str(), 1);
      if (!secret.empty()) ::setenv("CHORUS_STORE_SECRET", secret.c_str(), 1);
      if (!transport.empty()) ::setenv("CHORUS_TRANSPORT", transport.c_str(), 1);
      // torchrun's variables: every rank is local, so local and global agree.
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nranks).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nranks).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", master_port.c_str(), 1);
      ::execvp(cargv[0], cargv.data());
      std::fprintf(stderr, "chorus-run: cannot run %s: %s\n", cargv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    Rank& rk = ranks[static_cast<size_t>(r)];
    rk.pid = pid;
    rk.out = chorus::Fd(out[0]);
    rk.err = chorus::Fd(err[0]);
  }

  int first_failure = -1;  // rank
  int result = 0;
  std::optional<Clock::time_point> term_at;  // when to send SIGTERM
  std::optional<Clock::time_point> kill_at;  // when to send SIGKILL
  auto running = [&] {
    int n = 0;
    for (auto& rk : ranks) n += rk.exited ? 0 : 1;
    return n;
  };
  auto signal_all = [&](int sig) {
    for (auto& rk : ranks)
      if (!rk.exited) ::kill(rk.pid, sig);
  };
  auto begin_stop = [&](double after_s) {
    if (term_at) return;
    term_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(after_s));
  };

  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> owners;  // (rank, is_err) per pollfd after the first
  while (true) {
    // Reap every rank that has exited.
    for (size_t r = 0; r < ranks.size(); ++r) {
      Rank& rk = ranks[r];
      if (rk.exited) continue;
      int status = 0;
      if (::waitpid(rk.pid, &status, WNOHANG) != rk.pid) continue;
      rk.exited = true;
      rk.status = status;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && first_failure < 0 && !kill_at) {
        first_failure = static_cast<int>(r);
        result = exit_code_of(status);
        std::fprintf(stderr, "chorus-run: rank %zu %s; stopping the other ranks\n", r,
                     describe_status(status).c_str());
        begin_stop(grace);
      }
    }
    bool pipes_open = false;
    for (auto& rk : ranks) pipes_open |= rk.out.valid() || rk.err.valid();
    if (running() == 0 && !pipes_open) break;

    const auto now = Clock::now();
    if (term_at && now >= *term_at && !kill_at) {
      signal_all(SIGTERM);
      kill_at = now + std::chrono::seconds(3);
    }
    if (kill_at && now >= *kill_at) signal_all(SIGKILL);

    fds.clear();
    owners.clear();
    fds.push_back({sigfd.get(), POLLIN, 0});
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (ranks[r].out.valid()) {
        fds.push_back({ranks[r].out.get(), POLLIN, 0});
        owners.emplace_back(r, false);
      }
      if (ranks[r].err.valid()) {
        fds.push_back({ranks[r].err.get(), POLLIN, 0});
        owners.emplace_back(r, true);
      }
    }
    int timeout = 200;
    if (term_at && !kill_at) timeout = std::min(timeout, chorus::poll_timeout_ms(*term_at));
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      std::perror("chorus-run: poll");
      break;
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
          std::fprintf(stderr, "chorus-run: got signal %u; stopping the ranks\n", si.ssi_signo);
          signal_all(static_cast<int>(si.ssi_signo));
          if (result == 0) result = 128 + static_cast<int>(si.ssi_signo);
          if (!kill_at) kill_at = Clock::now() + std::chrono::seconds(3);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [r, is_err] = owners[i - 1];
      Rank& rk = ranks[r];
      if (is_err)
        drain(static_cast<int>(r), rk.err, rk.err_partial, stderr);
      else
        drain(static_cast<int>(r), rk.out, rk.out_partial, stdout);
    }
  }
  return result;
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
