// Reading nccl-tests output (NVIDIA/nccl-tests) into collective samples.
//
// The text form. Every test program prints the same table; only facts about its layout are used here
// (src/util.cu and src/common.cu of NVIDIA/nccl-tests, and the real logs under tests/data/nccl-tests):
//
//   # nccl-tests version 2.19.4 nccl-headers=21903 nccl-library=21903     (recent versions only)
//   # Collective test starting: all_reduce_perf                            (2.17 on, in the logs seen)
//   # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) ...
//   # Using devices
//   #  Rank  0 Group  0 Pid 584419 on        dkh device  0 [0000:14:00] NVIDIA A100-SXM4-80GB
//   ...one line per rank ("Group" is missing in old versions)
//   #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
//   #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us) ...
//              8             2     float     sum      -1    34.84    0.00    0.00       0    36.18 ...
//   # Out of bounds values : 0 OK
//   # Collective test concluded: all_reduce_perf
//
// The column header line is read for the layout, because it varies: old versions have no `root`
// column in all_reduce (and no `redop` in broadcast) and name the check column `error` (a maximum
// deviation, not a count); `-I 1` adds four per-iteration columns to each half; `-S 1` appends a
// two-token timestamp. Output of `-C 1` is refused: its `cputime` column is the time to launch the
// calls, taken before they complete (BenchTime in src/common.cu), not their duration. A row holds the out-of-place half and then the
// in-place half; a row with one half holds only the in-place one (nccl-tests leaves the out-of-place
// half blank when it is switched off). Without a header the row's own width decides: 13 tokens is
// the current layout, 12 the old one. Times are microseconds; sizes follow nccl-tests' convention,
// which models/collective.hpp shares.
//
// One log may hold several runs (a job script running alltoall_perf then sendrecv_perf): each
// "Collective test starting" line, or a second "# nThread" line, starts a new run with its own
// device list and table. Lines that are neither '#' lines nor rows (NCCL INFO lines, mpirun warnings)
// are skipped, as is mpirun's "[1,0]<stdout>:" prefix; a line that starts with a number is a row, and
// one that does not parse as a row (a negative size, a row narrower than its header) is an error.
//
// The collective comes from, in order: the caller's op; the run's "Collective test starting" line;
// the file name (a stem that is, or starts with, a program name: all_reduce_perf_mpi.txt); else the
// reader asks for it. Ranks are the run's "Rank" lines (a rank listed twice means the processes did
// not form one communicator), nodes the distinct hosts among them.
//
// Every row is checked: a non-zero #wrong (nccl-tests found miscompared elements) refuses the row, and
// the printed busbw must be algbw x bus_factor(op, ranks) within rounding, which catches a wrong
// collective or rank count before it turns into a wrong fit. Zero-byte rows carry no bandwidth and
// are skipped.
//
// The JSON form, written by `-J FILE` in recent versions (src/util.cu, JSON_FILE_VERSION 1 at
// commit cfa8a96 and 2 at commit 0fdb00a of NVIDIA/nccl-tests):
//
//   {"version": 2, "args": [argv...], "nccl_version": 21903,
//    "config": {"nthreads": 1, "ngpus": 8, ...,
//               "devices": [{"rank": 0, "group": 0, "hostname": "dkh", "device_info": "NVIDIA ..."}, ...]},
//    "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
//                 "out_of_place": {"time": 34.84, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0} | null,
//                 "in_place": {...}}, ...], ...}
//
// "devices" holds the first rank of each process only, so ranks = processes x nthreads x ngpus and
// nodes = distinct hostnames. The program is the last path component of args[0]. "time" is "cpu_time"
// under -C 1 (refused, as in the text), "nwrong" is null without data checks, and a NaN is written as
// the string "nan".
#include "clustersim/calibrate/nccl_tests.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/json_position.hpp"
#include "clustersim/common/plain_text.hpp"
#include "json_input.hpp"

