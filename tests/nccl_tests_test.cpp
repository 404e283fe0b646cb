// nccl-tests output reader: recorded real logs (tests/data/nccl-tests, sources in its README.md) and
// small inline tables for the layouts and the errors.
#include <cmath>
#include <string>

#include "catch.hpp"

#include "clustersim/calibrate/nccl_tests.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::calibrate;
using Catch::Contains;
using models::CollectiveOp;

namespace {

const std::filesystem::path kData = std::filesystem::path(__FILE__).parent_path() / "data" / "nccl-tests";

// busbw in GB/s from our sample: bytes / seconds x f(n) / 1e9, nccl-tests' definition. Equal to the
// printed busbw within its rounding (two decimals, and the time's own 4-5 significant digits) only if
// the reader kept nccl-tests' size convention, time unit and rank count.
double busbw_gbps(const CollectiveSample& s) { return s.busbw() / 1e9; }

std::string error_of(const std::string& text, const std::string& name, const NcclTestsOptions& options = {}) {
  return test::input_error([&] { parse_nccl_tests(text, name, options); });
}

// The table head nccl-tests 2.13+ prints (src/util.cu, writeResultHeader), used by the inline cases.
const std::string kHeader =
    "#                                                              out-of-place                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";

// Eight ranks on one host, as "# Using devices" lists them.
std::string devices(int ranks = 8, const std::string& host = "dgx01") {
  std::string s = "# Using devices\n";
  for (int r = 0; r < ranks; ++r) {
    s += "#  Rank  " + std::to_string(r) + " Group  0 Pid 4242 on " + host + " device  " + std::to_string(r) +
         " [0000:1b:00] NVIDIA H100 80GB HBM3\n";
  }
  return s + "#\n";
}

}  // namespace

TEST_CASE("nccl-tests: two nodes of 8 H100, all_reduce from 8 B to 8 GiB (GCP A3 Mega)", "[calibrate][nccl-tests]") {
  const auto m = read_nccl_tests(kData / "all_reduce_perf-2x8-h100-gcp-a3mega.txt");
  // 8 B to 8 GiB in steps of 2: 31 rows. The log predates "# Collective test starting", so the op
  // comes from the file name.
  REQUIRE(m.collectives.size() == 31);
  for (const auto& s : m.collectives) {
    CHECK(s.op == CollectiveOp::all_reduce);
    CHECK(s.ranks == 16);  // 16 "Rank" lines
    CHECK(s.nodes == 2);   // hosts ztan-mig-235z and ztan-mig-gq73
    CHECK(s.link == LinkClass::network);
  }
  CHECK(m.collectives.front().bytes == 8);
  CHECK(m.collectives.front().seconds == Approx(135.8e-6));  // out-of-place time, us -> s
  CHECK(m.collectives.back().bytes == 8589934592.0);
  CHECK(m.collectives.back().seconds == Approx(47535e-6));
  CHECK(m.meta.at("device") == "NVIDIA H100 80GB HBM3");
  // Printed out-of-place busbw (GB/s) of a few rows; f = 2(n-1)/n = 1.875 for 16 ranks.
  CHECK(busbw_gbps(m.collectives[22]) == Approx(59.36).epsilon(0.002));   // 32 MiB
  CHECK(busbw_gbps(m.collectives[27]) == Approx(297.86).epsilon(0.002));  // 1 GiB
  CHECK(busbw_gbps(m.collectives[30]) == Approx(338.82).epsilon(0.002));  // 8 GiB
  // A run over two hosts is the network's: a caller's other link class is refused (it had been taken,
  // and the measurements.json written with it was then refused by calibrate's own reader).
  NcclTestsOptions options;
  options.link = LinkClass::pcie;
  CHECK_THROWS_WITH(read_nccl_tests(kData / "all_reduce_perf-2x8-h100-gcp-a3mega.txt", options),
                    Catch::Contains("the run spans 2 nodes, so its link is network, not pcie"));
}

