// A progress line on stderr when it is a terminal: each show() writes over the last, and the line is
// cleared when the object goes, however the work ends (an error would otherwise print over it).
#pragma once

#include <iostream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <unistd.h>

namespace cs::app {

class ProgressLine {
 public:
  // Shown only where `wanted` (not under --json, say) and stderr is a terminal.
  explicit ProgressLine(bool wanted) : on_(wanted && ::isatty(2)) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() {
    if (on_) std::cerr << "\r" << std::string(kWidth, ' ') << "\r" << std::flush;
  }

  [[nodiscard]] bool on() const { return on_; }
  void show(std::string_view text) const {
    if (on_) std::cerr << fmt::format("\r{:<{}}", text.substr(0, kWidth), kWidth) << std::flush;
  }

 private:
  static constexpr std::size_t kWidth = 90;
  bool on_;
};

}  // namespace cs::app
