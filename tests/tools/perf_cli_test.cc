// chorus-perf's command line: nccl-tests' flags and their errors, and the
// printed table (columns, footer, N/A cells, wide values).
#include "perf_cli.h"
#include "algorithms/algorithm.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace chorus::perf {
namespace {

PerfOptions parse(std::vector<std::string> args) {
  return parse_perf_args(args);
}

void expect_invalid(std::vector<std::string> args, const std::string& mention) {
  try {
    parse(args);
    ADD_FAILURE() << "accepted: " << mention;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(PerfArgs, DeterministicFlag) {
  EXPECT_FALSE(parse({"allreduce"}).deterministic);
  EXPECT_TRUE(parse({"allreduce", "--deterministic"}).deterministic);
  PerfOptions o = parse({"reduce_scatter", "--deterministic", "-d", "bfloat16"});
  std::ostringstream out;
  PerfReport rep;
  rep.nranks = 2;
  rep.transport = "inproc";
  EXPECT_NE(format_header(o, rep).find(", deterministic"), std::string::npos);
}

TEST(PerfArgs, NcclTestsFlagsAndDefaults) {
  PerfOptions d = parse({"allreduce"});
  EXPECT_EQ(d.collectives, std::vector<Collective>{Collective::allreduce});
  EXPECT_EQ(d.min_bytes, 8u);
  EXPECT_TRUE(d.check);
  EXPECT_EQ(d.algorithms, std::vector<std::string>{"auto"});

  PerfOptions o = parse({"alltoall",
                         "-b",
                         "4K",
                         "-e",
                         "64M",
                         "-f",
                         "4",
                         "-n",
                         "7",
                         "-w",
                         "0",
                         "-c",
                         "0",
                         "-d",
                         "int32,bfloat16",
                         "-o",
                         "max",
                         "-r",
                         "1",
                         "-z",
                         "0",
                         "-a",
                         "pairwise,bruck",
                         "--ranks",
                         "3",
                         "--json",
                         "x.json"});
  EXPECT_EQ(o.collectives, std::vector<Collective>{Collective::alltoall});
  EXPECT_EQ(o.min_bytes, 4096u);
  EXPECT_EQ(o.max_bytes, size_t{64} << 20);
  EXPECT_EQ(o.step_factor, 4.0);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.types, (std::vector<DataType>{DataType::int32, DataType::bfloat16}));
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::max});
  EXPECT_EQ(o.root, 1);
  EXPECT_FALSE(o.blocking);
  EXPECT_EQ(o.algorithms, (std::vector<std::string>{"pairwise", "bruck"}));
  EXPECT_EQ(o.ranks, 3);
  EXPECT_EQ(o.json_file, "x.json");

