// chorus-run and start-up failures as a user meets them: real processes,
// started by chorus-run. chorus-run passes the program's arguments verbatim;
// a duplicate rank, disagreeing world sizes and a bad value in the store fail
// every rank with the cause named; a wrong store secret is refused at once.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
  int status = -1;     // exit status, or -1
  std::string output;  // stdout and stderr together
};

// Runs argv (argv[0] a path) with `env` added, and collects its output.
Outcome run(const std::vector<std::string>& argv,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  int pipefd[2];
  EXPECT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::dup2(pipefd[1], STDERR_FILENO);
    // A failure that is not caught must not wait for the default 300 s.
    ::setenv("CHORUS_TIMEOUT", "60", 1);
    ::setenv("CHORUS_BIND", "none", 1);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  Outcome r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The lines chorus-run prefixed with "[rank] ", per rank.
std::map<int, std::vector<std::string>> lines_by_rank(const std::string& output) {
  std::map<int, std::vector<std::string>> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line[0] != '[') continue;
    const size_t close = line.find("] ");
    if (close == std::string::npos) continue;
    out[std::atoi(line.c_str() + 1)].push_back(line.substr(close + 2));
  }
  return out;
}

// Whether every one of ranks [0, n) printed a line containing `text`.
::testing::AssertionResult every_rank_says(const Outcome& r, int n, const std::string& text) {
  auto lines = lines_by_rank(r.output);
  for (int rank = 0; rank < n; ++rank) {
    bool found = false;
    for (const auto& l : lines[rank]) found |= l.find(text) != std::string::npos;
    if (!found)
      return ::testing::AssertionFailure()
             << "rank " << rank << " did not say \"" << text << "\"; output:\n"
             << r.output;
  }
  return ::testing::AssertionSuccess();
}

// A program that prints its arguments, each in <>.
const std::vector<std::string> kPrintArgs = {"/bin/sh", "-c", "printf '<%s>' \"$@\"; echo",
                                             "print-args"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ChorusRun, PassesTheProgramsArgumentsVerbatim) {
  // A "--" before the program is chorus-run's, and dropped.
  Outcome r = run(cat(cat({CHORUS_RUN, "-n", "2", "--"}, kPrintArgs), {"a", "b"}));
  EXPECT_EQ(r.status, 0) << r.output;
  auto lines = lines_by_rank(r.output);
  EXPECT_EQ(lines[0], std::vector<std::string>{"<a><b>"}) << r.output;
  EXPECT_EQ(lines[1], std::vector<std::string>{"<a><b>"}) << r.output;
  // Options after the program are the program's, even chorus-run's own names.
  r = run(cat(cat({CHORUS_RUN, "-n", "1"}, kPrintArgs), {"-n", "5"}));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(lines_by_rank(r.output)[0], std::vector<std::string>{"<-n><5>"}) << r.output;
  r = run(cat(cat({CHORUS_RUN, "-n", "1"}, kPrintArgs), {"--foo", "x"}));
  EXPECT_EQ(lines_by_rank(r.output)[0], std::vector<std::string>{"<--foo><x>"}) << r.output;
  // A "--" after the program is the program's too.
  r = run(cat(cat({CHORUS_RUN, "-n", "1", "--"}, kPrintArgs), {"--", "-h"}));
  EXPECT_EQ(lines_by_rank(r.output)[0], std::vector<std::string>{"<--><-h>"}) << r.output;
}

TEST(ChorusRun, RejectsAMissingProgramAndUnknownOptions) {
  Outcome r = run({CHORUS_RUN, "-n", "2"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("no program"), std::string::npos) << r.output;
  r = run(cat({CHORUS_RUN, "-n", "1", "--bogus"}, kPrintArgs));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--bogus"), std::string::npos) << r.output;
}

TEST(ChorusRun, ElasticReportsEveryExitAndTheJobSurvivesAKill) {
  Outcome r = run(cat({CHORUS_RUN, "-n", "2", "--replace", "1"}, kPrintArgs));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--replace needs --elastic"), std::string::npos) << r.output;
  // Rank 1 is killed, rank 0 exits 0: the job exits 0, every exit reported.
  r = run({CHORUS_RUN, "-n", "2", "--elastic", "/bin/sh", "-c",
           "if [ \"$CHORUS_RANK\" = 1 ]; then kill -9 $$; fi; sleep 0.2"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 was killed by signal 9 (Killed); 1 rank(s) go on"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 0 exited with status 0; 0 rank(s) go on"), std::string::npos)
      << r.output;
  // A rank that exits non-zero on its own fails the job.
  r = run({CHORUS_RUN, "-n", "2", "--elastic", "/bin/sh", "-c",
           "[ \"$CHORUS_RANK\" = 1 ] && exit 3; exit 0"});
  EXPECT_EQ(r.status, 3) << r.output;
}

// mp_check init under chorus-run, each rank's environment adjusted by `shell`.
Outcome start(const std::vector<std::string>& launcher, const std::string& shell) {
  return run(cat(launcher, {"/bin/sh", "-c", shell + " exec " + std::string(MP_CHECK) + " init"}));
}

TEST(StartUp, AGoodJobStartsOverATcpStoreWithASecret) {
  const Outcome r = start({CHORUS_RUN, "-n", "3", "--store", "tcp"}, "");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(every_rank_says(r, 3, "INIT OK"));
}

TEST(StartUp, ADuplicateRankFailsEveryRankNamingIt) {
  // Processes 1 and 2 both claim rank 1.
  const Outcome r = start({CHORUS_RUN, "-n", "3", "--grace", "30"},
                          "if [ \"$CHORUS_RANK\" = 2 ]; then export CHORUS_RANK=1; fi;");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(every_rank_says(r, 3, "rank 1 joined twice"));
}

TEST(StartUp, DisagreeingWorldSizesFailEveryRankNamingThem) {
  const Outcome r = start({CHORUS_RUN, "-n", "3", "--store", "tcp", "--grace", "30"},
                          "if [ \"$CHORUS_RANK\" = 2 ]; then export CHORUS_WORLD_SIZE=4; fi;");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(every_rank_says(r, 3, "rank 2 says world size 4, rank 0 says 3"));
}

TEST(StartUp, ABadValueInTheStoreFailsEveryRankNamingTheKey) {
  // Rank 1 plants a non-number under the key it counts its inits in.
  const Outcome r = start({CHORUS_RUN, "-n", "3", "--store", "tcp", "--grace", "30"},
                          "if [ \"$CHORUS_RANK\" = 1 ]; then export "
                          "MP_CHECK_SET=chorus/rank1/inits=abc; fi;");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(every_rank_says(r, 3, "key 'chorus/rank1/inits', which holds 'abc'"));
}

TEST(StartUp, AWrongStoreSecretIsRefusedAtOnce) {
  // --grace 0: rank 0 would wait for the refused rank until CHORUS_TIMEOUT.
  const Outcome r =
      start({CHORUS_RUN, "-n", "2", "--store", "tcp", "--grace", "0"},
            "if [ \"$CHORUS_RANK\" = 1 ]; then export CHORUS_STORE_SECRET=wrong; fi;");
  EXPECT_NE(r.status, 0);
  auto lines = lines_by_rank(r.output);
  bool refused = false;
  for (const auto& l : lines[1])
    refused |= l.find("refused this client: wrong CHORUS_STORE_SECRET") != std::string::npos;
  EXPECT_TRUE(refused) << r.output;
}

}  // namespace
