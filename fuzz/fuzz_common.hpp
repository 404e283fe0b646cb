// Shared by the libFuzzer targets (fuzz/README.md): each input is written to a file (the loaders
// read files, so that includes and error locations behave as for users) and handed to one loader.
// Bad input must end in cs::InputError, the one error type that names file, line and field; any
// other exception, a crash, a hang, a leak or a sanitizer report is a finding.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "clustersim/common/input_error.hpp"

namespace cs::fuzz {

// A file in this process's own temporary directory holding the input, with the given name (the
// extension matters to some loaders).
inline std::filesystem::path write_input(const std::uint8_t* data, std::size_t size, const char* name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("clustersim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto file = dir / name;
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file;
}

// Runs `load` on the input; returns 0 (libFuzzer's "keep going") when it succeeds or throws
// InputError, and aborts with the message for anything else.
template <class Load>
int run(Load&& load) {
  try {
    load();
  } catch (const cs::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an InputError: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace cs::fuzz
