// Plain-text tables for terminal output: columns sized to their widest cell, numbers right-aligned.
#pragma once

#include <string>
#include <vector>

namespace cs::reports {

class TextTable {
 public:
  enum class Align { left, right };
  explicit TextTable(std::vector<std::string> header, std::vector<Align> align = {});
  void add_row(std::vector<std::string> cells);
  [[nodiscard]] std::string render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace cs::reports