  // Every collective but the barrier.
  EXPECT_EQ(parse({"all", "-d", "all", "-o", "all"}).collectives.size(),
            static_cast<size_t>(kCollectiveCount - 1));
  EXPECT_EQ(parse({"all", "-d", "all"}).types.size(), static_cast<size_t>(kDataTypeCount));
  EXPECT_EQ(parse({"reduce", "-o", "all"}).ops.size(), static_cast<size_t>(kReduceOpCount));
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST(PerfArgs, BadInputIsAnInvalidArgumentNamingTheFlag) {
  expect_invalid({}, "collective");
  expect_invalid({"allreduce", "allgather"}, "second collective");
  expect_invalid({"barrier"}, "unknown collective");
  expect_invalid({"allreduce", "-x", "1"}, "unknown flag");
  expect_invalid({"allreduce", "-b"}, "needs a value");
  expect_invalid({"allreduce", "-b", "12Q"}, "suffix");
  expect_invalid({"allreduce", "-b", "1M", "-e", "1K"}, "larger than -e");
  expect_invalid({"allreduce", "-b", "0"}, "at least 1 byte");
  expect_invalid({"allreduce", "-f", "1"}, "-f");
  expect_invalid({"allreduce", "-n", "0"}, "-n");
  expect_invalid({"allreduce", "-c", "2"}, "-c");
  expect_invalid({"allreduce", "-d", "float128"}, "unknown dtype");
  expect_invalid({"allreduce", "-o", "xor"}, "unknown op");
  expect_invalid({"allreduce", "--ranks", "0"}, "--ranks");
  expect_invalid({"allreduce", "--transport", "ib"}, "--transport");
  expect_invalid({"allreduce", "--min-time", "-1"}, "--min-time");
  expect_invalid({"allreduce", "--min-time", "soon"}, "--min-time");
}

TEST(PerfArgs, LongSpellingsSuffixesAndTheHiddenHook) {
  PerfOptions o =
      parse({"reduce", "--minbytes",  "64k",    "--maxbytes",     "1Gb",      "--stepfactor",
             "8",      "--iters",     "3",      "--warmup_iters", "2",        "--check",
             "0",      "--datatype",  "all",    "--op",           "prod,min", "--root",
             "1",      "--blocking",  "0",      "--algo",         "all",      "--transport",
             "inproc", "--calibrate", "t.json", "--corrupt-one"});
  EXPECT_EQ(o.collectives, std::vector<Collective>{Collective::reduce});
  EXPECT_EQ(o.min_bytes, size_t{64} << 10);
  EXPECT_EQ(o.max_bytes, size_t{1} << 30);
  EXPECT_EQ(o.step_factor, 8.0);
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.warmup, 2);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.types.size(), static_cast<size_t>(kDataTypeCount));
  EXPECT_EQ(o.ops, (std::vector<ReduceOp>{ReduceOp::prod, ReduceOp::min}));
  EXPECT_EQ(o.root, 1);
  EXPECT_FALSE(o.blocking);
  EXPECT_EQ(o.algorithms, std::vector<std::string>{"all"});
  EXPECT_EQ(o.transport, "inproc");
  EXPECT_EQ(o.calibrate_file, "t.json");
  EXPECT_TRUE(o.corrupt_one);
  EXPECT_FALSE(parse({"reduce"}).corrupt_one);
  EXPECT_EQ(perf_usage().find("corrupt"), std::string::npos);
  // A flag given twice: the last one counts, as before.
  EXPECT_EQ(parse({"allreduce", "-n", "3", "--iters", "4"}).iters, 4);
  EXPECT_EQ(parse({"allreduce", "-d", "int8", "-d", "float64"}).types,
            std::vector<DataType>{DataType::float64});
  // Errors name the flag as it was written, and the value.
  expect_invalid({"allreduce", "--minbytes", "12Q"},
                 "--minbytes: unknown size suffix 'Q' in '12Q'");
  expect_invalid({"allreduce", "--iters", "x"}, "--iters 'x': not an integer");
  expect_invalid({"allreduce", "-e", "2048G"}, "-e '2048G': larger than 1 TiB");
  expect_invalid({"allreduce", "--bogus", "1"}, "flag '--bogus': unknown flag");
  expect_invalid({"allreduce", "--json"}, "--json '': needs a value");
}

TEST(PerfArgs, MinTimeIsInMilliseconds) {
  EXPECT_EQ(parse({"allreduce"}).min_time.count(), 0);
  EXPECT_EQ(parse({"allreduce", "--min-time", "5"}).min_time, std::chrono::milliseconds(5));
}

// Runs a sweep on in-process ranks and returns rank 0's report and the
// table chorus-perf prints for it.
PerfReport sweep(int nranks, const PerfOptions& o, std::string* text) {
  PerfReport report;
  std::ostringstream out;
  testing::run_ranks(nranks, [&](Communicator& comm) {
    PerfReport r = run_perf(comm, o, print_table(o, comm.rank() == 0 ? &out : nullptr));
    if (comm.rank() == 0) report = std::move(r);
  });
  out << format_footer(report);
  if (text) *text = out.str();
  return report;
}

TEST(PerfRun, TableHasNcclTestsColumnsAndFooter) {
  PerfOptions o = parse({"allreduce", "-b", "8", "-e", "1K", "-n", "2", "-w", "1"});
  std::string text;
  const PerfReport rep = sweep(2, o, &text);
  ASSERT_EQ(rep.rows.size(), 8u);  // 8, 16, ..., 1024
  for (const char* col : {"out-of-place",
                          "in-place",
                          "size",
                          "count",
                          "type",
                          "redop",
                          "root",
                          "time",
                          "algbw",
                          "busbw",
                          "#wrong",
                          "algo",
                          "bound",
                          "%bound",
                          "pred",
                          "err%",
                          "alpha",
                          "beta",
                          "# Out of bounds values : 0 OK",
                          "# Avg bus bandwidth    : "})
    EXPECT_NE(text.find(col), std::string::npos) << col << "\n" << text;
  // Each data row: size count type redop root, 4 + 4 cells, algo, bound, %bound,
  // pred, err%.
  std::istringstream lines(text);
  std::string line;
  size_t rows = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::vector<std::string> w;
    for (std::string x; f >> x;) w.push_back(x);
    ASSERT_EQ(w.size(), 18u) << line;
    EXPECT_EQ(w[0], std::to_string(rep.rows[rows].bytes));
    // The model's prediction for the algorithm that ran, and its error
    // against the best measured time.
    const PerfRow& r = rep.rows[rows];
    EXPECT_GT(r.predicted_us, 0) << line;
    const double best = std::min(r.out_of_place.time_us, r.in_place.time_us);
    EXPECT_NEAR(r.err_pct, 100.0 * (best - r.predicted_us) / best, 1e-9) << line;
    EXPECT_NEAR(std::stod(w[16]), r.predicted_us, 0.006) << line;
    EXPECT_EQ(w[2], "float32");
    EXPECT_EQ(w[3], "sum");
    EXPECT_EQ(w[4], "-1");
    EXPECT_EQ(w[8], "0");
    EXPECT_EQ(w[12], "0");
    // "auto" shows the algorithm chorus chose, a registered allreduce one.
    EXPECT_EQ(w[13], rep.rows[rows].algorithm);
    EXPECT_NE(find_algorithm(Collective::allreduce, w[13]), nullptr) << w[13];
    ++rows;
  }
  EXPECT_EQ(rows, 8u);
  EXPECT_GT(rep.link.alpha, 0);
  EXPECT_GT(rep.link.beta, 0);
  // busbw = algbw * 2(N-1)/N = algbw at N = 2.
  for (const PerfRow& r : rep.rows) EXPECT_DOUBLE_EQ(r.out_of_place.busbw, r.out_of_place.algbw);
}