TEST_CASE("nccl-tests: one log with an alltoall run then a sendrecv run (two nodes of 4 H100)", "[calibrate][nccl-tests]") {
  const auto m = read_nccl_tests(kData / "alltoall-sendrecv-2x4-h100.log");
  // Each run names its program ("# Collective test starting: ..."); the file name names neither.
  REQUIRE(m.collectives.size() == 20);
  for (std::size_t i = 0; i < 20; ++i) {
    INFO(i);
    CHECK(m.collectives[i].op == (i < 10 ? CollectiveOp::all_to_all : CollectiveOp::send_recv));
    CHECK(m.collectives[i].ranks == 8);
    CHECK(m.collectives[i].nodes == 2);
    CHECK(m.collectives[i].link == LinkClass::network);
  }
  CHECK(m.collectives[0].bytes == 33554432);  // 32 MiB, each rank's whole send buffer
  CHECK(m.collectives[9].bytes == 17179869184.0);
  CHECK(m.collectives[19].bytes == 17179869184.0);
  // all_to_all: f = (n-1)/n = 7/8; send_recv: f = 1 (busbw = algbw).
  CHECK(busbw_gbps(m.collectives[0]) == Approx(55.43).epsilon(0.002));
  CHECK(busbw_gbps(m.collectives[9]) == Approx(67.87).epsilon(0.002));
  CHECK(busbw_gbps(m.collectives[10]) == Approx(23.83).epsilon(0.002));
  CHECK(busbw_gbps(m.collectives[19]) == Approx(24.17).epsilon(0.002));
}

TEST_CASE("nccl-tests: a table pasted without its device list needs the rank count (8 A100, NVLink)", "[calibrate][nccl-tests]") {
  const auto file = kData / "sendrecv_perf-8xa100-nvlink.txt";
  // The first row is line 6; the op comes from the file name, the rank count from nowhere.
  CHECK_THAT(test::input_error([&] { read_nccl_tests(file); }),
             Contains("sendrecv_perf-8xa100-nvlink.txt:6:") && Contains("lists no devices") && Contains("give --ranks"));
  NcclTestsOptions options;
  options.ranks = 8;  // -g 8, as the README of the source says
  const auto m = read_nccl_tests(file, options);
  REQUIRE(m.collectives.size() == 4);
  CHECK(m.collectives[0].op == CollectiveOp::send_recv);
  CHECK(m.collectives[0].nodes == 1);  // no host named: one node
  CHECK(m.collectives[0].link == LinkClass::nvlink);
  CHECK(m.collectives[0].bytes == 134217728);
  CHECK(m.collectives[3].bytes == 1073741824);
  CHECK(busbw_gbps(m.collectives[0]) == Approx(110.81).epsilon(0.002));
  CHECK(busbw_gbps(m.collectives[3]) == Approx(195.10).epsilon(0.002));
}

TEST_CASE("nccl-tests: ssh warnings and NCCL's version banner among the lines (two nodes of 8 A100, OCI)", "[calibrate][nccl-tests]") {
  const auto m = read_nccl_tests(kData / "all_reduce_perf-2x8-a100-oci.txt");
  REQUIRE(m.collectives.size() == 2);
  CHECK(m.meta.at("nccl_version") == "2.14.3");  // "NCCL version 2.14.3+cuda11.7"
  CHECK(m.meta.at("device") == "NVIDIA A100-SXM4-40GB");
  CHECK(m.collectives[0].ranks == 16);
  CHECK(m.collectives[0].nodes == 2);
  CHECK(m.collectives[0].bytes == 1073741824);
  CHECK(m.collectives[0].seconds == Approx(11774e-6));
  CHECK(m.collectives[1].bytes == 10737418240.0);
  CHECK(busbw_gbps(m.collectives[0]) == Approx(170.99).epsilon(0.002));
  CHECK(busbw_gbps(m.collectives[1]) == Approx(180.06).epsilon(0.002));
}

