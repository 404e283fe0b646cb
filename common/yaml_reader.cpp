#include "clustersim/common/yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "clustersim/common/input_file.hpp"
#include "clustersim/common/suggest.hpp"

namespace cs::yaml {

namespace {

// yaml-cpp counts columns in bytes: in a line with a name in another script before the value, the
// column an editor shows is the characters before it (a probe's "日本語" had moved one by 6).
// `text`: the document's text, or empty where it is plain ASCII.
// The offset where the line holding byte `pos` of `text` starts.
std::size_t line_start(std::string_view text, std::size_t pos) {
  const std::size_t newline = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1);
  return newline == std::string_view::npos ? 0 : newline + 1;
}

SourceLocation location_of(const std::shared_ptr<const std::string>& file, const YAML::Mark& mark, std::string_view text = {}) {
  if (mark.is_null()) return {file, 0, 0};
  int column = mark.column + 1;
  if (!text.empty() && mark.pos >= 0 && static_cast<std::size_t>(mark.pos) <= text.size()) {
    const auto pos = static_cast<std::size_t>(mark.pos);
    const std::size_t start = line_start(text, pos);
    column = 1;
    for (std::size_t i = start; i < pos; ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++column;
    }
  }
  return {file, mark.line + 1, column};
}

// yaml-cpp's marks count from after a UTF-8 byte-order mark: the text their positions index.
std::string_view without_bom(std::string_view text) { return text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text; }

// Whether a parse error is a plain key past YAML's 1,024 characters, where the parser sees no key,
// only a stray ':': the error's line holds no colon in its first 1,024 characters after the
// indentation (a long value holding ': ' fails the same way, and wants quotes instead).
bool key_past_limit(const YAML::Exception& e, std::string_view text) {
  if (e.msg != YAML::ErrorMsg::MAP_VALUE || e.mark.column < 1024 || e.mark.pos < 0) return false;
  const std::size_t start = line_start(text, std::min(static_cast<std::size_t>(e.mark.pos), text.size()));
  std::string_view row = text.substr(start, text.find('\n', start) - start);
  row.remove_prefix(std::min(row.find_first_not_of(" -"), row.size()));
  return row.substr(0, 1024).find(':') == std::string_view::npos;
}

bool has_non_ascii(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
}

// Text from a file as a message shows it: control characters (an escaped NUL, a terminal's escape
// sequence) as \xNN, and at most `shown` bytes (a 5 MB key had made a 5 MB message).
std::string printable(std::string_view text, std::size_t shown) {
  std::string out;
  for (const char ch : text.substr(0, shown)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  if (text.size() > shown) out += "...";
  return out;
}

std::string child_field(const std::string& parent, std::string_view key) {
  const std::string shown = printable(key, 60);
  return parent.empty() ? shown : parent + "." + shown;
}

std::string quote_text(std::string_view text) { return fmt::format("'{}'", printable(text, 60)); }

// The line and column of a byte offset, counting UTF-8 characters.
std::pair<int, int> line_column(std::string_view text, std::size_t offset) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

// ---------------------------------------------------------------- Document

Document::Document(YAML::Node root, std::filesystem::path path, std::string name, std::string_view text)
    : root_(std::move(root)), path_(std::move(path)), name_(std::make_shared<const std::string>(std::move(name))),
      non_ascii_text_(has_non_ascii(without_bom(text)) ? std::string(without_bom(text)) : std::string()) {}

SourceLocation Document::locate(const YAML::Mark& mark) const { return location_of(name_, mark, non_ascii_text_); }

std::shared_ptr<const Document> Document::load_file(const std::filesystem::path& path) {
  auto display = std::make_shared<const std::string>(path.string());
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(SourceLocation{display}, "no such file");
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(SourceLocation{display}, fmt::format("is {}, expected a YAML file (a regular file)", not_regular_file_kind(path)));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxBytes) {
    throw InputError(SourceLocation{display},
                     fmt::format("file is {} bytes; YAML inputs are limited to {} bytes", size, kMaxBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(SourceLocation{display}, "cannot be opened for reading");
  std::ostringstream text;
  text << in.rdbuf();
  InputsRead::note(path);
  return parse(text.str(), path, path.string());
}

std::shared_ptr<const Document> Document::load_string(std::string_view text, const std::string& name) {
  if (text.size() > kMaxBytes) {
    throw InputError(SourceLocation{std::make_shared<const std::string>(name)},
                     fmt::format("input is {} bytes; YAML inputs are limited to {} bytes", text.size(), kMaxBytes));
  }
  return parse(text, {}, name);
}

namespace {

// The offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF, no sequence cut short), or nothing.
std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= text.size()) return i;
      const auto b = static_cast<unsigned char>(text[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::nullopt;
}

// Notes whether a document holds anything but a null, and where it starts.
class ContentProbe : public YAML::EventHandler {
 public:
  bool content = false;
  YAML::Mark where;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { note(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { note(mark); }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { note(mark); }
  void OnMapEnd() override {}

 private:
  void note(const YAML::Mark& mark) {
    if (!content) where = mark;
    content = true;
  }
};

}  // namespace

std::shared_ptr<const Document> Document::parse(std::string_view text, std::filesystem::path path, const std::string& name) {
  auto display = std::make_shared<const std::string>(name);
  if (text.find('\0') != std::string_view::npos) {
    throw InputError(SourceLocation{display}, "malformed YAML: the file contains NUL bytes (is it a binary file?)");
  }
  if (const auto bad = first_invalid_utf8(text)) {
    // Text read from the file goes into JSON output, which must be UTF-8 (a byte 0xff in a name had
    // ended `--json` in the JSON library's error, status 1).
    const auto [line, column] = line_column(text, *bad);
    throw InputError(SourceLocation{display, line, column},
                     fmt::format("malformed YAML: expected UTF-8 text, found the byte 0x{:02x}, which does not start a UTF-8 character there (is "
                                 "the file in another encoding?)",
                                 static_cast<unsigned char>(text[*bad])));
  }
  // A carriage return not followed by a line feed is no line break to the parser: the next line
  // would join a comment before it and be ignored (a probe's `# note\r  precision: fp8` ran bf16).
  for (std::size_t cr = text.find('\r'); cr != std::string_view::npos; cr = text.find('\r', cr + 1)) {
    if (cr + 1 < text.size() && text[cr + 1] == '\n') continue;
    const auto [line, column] = line_column(text, cr);
    throw InputError(SourceLocation{display, line, column},
                     "malformed YAML: a carriage return without a line feed after it (classic Mac line endings?): write lines ending in LF or CRLF");
  }
  YAML::Node root;
  try {
    const std::string source(text);
    root = YAML::Load(source);
    // A second document (after '---') is refused rather than ignored. Only a document marker ('---'
    // or '...') can start one, so text without either is not parsed again. The parser is asked for
    // two documents and no more: YAML::LoadAll can loop for ever on malformed input (found by fuzzing).
    if (text.find("---") != std::string_view::npos || text.find("...") != std::string_view::npos) {
      std::istringstream in(source);
      YAML::Parser parser(in);
      // Every document after the first, up to one per marker in the text (each takes one): an empty
      // second document had hidden a third, even a malformed one.
      std::size_t markers = 0;
      for (const std::string_view marker : {std::string_view("---"), std::string_view("...")}) {
        for (std::size_t at = text.find(marker); at != std::string_view::npos; at = text.find(marker, at + 1)) ++markers;
      }
      ContentProbe first;
      if (parser.HandleNextDocument(first)) {
        for (std::size_t k = 0; k <= markers; ++k) {
          ContentProbe next;
          if (!parser.HandleNextDocument(next)) break;
          if (next.content) {
            throw InputError(location_of(display, next.where, without_bom(text)), "a second YAML document (after '---'): a file holds one, and the rest would be ignored");
          }
        }
      }
    }
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(location_of(display, e.mark, without_bom(text)),
                     "malformed YAML: nested too deeply (the parser's recursion limit is a few hundred levels)");
  } catch (const YAML::Exception& e) {
    throw InputError(location_of(display, e.mark, without_bom(text)),
                     "malformed YAML: " + e.msg + (key_past_limit(e, without_bom(text)) ? " (a key may be at most 1,024 characters long: YAML's limit for a key without '?')" : ""));
  }
  return std::shared_ptr<const Document>(new Document(std::move(root), std::move(path), name, text));
}

Node Document::root() const {
  return Node(shared_from_this(), root_, "", locate(root_.Mark()));
}

void Document::count_visit(const SourceLocation& where) const {
  if (++visits_ > kMaxVisits) {
    throw InputError(where, fmt::format("the document expands to more than {} values (aliases nested too deeply?)",
                                        kMaxVisits));
  }
}

// ---------------------------------------------------------------- Node

Node::Node(std::shared_ptr<const Document> doc, YAML::Node node, std::string field, SourceLocation where)
    : doc_(std::move(doc)), node_(std::move(node)), field_(std::move(field)), where_(std::move(where)) {
  doc_->count_visit(where_);
}

std::filesystem::path Node::directory() const {
  const auto& p = doc_->path();
  if (p.empty()) return std::filesystem::current_path();
  return std::filesystem::absolute(p).parent_path();
}

std::string Node::scalar(std::string_view what) const {
  if (!node_.IsScalar()) fail(what);
  const std::string& text = node_.Scalar();
  // An explicit tag (!!null 2, !!str 8, !custom x) asks for a reading the reader does not give: it
  // would take `!!null 2` as 2. Plain and quoted values carry "?" and "!".
  if (const std::string& tag = node_.Tag(); !tag.empty() && tag != "?" && tag != "!") {
    fail(what, fmt::format("{} tagged {} (YAML tags are not read: write the value alone)", quote_text(text), printable(tag, 60)));
  }
  // An escaped control character ("\u0000", "\e") would cut a path short at the NUL or reach a
  // terminal and the reports raw; tabs and line breaks are text.
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      fail(what, fmt::format("{} (it holds the control character \\x{:02x})", quote_text(text), c));
    }
  }
  return text;
}

std::string Node::plain_scalar(std::string_view what) const {
  std::string text = scalar(what);
  // yaml-cpp tags a quoted scalar "!" and a plain one "?".
  if (node_.Tag() == "!") fail(what, fmt::format("{} in quotes (a quoted value is text: write it without the quotes)", quote_text(text)));
  return text;
}

std::string Node::describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsScalar()) return quote_text(node_.Scalar());
  if (node_.IsMap()) return "a map";
  if (node_.IsSequence()) return fmt::format("a list of {} item{}", node_.size(), node_.size() == 1 ? "" : "s");
  return "an unreadable value";
}

std::vector<Node> Node::items() const {
  if (!node_.IsSequence()) fail("a list");
  std::vector<Node> out;
  out.reserve(node_.size());
  for (std::size_t i = 0; i < node_.size(); ++i) {
    YAML::Node item = node_[i];
    SourceLocation loc = doc_->locate(item.Mark());
    if (loc.line == 0) loc = where_;
    out.emplace_back(doc_, item, fmt::format("{}[{}]", field_, i), loc);
  }
  return out;
}

void Node::fail(std::string_view expected) const { fail(expected, describe()); }

void Node::fail(std::string_view expected, std::string_view found) const {
  throw InputError(where_, field_.empty() ? std::string("(document)") : field_, std::string(expected), std::string(found));
}

void Node::fail_message(std::string_view message) const {
  if (field_.empty()) throw InputError(where_, std::string(message));
  throw InputError(where_, fmt::format("field '{}': {}", field_, message));
}

// ---------------------------------------------------------------- Map

Map::Map(const Node& node) : node_(node) {
  if (!node.is_map()) node.fail("a map of keys and values");
  for (auto it = node.raw().begin(); it != node.raw().end(); ++it) {
    const YAML::Node key = it->first;  // a copy: the iterator hands out a temporary proxy
    SourceLocation key_where = node.document().locate(key.Mark());
    if (!key.IsScalar()) {
      // `~:` or `null:` is a null key, `[a, b]:` or `{a: 1}:` a list or map used as a key.
      throw InputError(key_where, child_field(node.field(), "?"), "a plain key",
                       key.IsNull() ? "a null key (~, null or nothing before the colon; quote it if the text is meant)" : key.IsSequence() ? "a list as a key" : "a map as a key");
    }
    const std::string k = key.Scalar();
    if (const auto seen = index_.find(k); seen != index_.end()) {
      throw InputError(key_where, fmt::format("field '{}': duplicate key (first given at line {})",
                                              child_field(node.field(), k), entries_[seen->second].key_where.line));
    }
    index_.emplace(k, entries_.size());
    entries_.push_back({k, key_where, it->second});
  }
}

const Map::Entry* Map::entry(std::string_view key) const {
  const auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Node Map::child(const Entry& e) const {
  SourceLocation where = node_.document().locate(e.value.Mark());
  if (where.line == 0 || e.value.IsNull()) where = e.key_where;
  return Node(node_.document_ptr(), e.value, child_field(node_.field(), e.key), where);
}

bool Map::has(std::string_view key) const { return entry(key) != nullptr; }

std::optional<Node> Map::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  const Entry* e = entry(key);
  if (!e) return std::nullopt;
  return child(*e);
}

Node Map::at(std::string_view key, std::string_view expected) {
  auto n = find(key);
  if (!n) {
    // A misspelt key is the likeliest reason: name it.
    for (const auto& e : entries_) {
      if (!closest_match(e.key, {std::string(key)}).empty()) {
        throw InputError(e.key_where, child_field(node_.field(), key), std::string(expected),
                         fmt::format("nothing (the key is missing; did you mean it by '{}'?)", e.key));
      }
    }
    throw InputError(node_.where(), child_field(node_.field(), key), std::string(expected),
                     "nothing (the key is missing)");
  }
  return *n;
}

std::string parse_choice(const Node& node, const std::vector<std::string>& options) {
  const std::string value = node.scalar("one of " + join_alternatives(options));
  if (std::find(options.begin(), options.end(), value) != options.end()) return value;
  node.fail("one of " + join_alternatives(options), quote_text(value) + did_you_mean(value, options));
}

std::string Map::choice(std::string_view key, const std::vector<std::string>& options) {
  return parse_choice(at(key, "one of " + join_alternatives(options)), options);
}

std::string Map::choice_or(std::string_view key, std::string fallback, const std::vector<std::string>& options) {
  auto n = find(key);
  return n ? parse_choice(*n, options) : fallback;
}

std::vector<std::string> Map::keys() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.key);
  return out;
}

