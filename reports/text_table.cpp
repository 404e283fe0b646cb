#include "clustersim/reports/text_table.hpp"

#include <algorithm>
#include <cassert>

namespace cs::reports {

TextTable::TextTable(std::vector<std::string> header, std::vector<Align> align)
    : header_(std::move(header)), align_(std::move(align)) {
  align_.resize(header_.size(), Align::left);
}

void TextTable::add_row(std::vector<std::string> cells) {
  assert(cells.size() == header_.size());
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::render(const std::string& indent) const {
  std::vector<std::size_t> width(header_.size());
  for (std::size_t c = 0; c < header_.size(); ++c) {
    width[c] = header_[c].size();
    for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (c) s += "  ";
      s += align_[c] == Align::right ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(header_);
  std::vector<std::string> rule;
  for (std::size_t w : width) rule.emplace_back(w, '-');
  out += line(rule);
  for (const auto& r : rows_) out += line(r);
  return out;
}

}  // namespace cs::reports
