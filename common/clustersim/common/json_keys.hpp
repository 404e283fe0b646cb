// A key written twice in one JSON object: nlohmann::json keeps its last value without a word (a
// record edited by hand, two records merged). Readers of clustersim's JSON inputs (calibrate's
// measurements and probes, report's results) refuse it through this tracker, fed from their parser
// callbacks, naming where the key stands (gemm[999].seconds) as the readers name a field.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/json_position.hpp"

namespace cs {

class JsonKeyTracker {
 public:
  // `text`, where the reader holds the document's text, places the error; else the file is read again.
  explicit JsonKeyTracker(SourceLocation where, std::string_view text = {}) : where_(std::move(where)), text_(text) {}

  // Every event of a parse, in order; throws InputError at a key its object already has.
  void on(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        stack_.push_back({event == Event::array_start, 0, {}, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!stack_.empty()) stack_.pop_back();
        element_done();
        break;
      case Event::key:
        if (!stack_.empty()) {
          Frame& f = stack_.back();
          f.key = parsed.get<std::string>();
          if (!f.keys.insert(f.key).second) {
            // At the second time it is written (the parse keeps no positions).
            const std::string at = path();
            const SourceLocation located = !text_.empty() ? json_location(where_, text_, at, 2) : where_.file ? json_location(*where_.file, at, 2) : where_;
            throw InputError(located, at, "each key once in an object (which value is meant?)", fmt::format("'{}' twice", f.key));
          }
        }
        break;
      case Event::value:
        element_done();
        break;
    }
  }

  // Where the parse stands: "gemm[3].seconds".
  [[nodiscard]] std::string path() const {
    std::string p;
    for (const Frame& f : stack_) p += f.array ? fmt::format("[{}]", f.index) : (p.empty() ? f.key : "." + f.key);
    return p;
  }

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;  // arrays: the element being read
    std::string key;        // objects: the key being read
    std::set<std::string> keys;
  };
  void element_done() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
  }

  SourceLocation where_;
  std::string_view text_;
  std::vector<Frame> stack_;
};

}  // namespace cs