void Map::finish() const {
  for (const auto& e : entries_) {
    if (std::find(known_.begin(), known_.end(), e.key) != known_.end()) continue;
    throw InputError(e.key_where, child_field(node_.field(), e.key),
                     "one of the known keys " + join_alternatives(known_),
                     "unknown key " + quote_text(e.key) + did_you_mean(e.key, known_));
  }
}

// ---------------------------------------------------------------- scalars

bool Parse<bool>::from(const Node& n) {
  if (const auto b = boolean_spelling(n.plain_scalar(expected()))) return *b;
  n.fail(expected());
}

std::optional<bool> boolean_spelling(std::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

double Parse<double>::from(const Node& n) {
  const std::string s = n.plain_scalar(expected());
  double v = 0.0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) n.fail("a number");
  if (!std::isfinite(v)) n.fail("a finite number");
  return v;
}

std::uint64_t parse_unsigned64(const Node& n) {
  const std::string s = n.plain_scalar("an integer");
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const std::string range = fmt::format("an integer from 0 to {}", std::numeric_limits<std::uint64_t>::max());
  if (ec == std::errc::result_out_of_range || (!s.empty() && s.front() == '-')) n.fail(range);
  if (ec != std::errc() || ptr != s.data() + s.size()) n.fail("an integer");
  return v;
}

