#include "json_input.hpp"

#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"

namespace cs::calibrate {

std::string read_text(const std::filesystem::path& file, std::string_view what) {
  std::ifstream in = open_input_file(file, fmt::format("the {}", what), std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json parse_json(const std::string& text, const std::filesystem::path& file, std::string_view hint) {
  const SourceLocation where{std::make_shared<const std::string>(file.string())};
  // A key written twice in one object would be read as its last value without a word (a record
  // edited by hand, two records merged): refused, naming where it stands (gemm[999].seconds) as the
  // readers name a field.
  struct Frame {
    bool array = false;
    std::size_t index = 0;  // arrays: the element being read
    std::string key;        // objects: the key being read
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  const auto path = [&] {
    std::string p;
    for (const Frame& f : stack) p += f.array ? fmt::format("[{}]", f.index) : (p.empty() ? f.key : "." + f.key);
    return p;
  };
  const auto element_done = [&] {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  };
  const nlohmann::json::parser_callback_t no_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        stack.push_back({event == Event::array_start, 0, {}, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!stack.empty()) stack.pop_back();
        element_done();
        break;
      case Event::key:
        if (!stack.empty()) {
          stack.back().key = parsed.get<std::string>();
          if (!stack.back().keys.insert(stack.back().key).second) {
            throw InputError(where, path(), "each key once in an object (which value is meant?)", fmt::format("'{}' twice", stack.back().key));
          }
        }
        break;
      case Event::value:
        element_done();
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, no_duplicates);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(where, fmt::format("not valid JSON at byte {}{}: {}", e.byte, hint.empty() ? "" : fmt::format(" ({})", hint), e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number out of range
    throw InputError(where, fmt::format("not valid JSON: {}", e.what()));
  }
}

}  // namespace cs::calibrate
