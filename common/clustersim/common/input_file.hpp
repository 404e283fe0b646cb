// Opening an input file: only a regular file is read. A FIFO or a character device would block the
// read for ever (a probe hung `run`, `plan`, `cost`, `validate`, `report` and `calibrate` on a named
// pipe), and a directory reads as empty.
#pragma once

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"

namespace cs {

// What the path is when it is not a regular file: "no such file", "a directory", "a FIFO", ...
inline std::string not_regular_file_kind(const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status s = fs::status(file, ec);
  switch (s.type()) {
    case fs::file_type::not_found: return "no such file";
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::character:
    case fs::file_type::block: return "a device";
    default: return ec ? fmt::format("unreadable ({})", ec.message()) : "not a regular file";
  }
}

// Throws, naming the file, unless it is a regular file; `what` says what it should hold ("the
// trace", "the measurements").
inline void require_regular_file(const std::filesystem::path& file, std::string_view what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw InputError(fmt::format("{}: expected {}, a regular file, found {}", file.string(), what, not_regular_file_kind(file)));
  }
}

// The input files this process has read (a scenario, the parts it names: model, topology, node,
// hardware profile, cost sheet, and trace CSVs), for an output to record what it was computed from:
// a shipped part may come from a tree the user did not name. YAML loads note theirs; a reader of
// another format notes its file where it decides results (not, say, a search's resume file).
class InputsRead {
 public:
  static void note(const std::filesystem::path& file) {
    const std::lock_guard lock(mutex());
    files().insert(file.lexically_normal());
  }
  // Sorted, each once.
  static std::vector<std::filesystem::path> all() {
    const std::lock_guard lock(mutex());
    return {files().begin(), files().end()};
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<std::filesystem::path>& files() {
    static std::set<std::filesystem::path> f;
    return f;
  }
};

// A regular file opened for reading, or an InputError naming it.
inline std::ifstream open_input_file(const std::filesystem::path& file, std::string_view what, std::ios::openmode mode = std::ios::in) {
  require_regular_file(file, what);
  std::ifstream in(file, mode);
  if (!in) throw InputError(fmt::format("{}: cannot open {} for reading", file.string(), what));
  return in;
}

}  // namespace cs