int Node::integer_past(std::int64_t low, std::int64_t high) const {
  if (!is_scalar() || node_.Tag() == "!") return 0;  // not a plain integer: the parse names it
  const std::string s = node_.Scalar();
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ptr != s.data() + s.size() || s.empty()) return 0;
  if (ec == std::errc::result_out_of_range) return s.front() == '-' ? -1 : 1;
  if (ec != std::errc()) return 0;
  return v > high ? 1 : v < low ? -1 : 0;
}

std::int64_t parse_integer(const Node& n, std::int64_t low, std::int64_t high) {
  const std::string s = n.plain_scalar("an integer");
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) n.fail(fmt::format("an integer from {} to {}", low, high));
  if (ec != std::errc() || ptr != s.data() + s.size()) n.fail("an integer");
  if (v < low || v > high) n.fail(fmt::format("an integer from {} to {}", low, high));
  return v;
}

std::string quantity_expected(const char* what, const UnitSpelling* units, std::size_t count) {
  return fmt::format("{} with a unit ({})", what, list_units(units, count));
}

double parse_quantity(const Node& n, const char* what, const UnitSpelling* units, std::size_t count) {
  const std::string expected = quantity_expected(what, units, count);
  const std::string s = n.scalar(expected);
  double v = 0.0;
  if (parse_quantity_text(s, units, count, v)) return v;
  if (std::isinf(v)) {
    // Out of a double's range: too large, or (a negative exponent) too small.
    const bool tiny = s.find("e-") != std::string::npos || s.find("E-") != std::string::npos;
    n.fail(fmt::format("{} that a double can hold", expected), quote_text(s) + (tiny ? " (underflows to zero)" : " (overflows to infinity)"));
  }
  double bare = 0.0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), bare);
  if (ec == std::errc() && ptr == s.data() + s.size()) n.fail(expected, quote_text(s) + " (a bare number: the unit is required)");
  n.fail(expected);
}

}  // namespace cs::yaml
