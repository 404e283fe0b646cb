#include "clustersim/common/json_position.hpp"

#include <cstddef>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace cs {

namespace {

// One step of a path: a key of an object, or an index of a list.
struct Step {
  bool index = false;
  std::string key;
  std::size_t at = 0;
};

std::optional<std::vector<Step>> parse_path(std::string_view path) {
  std::vector<Step> steps;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const std::size_t end = path.find(']', i);
      if (end == std::string_view::npos || end == i + 1) return std::nullopt;
      Step s;
      s.index = true;
      for (std::size_t k = i + 1; k < end; ++k) {
        if (path[k] < '0' || path[k] > '9') return std::nullopt;
        s.at = s.at * 10 + static_cast<std::size_t>(path[k] - '0');
      }
      steps.push_back(s);
      i = end + 1;
      if (i < path.size() && path[i] == '.') ++i;
    } else {
      const std::size_t end = path.find_first_of(".[", i);
      const std::size_t stop = end == std::string_view::npos ? path.size() : end;
      steps.push_back({false, std::string(path.substr(i, stop - i)), 0});
      i = stop;
      if (i < path.size() && path[i] == '.') ++i;
    }
  }
  return steps;
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::size_t skip_space(std::size_t p) const {
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return p;
  }
  // Past a string that starts at p (its opening quote), with its text (simple escapes decoded;
  // \u escapes kept as written, which no key of ours needs); npos where it does not end.
  std::size_t string_end(std::size_t p, std::string* decoded) const {
    for (++p; p < text_.size(); ++p) {
      const char c = text_[p];
      if (c == '"') return p + 1;
      if (c == '\\') {
        if (++p >= text_.size()) return std::string_view::npos;
        if (decoded) {
          const char e = text_[p];
          decoded->push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'u' ? '\\' : e);
          if (e == 'u') decoded->push_back('u');
        }
      } else if (decoded) {
        decoded->push_back(c);
      }
    }
    return std::string_view::npos;
  }
  // Past the value that starts at p; npos where the text ends first.
  std::size_t value_end(std::size_t p) const {
    if (p >= text_.size()) return std::string_view::npos;
    if (text_[p] == '"') return string_end(p, nullptr);
    if (text_[p] != '{' && text_[p] != '[') {
      while (p < text_.size() && text_[p] != ',' && text_[p] != '}' && text_[p] != ']' && text_[p] != ' ' && text_[p] != '\t' && text_[p] != '\n' &&
             text_[p] != '\r') {
        ++p;
      }
      return p;
    }
    std::size_t depth = 0;
    while (p < text_.size()) {
      const char c = text_[p];
      if (c == '"') {
        p = string_end(p, nullptr);
        if (p == std::string_view::npos) return p;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return p + 1;
      ++p;
    }
    return std::string_view::npos;
  }
  // The start of the member `key` of the object at p (the occurrence-th, or the last for 0).
  std::optional<std::size_t> member(std::size_t p, const std::string& key, int occurrence) const {
    if (p >= text_.size() || text_[p] != '{') return std::nullopt;
    std::optional<std::size_t> found;
    int seen = 0;
    p = skip_space(p + 1);
    while (p < text_.size() && text_[p] == '"') {
      std::string name;
      p = string_end(p, &name);
      if (p == std::string_view::npos) return found;
      p = skip_space(p);
      if (p >= text_.size() || text_[p] != ':') return found;
      const std::size_t value = skip_space(p + 1);
      if (name == key) {
        found = value;
        if (++seen == occurrence) return found;
      }
      p = value_end(value);
      if (p == std::string_view::npos) return found;
      p = skip_space(p);
      if (p >= text_.size() || text_[p] != ',') break;
      p = skip_space(p + 1);
    }
    return found;
  }
  // The start of the element `at` of the list at p.
  std::optional<std::size_t> element(std::size_t p, std::size_t at) const {
    if (p >= text_.size() || text_[p] != '[') return std::nullopt;
    p = skip_space(p + 1);
    for (std::size_t i = 0; p < text_.size() && text_[p] != ']'; ++i) {
      if (i == at) return p;
      p = value_end(p);
      if (p == std::string_view::npos) return std::nullopt;
      p = skip_space(p);
      if (p >= text_.size() || text_[p] != ',') return std::nullopt;
      p = skip_space(p + 1);
    }
    return std::nullopt;
  }
  TextPosition position(std::size_t offset) const {
    TextPosition t{1, 1};
    for (std::size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++t.line;
        t.column = 1;
      } else {
        ++t.column;
      }
    }
    return t;
  }

 private:
  std::string_view text_;
};

}  // namespace

TextPosition json_position(std::string_view text, std::string_view path, int occurrence) {
  const std::optional<std::vector<Step>> steps = parse_path(path);
  if (!steps) return {};
  const Scanner scan(text);
  std::size_t at = scan.skip_space(0);
  if (at >= text.size()) return {};
  for (std::size_t k = 0; k < steps->size(); ++k) {
    const Step& s = (*steps)[k];
    const std::optional<std::size_t> next = s.index ? scan.element(at, s.at) : scan.member(at, s.key, k + 1 == steps->size() ? occurrence : 0);
    if (!next) break;  // the deepest object or list on the path that is there
    at = *next;
  }
  return scan.position(at);
}

SourceLocation json_location(const std::filesystem::path& file, std::string_view path, int occurrence) {
  SourceLocation where{std::make_shared<const std::string>(file.string())};
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size > (std::uintmax_t{256} << 20)) return where;
  std::ifstream in(file, std::ios::binary);
  if (!in) return where;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const TextPosition p = json_position(text, path, occurrence);
  where.line = p.line;
  where.column = p.column;
  return where;
}

}  // namespace cs