TEST_CASE("nccl-tests: the run's own header names the collective, the MPI build's name included", "[calibrate][nccl-tests]") {
  // algbw 2.00 GB/s over 8 ranks: busbw 1.75 for all_gather, 3.50 for all_reduce.
  const std::string text = "# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907\n"
                           "# Collective test starting: all_gather_perf_mpi\n" +
                           devices() + kHeader +
                           "     2097152         65536     float    none      -1   1048.6    2.00    1.75       0   1048.6    2.00    1.75       0\n";
  const auto m = parse_nccl_tests(text, "run.log");
  REQUIRE(m.collectives.size() == 1);
  CHECK(m.collectives[0].op == CollectiveOp::all_gather);
  CHECK(m.collectives[0].link == LinkClass::nvlink);  // one host
  CHECK(m.meta.at("nccl_tests_version") == "2.18.0");
  CHECK(m.meta.at("nccl_version") == "2.29.7");  // NCCL_VERSION_CODE 22907
  // The caller's op may not contradict the one the run names (it had relabelled the run: an
  // all_to_all fitted as all_gather passed the busbw check, both factors (n-1)/n); the same one is
  // fine.
  NcclTestsOptions options;
  options.op = CollectiveOp::all_reduce;
  CHECK_THAT(error_of(text, "run.log", options),
             Contains("run.log:16:") && Contains("--op all_reduce: the run names the test 'all_gather_perf_mpi' (line 2), which measures all_gather"));
  options.op = CollectiveOp::all_gather;
  CHECK(parse_nccl_tests(text, "run.log", options).collectives.at(0).op == CollectiveOp::all_gather);
}

TEST_CASE("nccl-tests: old layouts, in-place-only rows, -I and -S columns, mpirun tags", "[calibrate][nccl-tests]") {
  SECTION("no root column, an 'error' column and Rank lines without Group (nccl-tests before 2.10)") {
    // The layout of NVIDIA/nccl issue #583 (A100, 2021); "error" is a deviation, not a count.
    std::string text = "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
                       "# Using devices\n"
                       "#   Rank  0 Pid 1821213 on AI-A100 device  0 [0x00] NVIDIA A100-SXM4-40GB\n"
                       "#   Rank  1 Pid 1821213 on AI-A100 device  1 [0x00] NVIDIA A100-SXM4-40GB\n"
                       "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
                       "     4194304       1048576   float     sum    100.0   41.94   41.94  2e-07    101.0   41.53   41.53  2e-07\n";
    const auto m = parse_nccl_tests(text, "all_reduce_perf.out");
    REQUIRE(m.collectives.size() == 1);
    CHECK(m.collectives[0].ranks == 2);
    CHECK(m.collectives[0].seconds == Approx(100e-6));
  }
  SECTION("a row with only its in-place half (out-of-place switched off)") {
    const auto m = parse_nccl_tests(devices() + kHeader + "     1048576        262144     float     sum      -1    50.00   20.97   36.70       0\n",
                                    "all_reduce_perf.txt");
    REQUIRE(m.collectives.size() == 1);
    CHECK(m.collectives[0].seconds == Approx(50e-6));
  }
  SECTION("per-iteration columns (-I 1) and a timestamp (-S 1)") {
    const std::string head =
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%"
        "     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%  timestamp\n";
    const std::string row =
        "     1048576        262144     float     sum      -1    60.00   17.48   30.58       0    58.00    70.00    69.00     3.20"
        "    61.00   17.19   30.08       0    59.00    71.00    70.00     3.10  2025-06-01 10:00:00\n";
    const auto m = parse_nccl_tests(devices() + head + row, "all_reduce_perf.txt");
    REQUIRE(m.collectives.size() == 1);
    CHECK(m.collectives[0].seconds == Approx(60e-6));
  }
  SECTION("mpirun --tag-output prefixes, CRLF line ends and a headerless table") {
    const std::string plain =
        devices() + "     8388608       2097152     float     sum      -1    100.0   83.89  146.80      0    99.00   84.73  148.28      0\n";
    std::string text;  // every line as "[1,0]<stdout>:<line>\r\n"
    for (std::size_t at = 0; at < plain.size();) {
      const auto nl = plain.find('\n', at);
      text += "[1,0]<stdout>:" + plain.substr(at, nl - at) + "\r\n";
      at = nl + 1;
    }
    const auto m = parse_nccl_tests(text, "all_reduce_perf.txt");
    REQUIRE(m.collectives.size() == 1);
    CHECK(m.collectives[0].ranks == 8);
    CHECK(m.collectives[0].bytes == 8388608);
  }
}

