#include "json_input.hpp"

#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"

namespace cs::calibrate {

std::string read_text(const std::filesystem::path& file, std::string_view what) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the {}", file.string(), what));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json parse_json(const std::string& text, const std::filesystem::path& file, std::string_view hint) {
  const SourceLocation where{std::make_shared<const std::string>(file.string())};
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(where, fmt::format("not valid JSON at byte {}{}: {}", e.byte, hint.empty() ? "" : fmt::format(" ({})", hint), e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number out of range
    throw InputError(where, fmt::format("not valid JSON: {}", e.what()));
  }
}

}  // namespace cs::calibrate
