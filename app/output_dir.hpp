// The output-directory options (--out, --report): what they accept, and creating the directory.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"

namespace cs::app {

// Refuses, as a command-line mistake (exit status 2, naming the option), an empty path and a path
// that exists and is not a directory.
inline CLI::Validator output_directory() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "expected a directory to write into, found an empty path";
        std::error_code ec;
        if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
          return fmt::format("expected a directory to write into, found a file of that name: {}", path);
        }
        return "";
      },
      "DIR");
}

// Creates `dir` (and its parents) for `option`'s files; a failure (no permission, a file in the
// way) is bad input naming the option.
inline void make_output_directory(const std::filesystem::path& dir, const char* option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    throw InputError(fmt::format("{} {}: expected a directory to write into, found {}", option, dir.string(), ec ? ec.message() : "a file of that name"));
  }
}

}  // namespace cs::app
