// The path options: what the output options (--out and --report directories, single output files)
// and the input files accept. reports::make_output_directory creates the output directories.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"

namespace cs::app {

// Refuses, as a command-line mistake (exit status 2, naming the option), an empty path and a path
// that exists and is not a directory. Trailing slashes are dropped, so that messages naming the
// files written read "out/summary.json", not "out//summary.json".
inline CLI::Validator output_directory() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "expected a directory to write into, found an empty path";
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        std::error_code ec;
        if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
          return fmt::format("expected a directory to write into, found a file of that name: {}", path);
        }
        return "";
      },
      "DIR");
}

// Refuses, as a command-line mistake, an output file path that is empty, names a directory, or
// lies in a directory that does not exist, before the command does its work (the file itself is
// written atomically at the end).
inline CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "expected a file to write, found an empty path";
        std::error_code ec;
        const std::filesystem::path p(path);
        if (std::filesystem::is_directory(p, ec)) return fmt::format("expected a file to write, found a directory: {}", path);
        const std::filesystem::path parent = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
        if (!std::filesystem::is_directory(parent, ec)) {
          return std::filesystem::exists(parent, ec) ? fmt::format("expected a file in an existing directory, but {} is not a directory", parent.string())
                                                     : fmt::format("expected a file in an existing directory, but directory {} does not exist", parent.string());
        }
        return "";
      },
      "FILE");
}

// An input file given on the command line: refused, as a command-line mistake naming the option,
// where nothing is there, a directory is, or a symbolic link leads nowhere (CLI11's ExistingFile
// said "File does not exist" of a link loop and of a dangling link alike).
inline CLI::Validator input_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "expected a file to read, found an empty path";
        const std::filesystem::path p(path);
        std::error_code ec;
        const auto status = std::filesystem::status(p, ec);
        if (ec == std::errc::too_many_symbolic_link_levels) return fmt::format("expected a file to read, found a loop of symbolic links: {}", path);
        if (std::filesystem::is_directory(status)) return fmt::format("expected a file to read, found a directory: {}", path);
        if (std::filesystem::exists(status)) return "";
        std::error_code link_ec;
        if (std::filesystem::is_symlink(std::filesystem::symlink_status(p, link_ec))) {
          return fmt::format("expected a file to read, found a symbolic link to {}, which leads to nothing: {}", std::filesystem::read_symlink(p, link_ec).string(), path);
        }
        if (ec && ec != std::errc::no_such_file_or_directory) return fmt::format("expected a file to read, but {}: {}", ec.message(), path);
        return fmt::format("expected a file to read, found nothing at {}", path);
      },
      "FILE");
}

// Whether two output paths name the same file (through "..", symbolic links or a relative path), so
// that one output would replace the other (`topo --dot X --graphml X` had written GraphML into X).
inline bool same_output(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ea, eb;
  const std::filesystem::path ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
  return (ea || eb) ? a.lexically_normal() == b.lexically_normal() : ca == cb;
}

// Refuses, as bad input, an output that would replace a file the command has read (a run's request
// trace named requests.csv in its --out directory, a topology given as collective's --trace): the
// input would be lost, and the next run would read the output in its place.
inline void refuse_outputs_over_inputs(const std::vector<std::filesystem::path>& outputs, const std::string& option) {
  for (const auto& input : InputsRead::all()) {
    for (const auto& output : outputs) {
      if (same_output(output, input)) {
        throw InputError(fmt::format("{}: {} is a file this command read: writing there would replace it; give another path", option, output.string()));
      }
    }
  }
}

// The option that named a command's output directory, for its messages: --report when only
// --report was given (its directory then holds --out's files too), else --out.
template <class Options>
const char* out_option(const Options& o) {
  return !o.report.empty() && o.out == o.report ? "--report" : "--out";
}

}  // namespace cs::app