namespace cs::calibrate {

namespace {

using Json = nlohmann::json;
using models::CollectiveOp;

// ---- the test programs -------------------------------------------------------------------------

// nccl-tests' programs (src/Makefile builds <name>_perf from src/<name>.cu) and the collective each
// times; the ones with no op measure a pattern clustersim has no collective for.
struct Program {
  std::string_view name;
  std::optional<CollectiveOp> op;
};
constexpr Program kPrograms[] = {
    {"all_reduce_perf", CollectiveOp::all_reduce},     {"all_gather_perf", CollectiveOp::all_gather},
    {"reduce_scatter_perf", CollectiveOp::reduce_scatter}, {"broadcast_perf", CollectiveOp::broadcast},
    {"reduce_perf", CollectiveOp::reduce},             {"alltoall_perf", CollectiveOp::all_to_all},
    {"sendrecv_perf", CollectiveOp::send_recv},        {"hypercube_perf", std::nullopt},
    {"gather_perf", std::nullopt},                     {"scatter_perf", std::nullopt},
};
constexpr const char* kSupported =
    "all_reduce_perf, all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf or sendrecv_perf";

bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The program `name` is, or begins with followed by a separator (all_reduce_perf_mpi, an MPI build's
// name; all_reduce_perf-2x8.txt, a saved log).
const Program* find_program(std::string_view name) {
  for (const auto& p : kPrograms) {
    if (name.starts_with(p.name) && (name.size() == p.name.size() || !is_alnum(name[p.name.size()]))) return &p;
  }
  return nullptr;
}

// NCCL_VERSION_CODE: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9 (nccl.h).
std::string nccl_version(long code) {
  if (code <= 0) return std::to_string(code);
  if (code < 20900) return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
}

// ---- small text helpers ------------------------------------------------------------------------

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

template <class T>
std::optional<T> to_number(std::string_view s) {
  T v{};
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// mpirun --tag-output prefixes every line with "[job,rank]<stdout>:" (or <stderr>).
std::string_view strip_mpi_tag(std::string_view line) {
  if (!line.starts_with('[')) return line;
  const auto close = line.find("]<std");
  if (close == std::string_view::npos) return line;
  const auto colon = line.find(">:", close);
  return colon == std::string_view::npos ? line : line.substr(colon + 2);
}

std::string in_quotes(std::string_view s) { return fmt::format("'{}'", s); }

// Bytes of an element of nccl-tests' type column (test_typenames in nccl-tests' common.cu: "char"
// and "int" before NCCL 2, bfloat16 from NCCL 2.10, the fp8 types from 2.24); 0 for a name it never
// prints.
int element_bytes(std::string_view type) {
  static const std::map<std::string_view, int> kBytes = {{"int8", 1},   {"uint8", 1},    {"char", 1},     {"f8e4m3", 1}, {"f8e5m2", 1},
                                                         {"half", 2},   {"bfloat16", 2}, {"int32", 4},    {"uint32", 4}, {"int", 4},
                                                         {"float", 4},  {"int64", 8},    {"uint64", 8},   {"double", 8}};
  const auto it = kBytes.find(type);
  return it == kBytes.end() ? 0 : it->second;
}

// What a refused type column should hold.
constexpr const char* kNcclTestsTypes = "one of nccl-tests' types (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)";

// The count nccl-tests prints beside a size: the elements each rank passes to NCCL, so the whole
// buffer's over the ranks for all_gather, reduce_scatter and alltoall (setupArgs' paramCount), the
// buffer's for the others. The whole buffer's count is taken for those three as well, as a version
// may print it. Empty when `count` agrees, else what the size or the count should read.
struct CountMismatch {
  bool size = false;  // the size is no whole number of such counts; else the count is wrong
  std::string expected;
};
std::optional<CountMismatch> count_mismatch(CollectiveOp op, int ranks, std::uint64_t size, std::uint64_t count, int element) {
  const bool per_rank = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter || op == CollectiveOp::all_to_all;
  const std::uint64_t divisor = static_cast<std::uint64_t>(element) * static_cast<std::uint64_t>(per_rank ? ranks : 1);
  const std::string over = per_rank ? fmt::format(" over {} ranks", ranks) : "";
  if (divisor == 0 || (size % divisor == 0 && size / divisor == count)) return std::nullopt;
  if (per_rank && size % static_cast<std::uint64_t>(element) == 0 && size / static_cast<std::uint64_t>(element) == count) return std::nullopt;
  if (size % divisor != 0) return CountMismatch{true, fmt::format("a whole number of {}-byte elements{}", element, over)};
  return CountMismatch{false, fmt::format("{} ({} bytes{} in {}-byte elements)", size / divisor, size, over, element)};
}

// ---- what a run says about itself --------------------------------------------------------------

// The layout a column header line announces.
struct Columns {
  int left = 5;                   // size count type redop root (4 in older versions)
  int group = 4;                  // time algbw busbw #wrong, +4 per-iteration columns under -I
  int groups = 2;                 // out-of-place, in-place
  int algbw = 1, busbw = 2, check = 3;  // positions inside a half (time is first)
  bool check_is_count = true;     // "#wrong"; old versions print "error", a deviation
  int trailing = 0;               // the -S timestamp, two tokens
  int line = 0;                   // the header's line (0: taken from a row's width)
};

struct Run {
  std::string program;  // "# Collective test starting: <program>"
  int program_line = 0;
  bool saw_nthread = false;
  std::map<int, int> rank_lines;  // rank -> the line listing it (text)
  int listed = 0;                 // ranks the output lists (0: none)
  std::set<std::string> groups;
  std::map<std::string, long> hosts;  // host -> the ranks listed on it
  std::optional<Columns> columns;
  int rows = 0;
  // Resolved at the first row.
  bool resolved = false;
  CollectiveOp op = CollectiveOp::all_reduce;
  int ranks = 0, nodes = 0;
  LinkClass link = LinkClass::nvlink;
};

// The collective, rank and node counts and link class of a run: from the caller, the output or the
// file name, in that order; `fail(message)` throws at the place the run is first needed.
template <class Fail>
void resolve(Run& run, const std::filesystem::path& file, const NcclTestsOptions& options, Fail fail) {
  // The collective the output names (its program), else the file name; --op is for output that
  // names none, and may not contradict one that does (it had relabelled an all_to_all run all_gather,
  // whose fit then became the fabric's capacity).
  std::optional<CollectiveOp> named;
  std::string naming;
  if (!run.program.empty()) {
    const Program* p = find_program(run.program);
    naming = run.program_line > 0 ? fmt::format("{} (line {})", in_quotes(run.program), run.program_line)
                                  : fmt::format("{} (args[0])", in_quotes(run.program));
    if (!p && !options.op) fail(fmt::format("the run names the test {}, which is not one this reader knows: expected {}; give --op", naming, kSupported));
    if (p && !p->op) fail(fmt::format("{} measures a pattern clustersim has no collective for: expected {}", naming, kSupported));
    if (p) named = *p->op;
    naming = "the run names the test " + naming;
  } else if (const Program* p = find_program(file.stem().string())) {
    if (!p->op) fail(fmt::format("the file name says {}, a pattern clustersim has no collective for: expected {}", in_quotes(p->name), kSupported));
    named = *p->op;
    naming = fmt::format("the file name says {}", in_quotes(p->name));
  }
  if (options.op && named && *options.op != *named) {
    fail(fmt::format("--op {}: {}, which measures {}: expected --op only for output that does not name its collective, or the same one",
                     models::to_string(*options.op), naming, models::to_string(*named)));
  }
  if (options.op) {
    run.op = *options.op;
  } else if (named) {
    run.op = *named;
  } else {
    fail(fmt::format("cannot tell which collective this table measures: the output does not name it (recent nccl-tests print "
                     "'# Collective test starting: <program>') and the file name {} is not a program's ({}); give --op",
                     in_quotes(file.filename().string()), kSupported));
  }

  const int listed = run.listed;
  if (listed > 0 && !run.rank_lines.empty() && run.rank_lines.rbegin()->first != static_cast<int>(run.rank_lines.size()) - 1) {
    // Ranks are numbered from 0: a gap is a listing that lost a line, and the count would be short.
    int missing = 0;
    while (run.rank_lines.count(missing)) ++missing;
    fail(fmt::format("the device list names ranks up to {} but has no line for rank {}: expected one '#  Rank ...' line per rank",
                     run.rank_lines.rbegin()->first, missing));
  }
  if (listed > 0) {
    if (run.groups.size() > 1) {
      fail(fmt::format("the devices form {} groups (the Group column): each group ran its own collective, which this reader does not "
                       "split; run one communicator per test",
                       run.groups.size()));
    }
    if (options.ranks && *options.ranks != listed) fail(fmt::format("ranks is {} but the output lists {} ranks", *options.ranks, listed));
    const int hosts = static_cast<int>(run.hosts.size());
    if (options.nodes && *options.nodes != hosts) fail(fmt::format("nodes is {} but the output lists {} hosts", *options.nodes, hosts));
    // The fit reads a run as nodes x ranks-per-node: a listing whose hosts hold different numbers of
    // ranks describes no such shape (a probe's 16 ranks over 3 hosts were fitted as 3 x 5).
    const auto [fewest, most] = std::minmax_element(run.hosts.begin(), run.hosts.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (fewest != run.hosts.end() && fewest->second != most->second) {
      fail(fmt::format("the ranks are not spread evenly over the hosts ({} has {}, {} has {}): the fit needs the same number of ranks on every node",
                       fewest->first, fewest->second, most->first, most->second));
    }
    run.ranks = listed;
    run.nodes = hosts;
  } else {
    if (!options.ranks) {
      fail("the output lists no devices ('# Using devices' and one '#  Rank ...' line per rank) before this table, so the rank count is "
           "unknown; give --ranks");
    }
    run.ranks = *options.ranks;
    run.nodes = options.nodes.value_or(1);
  }
  if (run.ranks < 2) fail(fmt::format("a collective needs at least 2 ranks, found {}", run.ranks));
  if (run.nodes < 1 || run.nodes > run.ranks) fail(fmt::format("nodes must be between 1 and the {} ranks, found {}", run.ranks, run.nodes));
  if (listed == 0 && run.ranks % run.nodes != 0) {
    // The fit reads a run as nodes x ranks-per-node; given counts that leave a remainder describe no
    // run (a listing is taken as it is: its hosts are where the ranks ran).
    fail(fmt::format("{} ranks do not divide evenly over {} nodes: expected the same number of ranks on every node; give --ranks and --nodes that do",
                     run.ranks, run.nodes));
  }
  run.link = options.link.value_or(run.nodes > 1 ? LinkClass::network : LinkClass::nvlink);
  // Only the network reaches past one node (as measurements.json's reader has it): a run over hosts
  // fitted as NVLink wrote a measurements.json that calibrate itself then refused.
  if (run.nodes > 1 && run.link != LinkClass::network) {
    fail(fmt::format("the run spans {} nodes, so its link is network, not {} (NVLink, PCIe and a process's own copies stay inside one node)", run.nodes,
                     to_string(run.link)));
  }
  run.resolved = true;
}

// The printed busbw must be algbw x f(n): nccl-tests computes it so. Checked where both have three
// significant digits (>= 1 GB/s, two decimals), so rounding stays under 1%.
std::optional<std::string> busbw_mismatch(const Run& run, double algbw, double busbw) {
  if (algbw < 1.0 || busbw < 1.0) return std::nullopt;
  const double f = models::bus_factor(run.op, run.ranks);
  const double expected = algbw * f;
  if (std::fabs(busbw - expected) <= 0.02 * expected) return std::nullopt;
  return fmt::format("the busbw column ({:.2f} GB/s) is not algbw x {:.4g} = {:.2f} GB/s, the bus factor of {} over {} ranks: the "
                     "collective or the rank count this reader took is wrong; give --op (or --ranks)",
                     busbw, f, expected, models::to_string(run.op), run.ranks);
}

// nccl-tests prints algbw = size / time: a time that disagrees (an edit, a damaged row) would be
// fitted as measured. The expected time when they disagree by more than the printed digits allow
// (algbw has two decimals: 0.005 GB/s, plus 5% for the time's own rounding).
std::optional<std::string> time_mismatch(std::uint64_t size, double us, double algbw) {
  if (size == 0) return std::nullopt;
  const double implied_algbw = static_cast<double>(size) / (us * 1e3);
  if (std::abs(implied_algbw - algbw) <= 0.0051 + 0.05 * algbw) return std::nullopt;
  return fmt::format("about {:.4g} us, the time {} bytes take at the row's algbw of {} GB/s", static_cast<double>(size) / (algbw * 1e3), size, algbw);
}

// ---- the text form -----------------------------------------------------------------------------

class TextReader {
 public:
  TextReader(const std::filesystem::path& file, const NcclTestsOptions& options)
      : file_(file), name_(std::make_shared<const std::string>(file.string())), options_(options) {}

  Measurements read(const std::string& text) {
    std::size_t pos = 0;
    int line_no = 0;
    while (pos <= text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      line_ = line;
      line_no_ = line_no;
      read_line(strip_mpi_tag(line));
      if (end == text.size()) break;
      pos = end + 1;
    }
    if (m_.collectives.empty()) {
      if (rows_ > 0) throw InputError(where(0), "every data row is for a size of 0 bytes, which measures no bandwidth");
      throw InputError(where(0),
                       "no data rows: expected the table nccl-tests prints (a '#  size  count  type ...' header and one row per size)");
    }
    m_.meta["source"] = "nccl-tests output " + file_.filename().string();
    return m_;
  }

 private:
  SourceLocation where(int line, int column = 0) const { return SourceLocation{name_, line, column}; }
  int column_of(std::string_view token) const { return static_cast<int>(token.data() - line_.data()) + 1; }
  [[noreturn]] void fail(const std::string& message, std::string_view token = {}) const {
    throw InputError(where(line_no_, token.empty() ? 0 : column_of(token)), message);
  }
  [[noreturn]] void fail(std::string_view token, const std::string& field, const std::string& expected) const {
    throw InputError(where(line_no_, column_of(token)), field, expected, in_quotes(token));
  }

  // Text kept in the profile's provenance (a device name, a version): refused at `token` unless plain.
  void require_plain_text(const char* what, std::string_view text, std::string_view token) const {
    if (const std::string why = plain_text_problem(text); !why.empty()) {
      fail(fmt::format("{}: expected text without control characters, found {} ({})", what, quoted_text(text), why), token);
    }
  }

  void new_run() { runs_.emplace_back(); }
  Run& run() {
    if (runs_.empty()) new_run();
    return runs_.back();
  }

  void read_line(std::string_view line) {
    const auto tokens = split(line);
    if (tokens.empty()) return;
    if (tokens[0].starts_with('#')) {
      read_comment(line.substr(line.find('#') + 1));
    } else if (all_digits(tokens[0]) || to_number<double>(tokens[0])) {
      // A row, or a line that starts as one with a size that is not a byte count (-33554432, 1e6):
      // read_row refuses it rather than the fit losing that size unsaid.
      read_row(tokens);
    } else if (tokens.size() >= 3 && tokens[0] == "NCCL" && tokens[1] == "version") {
      // NCCL's own banner (NCCL_DEBUG=VERSION or INFO): "NCCL version 2.14.3+cuda11.7".
      const std::string_view version = tokens[2].substr(0, tokens[2].find('+'));
      require_plain_text("NCCL's version", version, tokens[2]);
      m_.meta.emplace("nccl_version", std::string(version));
    }
  }

  void read_comment(std::string_view body) {
    const auto tokens = split(body);
    if (tokens.empty()) return;
    if (const auto at = body.find("Collective test starting:"); at != std::string_view::npos) {
      new_run();
      const auto rest = split(body.substr(at + std::string_view("Collective test starting:").size()));
      run().program = rest.empty() ? "" : std::string(rest[0]);
      run().program_line = line_no_;
    } else if (tokens[0] == "nThread") {
      Run& r = run();
      if (r.saw_nthread || r.rows > 0 || !r.rank_lines.empty()) new_run();
      run().saw_nthread = true;
    } else if (tokens[0] == "nccl-tests" && tokens.size() >= 3 && tokens[1] == "version") {
      require_plain_text("nccl-tests' version", tokens[2], tokens[2]);
      m_.meta.emplace("nccl_tests_version", std::string(tokens[2]));
      for (auto t : tokens) {
        if (t.starts_with("nccl-library=")) {
          if (auto code = to_number<long>(t.substr(13))) m_.meta.emplace("nccl_version", nccl_version(*code));
        }
      }
    } else if (tokens[0] == "Rank") {
      read_device(tokens);
    } else if (tokens[0] == "size" && tokens.size() > 1 && tokens[1] == "count") {
      read_header(tokens);
    }
  }

  // "#  Rank  3 Group  0 Pid 295203 on node005 device  3 [0xc0] NVIDIA H100 80GB HBM3" (old versions
  // have no Group).
  void read_device(const std::vector<std::string_view>& t) {
    const auto rank = t.size() > 1 ? to_number<int>(t[1]) : std::nullopt;
    const auto on = std::find(t.begin(), t.end(), "on");
    if (!rank || *rank < 0 || on == t.end() || on + 1 == t.end()) {
      fail("expected a device line '#  Rank <n> Group <g> Pid <pid> on <host> device <d> [<bus>] <name>'", t[0]);
    }
    Run& r = run();
    if (const auto [it, fresh] = r.rank_lines.emplace(*rank, line_no_); !fresh) {
      fail(fmt::format("rank {} is listed twice (first at line {}): the processes ran as separate jobs rather than one communicator "
                       "(nccl-tests built without MPI=1?)",
                       *rank, it->second),
           t[1]);
    }
    const auto group = std::find(t.begin(), on, "Group");
    r.groups.insert(group != on && group + 1 != on ? std::string(*(group + 1)) : "0");
    ++r.hosts[std::string(*(on + 1))];
    // The device name follows "device <d> [<bus>]".
    const auto dev = std::find(on, t.end(), "device");
    if (dev != t.end() && t.end() - dev > 3) {
      std::string name;
      for (auto it = dev + 3; it != t.end(); ++it) {
        if (!name.empty()) name += ' ';
        name += *it;
      }
      // The name goes into the profile's provenance: text it can hold (a terminal colour code had
      // written a profile.yaml nothing could load, a 0xff byte ended in the JSON library's words).
      require_plain_text("the GPU's name", name, *(dev + 3));
      // Every rank's GPU, not the first alone: the fit describes one GPU model (a probe's log with
      // rank 15 on an A100 was fitted onto the H100 profile).
      if (const auto it = m_.meta.find("device"); it == m_.meta.end()) {
        m_.meta.emplace("device", name);
      } else if (it->second != name) {
        fail(fmt::format("rank {} is on a {}, rank 0 on a {}: the fit describes one GPU model; measure one kind at a time", *rank, name, it->second),
             *dev);
      }
    }
  }

  static bool is_time(std::string_view s) { return s == "time" || s == "cputime"; }

  void read_header(const std::vector<std::string_view>& t) {
    Columns c;
    c.line = line_no_;
    const auto first = std::find_if(t.begin(), t.end(), [&](auto s) { return is_time(s); });
    if (first == t.end()) fail("expected a column header with time, algbw and busbw columns", t[0]);
    if (*first == "cputime") {
      fail("this table reports CPU time (-C 1): the time to launch the calls, not their duration; rerun without -C", *first);
    }
    c.left = static_cast<int>(first - t.begin());
    const auto second = std::find_if(first + 1, t.end(), [&](auto s) { return is_time(s); });
    auto half_end = second;
    if (second == t.end()) {
      c.groups = 1;
      half_end = std::find(first, t.end(), "timestamp");
    }
    c.group = static_cast<int>(half_end - first);
    auto index = [&](std::initializer_list<std::string_view> names) {
      for (auto it = first; it != half_end; ++it) {
        for (auto n : names) {
          if (*it == n) return static_cast<int>(it - first);
        }
      }
      return -1;
    };
    c.algbw = index({"algbw"});
    c.busbw = index({"busbw"});
    c.check = index({"#wrong", "error"});
    if (c.algbw < 0 || c.busbw < 0) fail("expected a column header with time, algbw and busbw columns", *first);
    if (c.check >= 0) c.check_is_count = first[c.check] == "#wrong";
    if (std::find(first, t.end(), "timestamp") != t.end()) c.trailing = 2;  // "YYYY-MM-DD HH:MM:SS"
    run().columns = c;
  }

  // A table row. Out-of-place time (in-place when the row has only that half), microseconds.
  void read_row(const std::vector<std::string_view>& t) {
    Run& r = run();
    const int n = static_cast<int>(t.size());
    if (!r.columns) {
      // No header in this run (a pasted table): the current layout has 13 tokens, the old one 12.
      // A line with the eight fields every row starts with is a row of another width, refused
      // rather than its size lost; a shorter one (a GPU count, a timestamp) is not a row.
      if (n < 8) return;
      if (n != 13 && n != 12) {
        fail(fmt::format("expected a row of nccl-tests' table: 13 columns (12 before nccl-tests 2.13), as no header announces another layout; found {}", n),
             t[0]);
      }
      Columns c;
      c.left = n - 8;
      r.columns = c;
    }
    const Columns& c = *r.columns;
    const int full = c.left + c.groups * c.group + c.trailing;
    const int half = c.left + c.group + c.trailing;
    if (n != full && !(c.groups == 2 && n == half)) {
      const std::string from = c.line > 0 ? fmt::format("as the header at line {} announces", c.line) : "as the first row had";
      fail(fmt::format("expected a row of {} columns ({}), found {}", full, from, n), t[0]);
    }
    ++r.rows;
    ++rows_;
    const auto size = to_number<std::uint64_t>(t[0]);
    if (!size) fail(t[0], "size", "a size in bytes");
    const int element = element_bytes(t[2]);
    if (element == 0) fail(t[2], "type", kNcclTestsTypes);
    const auto count = to_number<std::uint64_t>(t[1]);
    if (!count) fail(t[1], "count", "a count of elements");

    // The halves present: out-of-place first when the row has both.
    const int halves = n == full ? c.groups : 1;
    const bool out_of_place = halves == 2;
    for (int h = 0; h < halves; ++h) check_wrong(t, c, c.left + h * c.group, (halves == 2 && h == 0) ? "out-of-place" : "in-place");
    const int g = c.left;  // the half timed: the first present
    const char* which = out_of_place ? "out-of-place" : "in-place";
    const double us = positive(t[g], fmt::format("time ({}, us)", which));
    const double algbw = non_negative(t[g + c.algbw], fmt::format("algbw ({}, GB/s)", which));
    const double busbw = non_negative(t[g + c.busbw], fmt::format("busbw ({}, GB/s)", which));

    r.listed = static_cast<int>(r.rank_lines.size());
    if (!r.resolved) resolve(r, file_, options_, [&](const std::string& message) { fail(message, t[0]); });
    if (auto mismatch = busbw_mismatch(r, algbw, busbw)) fail(*mismatch, t[g + c.busbw]);
    // A count that contradicts the size is a row edited by hand, or a table of another collective.
    if (auto m = count_mismatch(r.op, r.ranks, *size, *count, element)) m->size ? fail(t[0], "size", m->expected) : fail(t[1], "count", m->expected);
    if (auto expected = time_mismatch(*size, us, algbw)) fail(t[g], fmt::format("time ({}, us)", which), *expected);
    if (*size == 0) return;
    m_.collectives.push_back(CollectiveSample{r.op, r.link, r.ranks, r.nodes, static_cast<double>(*size), us * 1e-6});
  }

  void check_wrong(const std::vector<std::string_view>& t, const Columns& c, int g, const char* half) const {
    if (c.check < 0) return;
    const auto v = t[g + c.check];
    if (v == "N/A") return;  // no data check for this half
    const auto x = to_number<double>(v);
    if (c.check_is_count) {
      if (!x || *x < 0) fail(v, fmt::format("#wrong ({})", half), "a count of wrong elements or N/A");
      if (*x != 0) {
        throw InputError(where(line_no_, column_of(v)), fmt::format("#wrong ({})", half),
                         "0 (a row whose results miscompare has no trustworthy time)", std::string(v));
      }
    } else if (!x || !std::isfinite(*x)) {
      fail(v, fmt::format("error ({})", half), "a number or N/A");
    }
  }

  double positive(std::string_view s, const std::string& field) const {
    const auto x = to_number<double>(s);
    if (!x || !std::isfinite(*x) || *x <= 0) fail(s, field, "a positive number");
    return *x;
  }
  double non_negative(std::string_view s, const std::string& field) const {
    const auto x = to_number<double>(s);
    if (!x || !std::isfinite(*x) || *x < 0) fail(s, field, "a number >= 0");
    return *x;
  }

  const std::filesystem::path& file_;
  std::shared_ptr<const std::string> name_;
  const NcclTestsOptions& options_;
  std::vector<Run> runs_;
  std::string_view line_;
  int line_no_ = 0;
  int rows_ = 0;
  Measurements m_;
};

// ---- the JSON form -----------------------------------------------------------------------------

class JsonReader {
 public:
  JsonReader(const std::filesystem::path& file, const NcclTestsOptions& options)
      : file_(file), where_{std::make_shared<const std::string>(file.string())}, options_(options) {}

  Measurements read(const std::string& text) {
    text_ = text;
    const Json doc = parse_json(text, file_, "nccl-tests leaves the file unfinished when a run aborts");
    if (!doc.is_object()) fail("<document>", "an nccl-tests -J document (an object)", doc.type_name());
    const Json& version = member(doc, "", "version");
    if (!version.is_number_integer() || (version.get<long>() != 1 && version.get<long>() != 2)) {
      fail("version", "1 or 2 (the nccl-tests JSON versions this reader knows)", version.dump());
    }
    Measurements m;
    if (auto it = doc.find("nccl_version"); it != doc.end() && it->is_number_integer()) {
      m.meta["nccl_version"] = nccl_version(it->get<long>());
    }

    // The run: its program from argv[0], its ranks from the devices.
    Run run;
    if (auto args = doc.find("args"); args != doc.end() && args->is_array() && !args->empty() && (*args)[0].is_string()) {
      run.program = std::filesystem::path((*args)[0].get<std::string>()).filename().string();
    }
    const Json& config = member(doc, "", "config");
    if (!config.is_object()) fail("config", "an object", config.type_name());
    const long threads = positive_int(config, "config", "nthreads");
    const long gpus = positive_int(config, "config", "ngpus");
    const Json& devices = member(config, "config", "devices");
    if (!devices.is_array()) fail("config.devices", "an array of devices", devices.type_name());
    // One entry per process (the first rank of each): ranks = processes x threads x GPUs per thread.
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const Json& d = devices[i];
      const std::string path = fmt::format("config.devices[{}]", i);
      if (!d.is_object()) fail(path, "an object", d.type_name());
      const Json& host = member(d, path, "hostname");
      if (!host.is_string()) fail(path + ".hostname", "a string", host.type_name());
      run.hosts[host.get<std::string>()] += threads * gpus;
      if (auto g = d.find("group"); g != d.end()) run.groups.insert(g->dump());
      if (auto info = d.find("device_info"); info != d.end() && info->is_string()) {
        if (const std::string why = plain_text_problem(info->get<std::string>()); !why.empty()) {
          fail(path + ".device_info", "text without control characters", fmt::format("{} ({})", info->dump(), why));
        }
        // Every process's GPU: the fit describes one model (a probe's list had an A100 among H100s).
        if (const auto it = m.meta.find("device"); it == m.meta.end()) {
          m.meta.emplace("device", info->get<std::string>());
        } else if (it->second != info->get<std::string>()) {
          fail(path + ".device_info", fmt::format("the GPU of config.devices[0] ({}): the fit describes one GPU model", it->second), info->dump());
        }
      }
    }
    const long ranks = static_cast<long>(devices.size()) * threads * gpus;
    if (ranks > (1 << 24)) fail("config.devices", "at most 16M ranks", std::to_string(ranks));
    run.listed = static_cast<int>(ranks);
    resolve(run, file_, options_, [&](const std::string& message) { throw InputError(where_, message); });

    const Json& results = member(doc, "", "results");
    if (!results.is_array()) fail("results", "an array of results", results.type_name());
    bool zero_only = !results.empty();
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Json& row = results[i];
      const std::string path = fmt::format("results[{}]", i);
      if (!row.is_object()) fail(path, "an object", row.type_name());
      const Json& size = member(row, path, "size");
      if (!size.is_number_unsigned() && !(size.is_number_integer() && size.get<long>() >= 0)) {
        fail(path + ".size", "a size in bytes", size.dump());
      }
      // Out-of-place, or in-place where the out-of-place half is null (not run).
      const Json* half = nullptr;
      std::string half_path;
      for (const char* key : {"out_of_place", "in_place"}) {
        auto it = row.find(key);
        if (it == row.end() || it->is_null()) continue;
        if (!it->is_object()) fail(path + "." + key, "an object or null", it->type_name());
        check_wrong(*it, path + "." + key);
        if (!half) {
          half = &*it;
          half_path = path + "." + key;
        }
      }
      if (!half) fail(path, "an out_of_place or in_place result", "neither");
      if (half->contains("cpu_time")) {
        throw InputError(json_location(where_, text_, half_path), half_path + ": this document reports CPU time (-C 1): the time to launch the calls, not their "
                                             "duration; rerun without -C");
      }
      const double us = number(*half, half_path, "time", true);
      const double algbw = number(*half, half_path, "alg_bw", false);
      const double busbw = number(*half, half_path, "bus_bw", false);
      if (auto mismatch = busbw_mismatch(run, algbw, busbw)) throw InputError(json_location(where_, text_, path), path + ": " + *mismatch);
      const auto bytes = size.get<std::uint64_t>();
      if (auto expected = time_mismatch(bytes, us, algbw)) fail(half_path + ".time", *expected, fmt::format("{:g}", us));
      // The type and count, where the document gives them, agree with the size as in a text row.
      if (auto type = row.find("type"); type != row.end()) {
        const int element = type->is_string() ? element_bytes(type->get<std::string>()) : 0;
        if (element == 0) fail(path + ".type", kNcclTestsTypes, type->dump());
        if (auto count = row.find("count"); count != row.end()) {
          if (!count->is_number_unsigned() && !(count->is_number_integer() && count->get<long>() >= 0)) fail(path + ".count", "a count of elements", count->dump());
          if (auto m = count_mismatch(run.op, run.ranks, bytes, count->get<std::uint64_t>(), element)) {
            fail(path + (m->size ? ".size" : ".count"), m->expected, m->size ? size.dump() : count->dump());
          }
        }
      }
      if (bytes == 0) continue;
      zero_only = false;
      m.collectives.push_back(CollectiveSample{run.op, run.link, run.ranks, run.nodes, static_cast<double>(bytes), us * 1e-6});
    }
    if (m.collectives.empty()) {
      throw InputError(where_, zero_only ? "every result is for a size of 0 bytes, which measures no bandwidth"
                                         : "no results: the document's \"results\" list is empty");
    }
    m.meta["source"] = "nccl-tests output " + file_.filename().string();
    return m;
  }

 private:
  // At the field's line in the document (the parsed JSON keeps no positions).
  [[noreturn]] void fail(const std::string& field, const std::string& expected, const std::string& found) const {
    throw InputError(json_location(where_, text_, field), field, expected, found);
  }
  const Json& member(const Json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path.empty() ? key : path + "." + key, "a value", "nothing (the field is missing)");
    return *it;
  }
  long positive_int(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = member(obj, path, key);
    if (!v.is_number_integer() || v.get<long>() <= 0 || v.get<long>() > (1 << 20)) fail(path + "." + key, "a positive integer", v.dump());
    return v.get<long>();
  }
  // A time (positive) or bandwidth (>= 0); NaN is written as the string "nan".
  double number(const Json& obj, const std::string& path, const char* key, bool positive) const {
    const Json& v = member(obj, path, key);
    const char* expected = positive ? "a positive number" : "a number >= 0";
    if (!v.is_number()) fail(path + "." + key, expected, v.dump());
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0 || (positive && x == 0)) fail(path + "." + key, expected, v.dump());
    return x;
  }
  void check_wrong(const Json& half, const std::string& path) const {
    auto it = half.find("nwrong");
    if (it == half.end() || it->is_null()) return;  // no data check
    if (!it->is_number() || it->get<double>() < 0) fail(path + ".nwrong", "a count of wrong elements or null", it->dump());
    if (it->get<double>() != 0) fail(path + ".nwrong", "0 (a result that miscompares has no trustworthy time)", it->dump());
  }

  const std::filesystem::path& file_;
  SourceLocation where_;
  std::string_view text_;  // the document being read
  const NcclTestsOptions& options_;
};

bool looks_like_json(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

}  // namespace

Measurements parse_nccl_tests(const std::string& text, const std::filesystem::path& file, const NcclTestsOptions& options) {
  if (looks_like_json(text)) return JsonReader(file, options).read(text);
  return TextReader(file, options).read(text);
}

Measurements read_nccl_tests(const std::filesystem::path& file, const NcclTestsOptions& options) {
  return parse_nccl_tests(read_text(file, "nccl-tests output"), file, options);
}

}  // namespace cs::calibrate
