// The YAML reading layer that every loader uses.
//
// A Node is a YAML value that knows where it came from (file, line, column) and its field path
// ("topology.fabric.tiers[1].radix"), so every error can say exactly what is wrong and where:
//   file:line:col: field 'a.b': expected ..., found ...
// A Map reads the keys of a mapping with typed getters, defaults and validators, and its finish()
// turns every key that no getter asked for into an "unknown key" error with a "did you mean".
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/units.hpp"

namespace cs::yaml {

class Node;

// A parsed YAML file (or string). Guards against hostile input: a size limit on the text and a
// limit on how many nodes a load may visit (aliases can make a small file expand exponentially).
class Document : public std::enable_shared_from_this<Document> {
 public:
  static constexpr std::size_t kMaxBytes = 64u << 20;      // 64 MiB of YAML text
  static constexpr std::size_t kMaxVisits = 4'000'000;     // nodes visited by the loaders

  static std::shared_ptr<const Document> load_file(const std::filesystem::path& path);
  static std::shared_ptr<const Document> load_string(std::string_view text, const std::string& name);

  [[nodiscard]] Node root() const;
  // Where a node of this document is, its column in characters (UTF-8), as an editor counts them.
  [[nodiscard]] SourceLocation locate(const YAML::Mark& mark) const;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] const std::shared_ptr<const std::string>& name() const { return name_; }
  void count_visit(const SourceLocation& where) const;

 private:
  Document(YAML::Node root, std::filesystem::path path, std::string name, std::string_view text);
  static std::shared_ptr<const Document> parse(std::string_view text, std::filesystem::path path, const std::string& name);

  YAML::Node root_;
  std::filesystem::path path_;  // empty for a string document
  std::shared_ptr<const std::string> name_;
  // The text, kept only when it holds a byte past ASCII, where YAML's byte columns and characters differ.
  std::string non_ascii_text_;
  mutable std::size_t visits_ = 0;
};

// A validator: what the value must be ("a positive integer") and the test.
template <class T>
struct Check {
  std::string expected;
  std::function<bool(const T&)> ok;
};

template <class T>
Check<T> positive() {
  return {"a positive value", [](const T& v) { return v > T{}; }};
}
template <class T>
Check<T> non_negative() {
  return {"a value >= 0", [](const T& v) { return !(v < T{}); }};
}
template <class T>
Check<T> at_least(T low, std::string expected) {
  return {std::move(expected), [low](const T& v) { return !(v < low); }};
}
template <class T>
Check<T> in_range(T low, T high, std::string expected) {
  return {std::move(expected), [low, high](const T& v) { return !(v < low) && !(high < v); }};
}

// A name that heads outputs (a scenario's, a topology's, a model's, a case id): not empty, not only
// blanks, on one line. An empty scenario name had printed ": llama3-8b on one-dgx-h100 ...", and one
// broken over lines splits the table rows it stands in.
inline Check<std::string> name(std::string expected = "a name (not empty, not only spaces, on one line, without tabs)") {
  return {std::move(expected), [](const std::string& s) {
            return s.find_first_not_of(" \t") != std::string::npos && s.find_first_of("\n\r\t") == std::string::npos;
          }};
}

// The bandwidth of a link, a NIC or a memory: from 1 KB/s to 1 PB/s. Anything slower is a unit typed
// many orders of magnitude off, whose transfers would outlast the simulated clock (146 years); a
// petabyte per second is a hundred times the fastest HBM and would overflow the max-flow's integer
// capacities once summed over a fabric.
inline Check<BytesPerSec> bandwidth() {
  return {"a bandwidth of at least 1KB/s and at most 1PB/s", [](const BytesPerSec& v) { return !(v.value() < 1e3) && !(v.value() > 1e15); }};
}

// A latency (a link's, a device's, a switch or cable hop's, a fitted transfer's or collective's):
// from 0 to 1 s. A hop is nanoseconds to microseconds; a second is a unit typed many orders off,
// whose path sums would print as days, or infinity.
inline Check<Seconds> latency() {
  return {"a latency from 0 to 1s", [](const Seconds& v) { return !(v.value() < 0) && !(v.value() > 1); }};
}