TEST(PerfRun, JsonRowsCarryThePrediction) {
  PerfOptions o =
      parse({"allgather", "-b", "1K", "-e", "64K", "-f", "8", "-n", "1", "-w", "0", "-a", "all"});
  const PerfReport rep = sweep(3, o, nullptr);
  ASSERT_FALSE(rep.rows.empty());
  const auto j = nlohmann::json::parse(to_json(o, rep));
  ASSERT_EQ(j["rows"].size(), rep.rows.size());
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const auto& row = j["rows"][i];
    ASSERT_TRUE(row["predicted_us"].is_number()) << row.dump();
    ASSERT_TRUE(row["err_pct"].is_number()) << row.dump();
    EXPECT_DOUBLE_EQ(row["predicted_us"].get<double>(), rep.rows[i].predicted_us);
    EXPECT_GT(row["predicted_us"].get<double>(), 0) << row.dump();
  }
}

TEST(PerfRun, ForcedCorruptionIsCountedAndFails) {
  PerfOptions o = parse(
      {"alltoall", "-b", "64", "-e", "256", "-n", "1", "-w", "0", "--corrupt-one", "-a", "all"});
  std::string text;
  const PerfReport rep = sweep(4, o, &text);
  ASSERT_FALSE(rep.rows.empty());
  // One wrong element per checked cell (alltoall: out-of-place only).
  EXPECT_EQ(rep.wrong, rep.rows.size());
  for (const PerfRow& r : rep.rows) EXPECT_EQ(r.out_of_place.wrong, 1u);
  EXPECT_NE(text.find("FAILED"), std::string::npos) << text;
  EXPECT_NE(text.find("N/A"), std::string::npos) << "in-place alltoall shown as N/A";
}

TEST(PerfRun, UncheckedSweepSaysNotApplicable) {
  PerfOptions o = parse({"broadcast", "-b", "64", "-e", "64", "-n", "1", "-c", "0"});
  std::string text;
  sweep(2, o, &text);
  EXPECT_NE(text.find("N/A"), std::string::npos) << text;
}

// A value wider than its column (a 256 MiB call over tcp takes more than
// 100000 us; a huge row count) stays a field of its own.
TEST(PerfFormat, WideValuesStaySeparateFields) {
  PerfRow r;
  r.bytes = 268435456;
  r.count = 67108864;
  r.out_of_place = {true, 116662.16, 2.30, 2.30, 0};
  r.in_place = {true, 123456789.5, 0.01, 0.01, 0};
  r.algorithm = "a_very_long_algorithm_name";
  r.bound_us = 1234567890.0;
  r.pct_bound = 42.9;
  r.predicted_us = 987654321.25;
  r.err_pct = -12.5;
  std::istringstream f(format_row(r));
  std::vector<std::string> w;
  for (std::string x; f >> x;) w.push_back(x);
  ASSERT_EQ(w.size(), 18u) << format_row(r);
  EXPECT_EQ(w[16], "987654321.25");
  EXPECT_EQ(w[17], "-12.5");
  EXPECT_EQ(w[4], "-1");
  EXPECT_EQ(w[5], "116662.16");
  EXPECT_EQ(w[9], "123456789.50");
  EXPECT_EQ(w[13], "a_very_long_algorithm_name");
  EXPECT_EQ(w[14], "1234567890.00");
}

}  // namespace
}  // namespace chorus::perf