TEST_CASE("nccl-tests: bad output is refused with file, line and what was expected", "[calibrate][nccl-tests]") {
  const std::string good_row = "     1048576        262144     float     sum      -1    50.00   20.97   36.70       0    51.00   20.56   35.98       0\n";
  SECTION("a non-zero #wrong") {
    // devices(): lines 1-10, the header: 11-13, the rows from 14.
    const std::string text = devices() + kHeader + good_row +
                             "     2097152        524288     float     sum      -1    90.00   23.30   40.78       3    91.00   23.05   40.33       0\n";
    CHECK_THAT(error_of(text, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:15:") && Contains("field '#wrong (out-of-place)'") && Contains("expected 0") &&
                   Contains("found 3"));
  }
  SECTION("a non-zero #wrong in the in-place half") {
    const std::string text = devices() + kHeader +
                             "     1048576        262144     float     sum      -1    50.00   20.97   36.70       0    51.00   20.56   35.98     1e+06\n";
    CHECK_THAT(error_of(text, "all_reduce_perf.txt"), Contains(":14:") && Contains("'#wrong (in-place)'") && Contains("found 1e+06"));
  }
  SECTION("a count that contradicts the size, and a type nccl-tests never prints") {
    // A probe's hand-edited row (count 999 beside 1 MiB of floats) and type 'quux' had been read.
    std::string row = good_row;
    row.replace(row.find("262144"), 6, "   999");
    CHECK_THAT(error_of(devices() + kHeader + row, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:14:") && Contains("field 'count': expected 262144 (1048576 bytes in 4-byte elements), found '999'"));
    row = good_row;
    row.replace(row.find("float"), 5, " quux");
    CHECK_THAT(error_of(devices() + kHeader + row, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:14:") && Contains("field 'type': expected one of nccl-tests' types") && Contains("found 'quux'"));
  }
  SECTION("a time that disagrees with its algbw, and a device list with a gap") {
    // Expectation: 1 MiB at 20.97 GB/s takes 50 us; a row saying 5000 us is refused at its time.
    const std::string slow = "     1048576        262144     float     sum      -1  5000.00   20.97   36.70       0    51.00   20.56   35.98       0\n";
    CHECK_THAT(error_of(devices() + kHeader + slow, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:14:") && Contains("field 'time (out-of-place, us)': expected about 50 us") && Contains("found '5000.00'"));
    std::string gap = devices();
    gap.erase(gap.find("#  Rank  3"), gap.find("#  Rank  4") - gap.find("#  Rank  3"));
    CHECK_THAT(error_of(gap + kHeader + good_row, "all_reduce_perf.txt"), Contains("names ranks up to 7 but has no line for rank 3"));
  }
  SECTION("a device list whose hosts hold different numbers of ranks") {
    // 16 ranks, 8 on one host and 7 and 1 on two others: no nodes x ranks-per-node shape (a probe's
    // renamed host was fitted as 3 x 5).
    std::string uneven = devices(8, "a");
    std::string second = devices(8, "b");
    second = second.substr(second.find('\n') + 1);  // its rank lines and closing '#'
    for (int r = 0; r < 8; ++r) {
      const std::string from = "#  Rank  " + std::to_string(r) + " ";
      second.replace(second.find(from), from.size(), "#  Rank  " + std::to_string(r + 8) + " ");
    }
    second.replace(second.find("on b device  7"), std::string("on b").size(), "on c");
    uneven = uneven.substr(0, uneven.rfind("#\n")) + second;
    CHECK_THAT(error_of(uneven + kHeader + good_row, "all_reduce_perf.txt"),
               Contains("the ranks are not spread evenly over the hosts (c has 1, a has 8)"));
  }
  SECTION("a device list of two GPU models") {
    // The fit describes one model: an A100 among H100s is refused (it had been fitted as H100).
    std::string mixed = devices();
    const std::string h100 = "NVIDIA H100 80GB HBM3\n#\n";
    mixed.replace(mixed.rfind(h100), h100.size(), "NVIDIA A100-SXM4-80GB\n#\n");
    CHECK_THAT(error_of(mixed + kHeader + good_row, "all_reduce_perf.txt"),
               Contains("rank 7 is on a NVIDIA A100-SXM4-80GB, rank 0 on a NVIDIA H100 80GB HBM3"));
  }
  SECTION("a headerless table whose first row is not nccl-tests' width") {
    // Expectation: with no header to give the layout, a first row of 14 tokens is refused, not
    // skipped (the fit lost that size without a word).
    NcclTestsOptions options;
    options.op = CollectiveOp::all_reduce;
    options.ranks = 8;
    const std::string wide = "     1048576        262144     float     sum      -1    50.00   20.97   36.70       0    51.00   20.56   35.98       0  x\n";
    CHECK_THAT(test::input_error([&] { parse_nccl_tests(wide + good_row, "pasted.txt", options); }),
               Contains("pasted.txt:1:6: expected a row of nccl-tests' table: 13 columns") && Contains("found 14"));
    CHECK(parse_nccl_tests(good_row, "pasted.txt", options).collectives.size() == 1);
    // A short line that starts with a number (a GPU count, a timestamp from a wrapper) is no row.
    CHECK(parse_nccl_tests("8\n1733400000 start\n" + good_row, "pasted.txt", options).collectives.size() == 1);
  }
  SECTION("no data rows") {
    CHECK_THAT(error_of(devices() + kHeader + "# Out of bounds values : 0 OK\n", "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt: no data rows") && Contains("one row per size"));
    CHECK_THAT(error_of("", "empty.txt"), Contains("empty.txt: no data rows"));
  }
  SECTION("a collective this reader cannot tell or does not model") {
    CHECK_THAT(error_of(devices() + kHeader + good_row, "results.txt"),
               Contains("results.txt:14:") && Contains("cannot tell which collective") && Contains("'results.txt'") &&
                   Contains("give --op"));
    CHECK_THAT(error_of("# Collective test starting: hypercube_perf\n" + devices() + kHeader + good_row, "results.txt"),
               Contains("results.txt:15:") && Contains("'hypercube_perf' (line 1) measures a pattern clustersim has no collective for"));
    CHECK_THAT(error_of("# Collective test starting: my_perf\n" + devices() + kHeader + good_row, "all_reduce_perf.txt"),
               Contains("'my_perf' (line 1), which is not one this reader knows"));
    // The caller's op makes an unnamed table readable.
    NcclTestsOptions options;
    options.op = CollectiveOp::all_reduce;
    CHECK(parse_nccl_tests(devices() + kHeader + good_row, "results.txt", options).collectives.size() == 1);
  }
  SECTION("a malformed number") {
    const std::string text = devices() + kHeader +
                             "     1048576        262144     float     sum      -1   50.0.0   20.97   36.70       0    51.00   20.56   35.98       0\n";
    CHECK_THAT(error_of(text, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:14:56: field 'time (out-of-place, us)': expected a positive number, found '50.0.0'"));
    const std::string wrong = devices() + kHeader +
                              "     1048576        262144     float     sum      -1    50.00   20.97   36.70    zero    51.00   20.56   35.98       0\n";
    CHECK_THAT(error_of(wrong, "all_reduce_perf.txt"), Contains("expected a count of wrong elements or N/A, found 'zero'"));
  }
  SECTION("a row whose size is not a byte count is refused, not skipped") {
    // A line shaped as a row but starting with a negative or fractional size: the fit must not
    // silently lose that size.
    const std::string negative = devices() + kHeader + good_row +
                                 "    -2097152        524288     float     sum      -1    90.00   23.30   40.78       0    91.00   23.05   40.33       0\n";
    CHECK_THAT(error_of(negative, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:15:5: field 'size': expected a size in bytes, found '-2097152'"));
    const std::string fraction = devices() + kHeader +
                                 "   1048576.5        262144     float     sum      -1    50.00   20.97   36.70       0    51.00   20.56   35.98       0\n";
    CHECK_THAT(error_of(fraction, "all_reduce_perf.txt"), Contains(":14:4: field 'size': expected a size in bytes, found '1048576.5'"));
  }
  SECTION("a row of the wrong width") {
    CHECK_THAT(error_of(devices() + kHeader + "     1048576        262144     float     sum      -1    50.00   20.97\n", "all_reduce_perf.txt"),
               Contains(":14:") && Contains("expected a row of 13 columns (as the header at line 12 announces), found 7"));
  }
  SECTION("CPU launch times (-C 1) instead of durations") {
    const std::string head = "#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   algbw   busbw #wrong\n";
    CHECK_THAT(error_of(devices() + head + good_row, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:11:") && Contains("reports CPU time (-C 1)"));
  }
  SECTION("ranks that did not form one communicator") {
    const std::string twice = "# Using devices\n#  Rank  0 Group  0 Pid 1 on a device  0 [0x1b] GPU\n"
                              "#  Rank  0 Group  0 Pid 2 on b device  0 [0x1b] GPU\n";
    CHECK_THAT(error_of(twice + kHeader + good_row, "all_reduce_perf.txt"),
               Contains("all_reduce_perf.txt:3:") && Contains("rank 0 is listed twice (first at line 2)") && Contains("MPI=1"));
  }
  SECTION("a rank count that contradicts the device list") {
    NcclTestsOptions options;
    options.ranks = 4;
    CHECK_THAT(error_of(devices() + kHeader + good_row, "all_reduce_perf.txt", options), Contains("ranks is 4 but the output lists 8 ranks"));
  }
  SECTION("given ranks that do not divide evenly over the given nodes") {
    // No device list: the counts come from the caller, and 16 ranks on 3 nodes is no run's shape.
    NcclTestsOptions options;
    options.ranks = 16;
    options.nodes = 3;
    const std::string row16 =
        "     1048576        262144     float     sum      -1    50.00   20.97   39.32       0    51.00   20.56   38.55       0\n";
    CHECK_THAT(error_of(kHeader + row16, "all_reduce_perf.txt", options),
               Contains("all_reduce_perf.txt:4:") && Contains("16 ranks do not divide evenly over 3 nodes"));
    options.nodes = 2;  // 8 on each
    CHECK(parse_nccl_tests(kHeader + row16, "all_reduce_perf.txt", options).collectives.at(0).nodes == 2);
  }
  SECTION("garbage never crashes") {
    CHECK_THAT(error_of(std::string("\x01\x02\xff\n12 34\n#\n# size count\n\0\0", 27), "junk.bin"), Contains("junk.bin"));
    CHECK_THAT(error_of("{\"version\": 2, \"results\": [", "junk.json"), Contains("junk.json: not valid JSON"));
  }
}

// The -J document in nccl-tests' schema: NVIDIA/nccl-tests src/util.cu at commit 0fdb00a
// (JSON_FILE_VERSION 2): jsonOutputInit, writeDeviceReport, writeBenchmarkLine*, writeResultFooter.
// Two processes (mpirun -np 2, one per node) with -g 4: "devices" holds each process's first rank.
namespace {
std::string nccl_tests_json(const std::string& version = "2", const std::string& nwrong = "0.000000") {
  return "{\"version\":" + version +
         ",\"start_time\":\"2025-06-01 10:00:00\",\"args\":[\"./build/all_gather_perf\",\"-b\",\"1M\",\"-e\",\"2M\",\"-f\",\"2\","
         "\"-g\",\"4\",\"-J\",\"ag.json\"],\"env\":[\"PATH=/usr/bin\"],\"nccl_version\":22703,"
         "\"config\":{\"nthreads\":1,\"ngpus\":4,\"minimum_bytes\":1048576,\"maximum_bytes\":2097152,\"step_factor\":2,"
         "\"warmup_iters\":1,\"iterations\":20,\"aggregated_iterations\":1,\"validation\":1,\"graph\":0,\"blocking_collectives\":\"false\","
         "\"per_iter_timing\":\"false\",\"parallel_init\":\"false\",\"devices\":["
         "{\"rank\":0,\"group\":0,\"pid\":1001,\"hostname\":\"node-a\",\"device\":0,\"device_hex\":\"0000:19:00\",\"device_info\":\"NVIDIA H100 80GB HBM3\"},"
         "{\"rank\":4,\"group\":0,\"pid\":2001,\"hostname\":\"node-b\",\"device\":0,\"device_hex\":\"0000:19:00\",\"device_info\":\"NVIDIA H100 80GB HBM3\"}]},"
         "\"results\":["
         "{\"size\":1048576,\"count\":32768,\"type\":\"float\",\"redop\":\"none\",\"root\":\"    -1\","
         "\"out_of_place\":{\"time\":100.000000,\"alg_bw\":10.485760,\"bus_bw\":9.175040,\"nwrong\":0.000000},"
         "\"in_place\":{\"time\":98.000000,\"alg_bw\":10.699755,\"bus_bw\":9.362286,\"nwrong\":0.000000},"
         "\"actual_iterations\":20,\"experiment_name\":\"\"},"
         "{\"size\":2097152,\"count\":65536,\"type\":\"float\",\"redop\":\"none\",\"root\":\"    -1\","
         "\"out_of_place\":{\"time\":150.000000,\"alg_bw\":13.981013,\"bus_bw\":12.233387,\"nwrong\":" +
         nwrong +
         "},"
         "\"in_place\":{\"time\":149.000000,\"alg_bw\":14.074846,\"bus_bw\":12.315490,\"nwrong\":null},"
         "\"actual_iterations\":20,\"experiment_name\":\"\"}],"
         "\"out_of_bounds\":{\"count\":0,\"okay\":\"true\"},\"average_bus_bandwidth\":{\"bandwidth\":10.704213,\"okay\":\"unchecked\"},"
         "\"errors\":[],\"end_time\":\"2025-06-01 10:00:05\"}";
}
}  // namespace

TEST_CASE("nccl-tests: the -J JSON document", "[calibrate][nccl-tests]") {
  const auto m = parse_nccl_tests(nccl_tests_json(), "ag.json");
  REQUIRE(m.collectives.size() == 2);
  for (const auto& s : m.collectives) {
    CHECK(s.op == CollectiveOp::all_gather);  // args[0]
    CHECK(s.ranks == 8);                      // 2 processes x 1 thread x 4 GPUs
    CHECK(s.nodes == 2);
    CHECK(s.link == LinkClass::network);
  }
  CHECK(m.collectives[0].bytes == 1048576);
  CHECK(m.collectives[0].seconds == Approx(100e-6));
  CHECK(busbw_gbps(m.collectives[1]) == Approx(12.233387).epsilon(1e-6));  // f = 7/8
  CHECK(m.meta.at("nccl_version") == "2.27.3");
  CHECK(m.meta.at("device") == "NVIDIA H100 80GB HBM3");

  CHECK_THAT(test::input_error([&] { parse_nccl_tests(nccl_tests_json("2", "2.000000"), "ag.json"); }),
             Contains("ag.json:1:") && Contains(": field 'results[1].out_of_place.nwrong': expected 0") && Contains("found 2.0"));
  CHECK_THAT(test::input_error([&] { parse_nccl_tests(nccl_tests_json("3"), "ag.json"); }),
             Contains("field 'version': expected 1 or 2") && Contains("found 3"));
  std::string cpu = nccl_tests_json();
  cpu.replace(cpu.find("\"time\":100.0"), 6, "\"cpu_time\"");
  CHECK_THAT(test::input_error([&] { parse_nccl_tests(cpu, "ag.json"); }),
             Contains("ag.json:1:") && Contains(": results[0].out_of_place: this document reports CPU time (-C 1)"));
  // A time that disagrees with its alg_bw is refused as in the text form (it had been fitted).
  std::string fast = nccl_tests_json();
  fast.replace(fast.find("\"time\":100.0"), 12, "\"time\":10.00");
  CHECK_THAT(test::input_error([&] { parse_nccl_tests(fast, "ag.json"); }),
             Contains("ag.json:1:") && Contains(": field 'results[0].out_of_place.time': expected about 100 us") && Contains("found 10"));
  // The count is each rank's share of an all_gather's buffer: 1 MiB of floats over 8 ranks is 32768.
  std::string count = nccl_tests_json();
  count.replace(count.find("\"count\":32768"), 13, "\"count\":32769");
  CHECK_THAT(test::input_error([&] { parse_nccl_tests(count, "ag.json"); }),
             Contains("ag.json:1:") && Contains(": field 'results[0].count': expected 32768 (1048576 bytes over 8 ranks in 4-byte elements), found 32769"));
  // Version 1 (commit cfa8a96) wrote the same records.
  CHECK(parse_nccl_tests(nccl_tests_json("1"), "ag.json").collectives.size() == 2);
}