// A compute peak from 1 GFLOP/s (a CPU core's is tens) to 1 EFLOP/s (200 times a B200's dense fp8
// peak): slower is a unit typed many orders off, whose kernels would outlast the simulated clock;
// faster, a kernel would take less than the clock's nanosecond.
inline Check<FlopsPerSec> compute_peak() {
  return {"a peak from 1GFLOPS to 1EFLOPS", [](const FlopsPerSec& v) { return v.value() >= 1e9 && v.value() <= 1e18; }};
}

// A price per GPU- or node-hour, in any currency: above 0 and at most 1e9. Past it the cost of a run
// overflows to infinity.
inline Check<double> price_per_hour() {
  return {"a price above 0 and at most 1e9 an hour", [](double v) { return v > 0 && v <= 1e9; }};
}

// How a type is read from a scalar; specialised below for numbers, strings, booleans and units.
template <class T, class Enable = void>
struct Parse;

class Node {
 public:
  Node(std::shared_ptr<const Document> doc, YAML::Node node, std::string field, SourceLocation where);

  [[nodiscard]] const std::string& field() const { return field_; }
  [[nodiscard]] const SourceLocation& where() const { return where_; }
  [[nodiscard]] const Document& document() const { return *doc_; }
  [[nodiscard]] const std::shared_ptr<const Document>& document_ptr() const { return doc_; }
  // The directory that relative paths in this node are resolved against.
  [[nodiscard]] std::filesystem::path directory() const;

  [[nodiscard]] bool is_map() const { return node_.IsMap(); }
  [[nodiscard]] bool is_list() const { return node_.IsSequence(); }
  [[nodiscard]] bool is_scalar() const { return node_.IsScalar(); }
  [[nodiscard]] bool is_null() const { return node_.IsNull(); }

  // The scalar's text; fails with "expected <what>" when the node is not a scalar.
  [[nodiscard]] std::string scalar(std::string_view what = "a single value") const;
  // The same for a number or a boolean, which must be written plain: a quoted "8" is text in YAML,
  // so it fails rather than being read as a number.
  [[nodiscard]] std::string plain_scalar(std::string_view what) const;
  // "'400Gbps'", "a map", "a list of 3 items", "nothing".
  [[nodiscard]] std::string describe() const;
  // The items of a list (fails unless this is a list).
  [[nodiscard]] std::vector<Node> items() const;

  template <class T>
  [[nodiscard]] T as() const {
    return Parse<T>::from(*this);
  }
  template <class T>
  [[nodiscard]] T as(const Check<T>& check) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      // An integer past the type: the field's own expectation, with the type's bound where the
      // check alone would accept the value (a 2^32 seq_len is "a positive value (at most 2^31 - 1)").
      using Limits = std::numeric_limits<T>;
      if (const int past = integer_past(Limits::min(), Limits::max())) {
        const T bound = past > 0 ? Limits::max() : Limits::min();
        if (!check.ok(bound)) fail(check.expected);
        fail(std::string(check.expected) + (past > 0 ? " (at most " : " (at least ") + std::to_string(bound) + ")");
      }
    }
    T value = Parse<T>::from(*this);
    if (!check.ok(value)) fail(check.expected);
    return value;
  }

  // 1 when the scalar is an integer above high, -1 below low, else 0 (not an integer, or in range).
  [[nodiscard]] int integer_past(std::int64_t low, std::int64_t high) const;

  [[noreturn]] void fail(std::string_view expected) const;
  [[noreturn]] void fail(std::string_view expected, std::string_view found) const;
  // An error about this node that is not an expected/found mismatch.
  [[noreturn]] void fail_message(std::string_view message) const;

  [[nodiscard]] const YAML::Node& raw() const { return node_; }

 private:
  std::shared_ptr<const Document> doc_;
  YAML::Node node_;
  std::string field_;
  SourceLocation where_;
};

// Strict reader of a mapping.
class Map {
 public:
  explicit Map(const Node& node);

  [[nodiscard]] const Node& node() const { return node_; }
  [[nodiscard]] bool has(std::string_view key) const;
  // The value of a key, or nothing when absent. Either way the key becomes known to finish().
  std::optional<Node> find(std::string_view key);
  // The value of a key that must be present; `expected` describes it for the message.
  Node at(std::string_view key, std::string_view expected);

