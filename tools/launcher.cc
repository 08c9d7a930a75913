#include "launcher.h"

#include "bootstrap/affinity.h"
#include "core/check.h"
#include "core/config.h"
#include "core/fd.h"
#include "net/socket.h"
#include "store/store_auth.h"

#include <chorus/error.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;

// How long the ranks get between SIGTERM and SIGKILL.
constexpr auto kKillAfterTerm = std::chrono::seconds(3);

// One rank's child process and, when its output is prefixed, the pipes of its
// stdout and stderr.
struct Rank {
  pid_t pid = -1;
  Fd out;
  Fd err;
  std::string out_partial;
  std::string err_partial;
  bool exited = false;
};

// The private store directory, removed when the launch returns, however it
// does.
class TempDir {
 public:
  explicit TempDir(const std::string& tool) {
    std::string templ = (std::filesystem::temp_directory_path() / (tool + ".XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr)
      fail(ErrorCode::system, "cannot create a temporary directory: ", std::strerror(errno));
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// SIGCHLD, SIGINT, SIGTERM and SIGPIPE blocked and read through a signalfd,
// so that no handler and no global state is needed; the mask is restored on
// scope exit, and children restore it before they run.
class Signals {
 public:
  Signals() {
    sigemptyset(&mask_);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGPIPE}) sigaddset(&mask_, s);
    ::sigprocmask(SIG_BLOCK, &mask_, &old_mask_);
    fd_ = Fd(::signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!fd_.valid()) {
      const int e = errno;
      ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      fail(ErrorCode::system, "signalfd: ", std::strerror(e));
    }
  }
  ~Signals() {
    // Signals that arrived since the last look (SIGCHLD of the last ranks)
    // are consumed here rather than delivered once unblocked.
    signalfd_siginfo si;
    while (::read(fd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    }
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  Signals(const Signals&) = delete;
  Signals& operator=(const Signals&) = delete;

  int fd() const { return fd_.get(); }
  // In a child: the mask the launcher found, and no signalfd.
  void restore_in_child() {
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    ::close(fd_.release());
  }

 private:
  sigset_t mask_;
  sigset_t old_mask_;
  Fd fd_;
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
bool drain(int rank, Fd& fd, std::string& partial, FILE* to) {
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

uint16_t free_loopback_port(const std::string& tool) {
  Fd fd = listen_on(resolve("127.0.0.1", 0, tool), tool);
  return local_port(fd.get());
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

// The variables of rank r (in the child, before rank_main).
void set_rank_environment(int r, int nranks, const std::string& store, const std::string& secret,
                          const std::string& transport, const std::string& master_port) {
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
}

// A replacement's variables on top of its slot's: it joins by grow
// (chorus::join_from_env), so it has no rank or world size of its own.
void set_joiner_environment(int generation) {
  for (const char* name :
       {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"})
    ::unsetenv(name);
  ::setenv("CHORUS_JOIN_GENERATION", std::to_string(generation).c_str(), 1);
}

// Rank r's life in the child process; never returns.
[[noreturn]] void run_child(const LocalLaunch& o, int r, const std::function<int(int)>& rank_main) {
  int status = 1;
  try {
    status = rank_main(r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", o.tool.c_str(), r, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: rank %d: unknown exception\n", o.tool.c_str(), r);
  }
  std::cout.flush();
  std::fflush(nullptr);
  ::_exit(status);  // no destructors of the launcher's objects (its TempDir)
}

// Kills and reaps the ranks started so far (a launch that failed half way).
void kill_started(std::vector<Rank>& ranks) {
  for (Rank& rk : ranks)
    if (rk.pid > 0 && !rk.exited) ::kill(rk.pid, SIGKILL);
  for (Rank& rk : ranks)
    if (rk.pid > 0 && !rk.exited) ::waitpid(rk.pid, nullptr, 0);
}

}  // namespace

LaunchResult launch_local_ranks(const LocalLaunch& o,
                                const std::function<int(int rank)>& rank_main) {
  // Every CHORUS_* setting the ranks will read is checked before any of them
  // starts, so that a bad one ends the job at once with its name.
  const Config config = Config::from_env();
  if (o.nranks < 1) fail(ErrorCode::invalid_argument, o.tool, ": need at least one rank");

  std::optional<TempDir> dir;
  std::string store;
  if (o.tcp_store) {
    store = "tcp://127.0.0.1:" + std::to_string(free_loopback_port(o.tool));
  } else {
    dir.emplace(o.tool);
    store = "file://" + dir->path() + "/store";
  }
  // The TcpStore admits only processes that hold this secret: its ranks.
  const std::string secret = o.tcp_store ? random_secret() : "";
  // For torch.distributed's env:// start-up: rank 0 serves torch's TCPStore
  // on this port (chorus's own store never reads MASTER_*: CHORUS_STORE is set).
  std::string master_port = std::to_string(free_loopback_port(o.tool));
  while (store.ends_with(":" + master_port))
    master_port = std::to_string(free_loopback_port(o.tool));

  Signals signals;
  std::vector<Rank> ranks(static_cast<size_t>(o.nranks));
  // Nothing buffered is written twice (once by a child).
  std::cout.flush();
  std::fflush(nullptr);
  // Starts the process of launcher slot `r`: rank r, or with `generation`
  // > 0 a replacement that joins the job by grow (no rank of its own).
  auto start = [&](int r, int generation) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (o.prefix_output && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
      const int e = errno;
      for (int fd : {out[0], out[1]})
        if (fd >= 0) ::close(fd);
      kill_started(ranks);
      fail(ErrorCode::system, "cannot make the pipes of rank ", r, ": ", std::strerror(e));
    }
    std::cout.flush();
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      for (int fd : {out[0], out[1], err[0], err[1]})
        if (fd >= 0) ::close(fd);
      kill_started(ranks);
      fail(ErrorCode::system, "cannot start rank ", r, ": fork: ", std::strerror(e));
    }
    if (pid == 0) {
      if (o.prefix_output) {
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
      }
      signals.restore_in_child();
      if (config.bind_cores) bind_local_rank(r % o.nranks, o.nranks);
      set_rank_environment(r, o.nranks, store, secret, o.transport, master_port);
      if (generation > 0) set_joiner_environment(generation);
      run_child(o, r, rank_main);
    }
    if (static_cast<size_t>(r) >= ranks.size()) ranks.resize(static_cast<size_t>(r) + 1);
    Rank& rk = ranks[static_cast<size_t>(r)];
    rk.pid = pid;
    if (o.prefix_output) {
      ::close(out[1]);
      ::close(err[1]);
      rk.out = Fd(out[0]);
      rk.err = Fd(err[0]);
    }
  };
  for (int r = 0; r < o.nranks; ++r) start(r, 0);
  int replaced = 0;  // replacements started

  LaunchResult result;
  bool failed = false;                       // a rank has failed
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
      result.worst = std::max(result.worst, exit_code_of(status));
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (o.elastic) {
        // The others go on: each exit is reported, a killed rank may be
        // replaced, and only a rank that exits on its own decides the
        // status (a killed one is a failure the job was made to survive).
        const bool killed = WIFSIGNALED(status);
        if (!killed && !ok && result.status == 0) result.status = exit_code_of(status);
        if (ok) ++result.succeeded;
        const bool replace = !ok && replaced < o.replacements && !kill_at;
        if (o.report)
          std::fprintf(o.err, "%s: rank %zu %s; %d rank(s) go on%s\n", o.tool.c_str(), r,
                       describe_status(status).c_str(), running(),
                       replace
                           ? str_cat("; starting replacement ", replaced + 1, " as [", ranks.size(),
                                     "] (CHORUS_JOIN_GENERATION=", replaced + 1, ")")
                                 .c_str()
                           : "");
        if (replace) {
          ++replaced;
          start(static_cast<int>(ranks.size()), replaced);
        }
        continue;
      }
      if (!ok && !failed && !kill_at) {
        failed = true;
        result.status = exit_code_of(status);
        if (o.report)
          std::fprintf(o.err, "%s: rank %zu %s; stopping the other ranks\n", o.tool.c_str(), r,
                       describe_status(status).c_str());
        term_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(o.grace);
      }
    }
    bool pipes_open = false;
    for (auto& rk : ranks) pipes_open |= rk.out.valid() || rk.err.valid();
    if (running() == 0 && !pipes_open) break;

    const auto now = Clock::now();
    if (term_at && now >= *term_at && !kill_at) {
      signal_all(SIGTERM);
      kill_at = now + kKillAfterTerm;
    }
    if (kill_at && now >= *kill_at) signal_all(SIGKILL);

    fds.clear();
    owners.clear();
    fds.push_back({signals.fd(), POLLIN, 0});
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
    if (term_at && !kill_at) timeout = std::min(timeout, poll_timeout_ms(*term_at));
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      const int e = errno;
      kill_started(ranks);
      fail(ErrorCode::system, "poll: ", std::strerror(e));
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(signals.fd(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
          if (o.report)
            std::fprintf(o.err, "%s: got signal %u; stopping the ranks\n", o.tool.c_str(),
                         si.ssi_signo);
          signal_all(static_cast<int>(si.ssi_signo));
          if (result.status == 0) result.status = 128 + static_cast<int>(si.ssi_signo);
          if (!kill_at) kill_at = Clock::now() + kKillAfterTerm;
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [r, is_err] = owners[i - 1];
      Rank& rk = ranks[r];
      if (is_err)
        drain(static_cast<int>(r), rk.err, rk.err_partial, o.err);
      else
        drain(static_cast<int>(r), rk.out, rk.out_partial, o.out);
    }
  }
  if (o.elastic && result.status == 0 && result.succeeded == 0)
    result.status = std::max(result.worst, 1);
  return result;
}

}  // namespace chorus
