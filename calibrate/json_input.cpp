#include "json_input.hpp"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/common/json_keys.hpp"

namespace cs::calibrate {

std::string read_text(const std::filesystem::path& file, std::string_view what) {
  std::ifstream in = open_input_file(file, fmt::format("the {}", what), std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json parse_json(const std::string& text, const std::filesystem::path& file, std::string_view hint) {
  const SourceLocation where{std::make_shared<const std::string>(file.string())};
  // A key written twice is refused, not read as its last value (JsonKeyTracker).
  JsonKeyTracker keys(where, text);
  const nlohmann::json::parser_callback_t no_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    keys.on(event, parsed);
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