  template <class T>
  T get(std::string_view key) {
    return at(key, Parse<T>::expected()).template as<T>();
  }
  template <class T>
  T get(std::string_view key, const Check<T>& check) {
    return at(key, check.expected).template as<T>(check);
  }
  template <class T>
  T get_or(std::string_view key, T fallback) {
    auto n = find(key);
    return n ? n->template as<T>() : fallback;
  }
  template <class T>
  T get_or(std::string_view key, T fallback, const Check<T>& check) {
    auto n = find(key);
    return n ? n->template as<T>(check) : fallback;
  }
  // Overwrites target only when the key is present (for parts that extend another).
  template <class T>
  void read(std::string_view key, T& target) {
    if (auto n = find(key)) target = n->template as<T>();
  }
  template <class T>
  void read(std::string_view key, T& target, const Check<T>& check) {
    if (auto n = find(key)) target = n->template as<T>(check);
  }
  template <class T>
  void read(std::string_view key, std::optional<T>& target, const Check<T>& check) {
    if (auto n = find(key)) target = n->template as<T>(check);
  }

  // A string that must be one of the options.
  std::string choice(std::string_view key, const std::vector<std::string>& options);
  std::string choice_or(std::string_view key, std::string fallback, const std::vector<std::string>& options);

  // The keys present in the mapping, in document order.
  [[nodiscard]] std::vector<std::string> keys() const;

  // Fails on the first key that no getter asked for, suggesting the nearest known key.
  void finish() const;

 private:
  struct Entry {
    std::string key;
    SourceLocation key_where;
    YAML::Node value;
  };
  const Entry* entry(std::string_view key) const;
  Node child(const Entry& e) const;

  Node node_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // key -> its entry (a map of 200,000 keys took minutes searched in a list)
  std::vector<std::string> known_;
};

// Checks that a scalar is one of the options; used by Map::choice and by list items.
std::string parse_choice(const Node& node, const std::vector<std::string>& options);

template <>
struct Parse<std::string> {
  static std::string from(const Node& n) { return n.scalar("a string"); }
  static std::string expected() { return "a string"; }
};

// YAML 1.2's boolean spellings (true, True, TRUE and the same for false); nullopt for any other text.
std::optional<bool> boolean_spelling(std::string_view text);

template <>
struct Parse<bool> {
  static bool from(const Node& n);
  static std::string expected() { return "true or false"; }
};

template <>
struct Parse<double> {
  static double from(const Node& n);
  static std::string expected() { return "a number"; }
};

// An integer from low to high, the range of the type it is read into. Out of it, the message states
// that range, for a number past int64 as for one just past the type.
std::int64_t parse_integer(const Node& n, std::int64_t low, std::int64_t high);
// 0 to 2^64 - 1 (seeds: the range the command line's --seed takes).
std::uint64_t parse_unsigned64(const Node& n);

template <class T>
struct Parse<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static T from(const Node& n) {
    if constexpr (std::is_same_v<T, std::uint64_t>) return parse_unsigned64(n);
    using Limits = std::numeric_limits<T>;
    const auto high = static_cast<std::int64_t>(std::min<std::uint64_t>(Limits::max(), std::numeric_limits<std::int64_t>::max()));
    return static_cast<T>(parse_integer(n, static_cast<std::int64_t>(Limits::min()), high));
  }
  static std::string expected() { return "an integer"; }
};

// Quantities with units: "400Gbps", "80GiB", "1.5us", "989TFLOPS".
std::string quantity_expected(const char* what, const UnitSpelling* units, std::size_t count);
double parse_quantity(const Node& n, const char* what, const UnitSpelling* units, std::size_t count);

template <class Tag>
struct Parse<Quantity<Tag>> {
  using Q = Quantity<Tag>;
  static Q from(const Node& n) {
    return Q(parse_quantity(n, UnitTable<Q>::what(), UnitTable<Q>::begin(), UnitTable<Q>::size()));
  }
  static std::string expected() {
    return quantity_expected(UnitTable<Q>::what(), UnitTable<Q>::begin(), UnitTable<Q>::size());
  }
};

}  // namespace cs::yaml
