#include "clustersim/common/json_position.hpp"

#include <cstddef>
#include <cstdint>
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
  // calibrate's readers name the document itself "<document>" ("<document>.format").
  constexpr std::string_view kDocument = "<document>";
  if (path.substr(0, kDocument.size()) == kDocument) {
    i = kDocument.size();
    if (i < path.size() && path[i] == '.') ++i;
  }
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
  // Past a string that starts at p (its opening quote), with its text decoded as the parser
  // decodes it (escapes, \u ones and their surrogate pairs to UTF-8); npos where it does not end.
  std::size_t string_end(std::size_t p, std::string* decoded) const {
    for (++p; p < text_.size(); ++p) {
      const char c = text_[p];
      if (c == '"') return p + 1;
      if (c != '\\') {
        if (decoded) decoded->push_back(c);
        continue;
      }
      if (++p >= text_.size()) return std::string_view::npos;
      const char e = text_[p];
      if (e != 'u') {
        if (decoded) decoded->push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e);
        continue;
      }
      std::uint32_t code = hex4(p + 1);
      p += 4;
      if (code >= 0xD800 && code < 0xDC00 && p + 6 < text_.size() && text_[p + 1] == '\\' && text_[p + 2] == 'u') {
        const std::uint32_t low = hex4(p + 3);
        if (low >= 0xDC00 && low < 0xE000) {
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          p += 6;
        }
      }
      if (decoded) append_utf8(*decoded, code);
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
  // The start of the member `key` of the object at p (its occurrence-th, 1-based, or the last
  // there is).
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
  // Columns count characters (UTF-8 continuation bytes add none), as an editor shows them.
  TextPosition position(std::size_t offset) const {
    TextPosition t{1, 1};
    for (std::size_t i = start(); i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++t.line;
        t.column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++t.column;
      }
    }
    return t;
  }
  // Where the document starts: past a UTF-8 byte order mark, which the parser skips too.
  std::size_t start() const { return text_.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0; }

 private:
  std::uint32_t hex4(std::size_t p) const {
    std::uint32_t v = 0;
    for (std::size_t k = p; k < p + 4; ++k) {
      const char c = k < text_.size() ? text_[k] : '0';
      v = v * 16 + static_cast<std::uint32_t>(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0);
    }
    return v;
  }
  static void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  std::string_view text_;
};

}  // namespace

TextPosition json_position(std::string_view text, std::string_view path, int occurrence) {
  const std::optional<std::vector<Step>> steps = parse_path(path);
  if (!steps) return {};
  const Scanner scan(text);
  std::size_t at = scan.skip_space(scan.start());
  if (at >= text.size()) return {};
  for (std::size_t k = 0; k < steps->size(); ++k) {
    const Step& s = (*steps)[k];
    // Each step takes the first of a key written twice (where the parser met the second, its
    // readers stopped), the last step the occurrence asked for.
    const std::optional<std::size_t> next = s.index ? scan.element(at, s.at) : scan.member(at, s.key, k + 1 == steps->size() ? occurrence : 1);
    if (!next) break;  // the deepest object or list on the path that is there (the document itself)
    at = *next;
  }
  return scan.position(at);
}

SourceLocation json_location(const SourceLocation& where, std::string_view text, std::string_view path, int occurrence) {
  SourceLocation located = where;
  const TextPosition p = json_position(text, path, occurrence);
  located.line = p.line;
  located.column = p.column;
  return located;
}

SourceLocation json_location(const std::filesystem::path& file, std::string_view path, int occurrence) {
  const SourceLocation where{std::make_shared<const std::string>(file.string())};
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size > (std::uintmax_t{256} << 20)) return where;
  std::ifstream in(file, std::ios::binary);
  if (!in) return where;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return json_location(where, text, path, occurrence);
}

}  // namespace cs
