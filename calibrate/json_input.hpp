// Internals shared by the calibrate readers of JSON files (measurements, torch-probe, nccl-tests -J).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cs::calibrate {

// The whole of `file`; `what` names the kind of file in the error when it cannot be opened.
std::string read_text(const std::filesystem::path& file, std::string_view what);

// `text` parsed, or an InputError naming `file`: where the JSON breaks (with `hint`, when given,
// after the byte), or a number beyond double's range.
nlohmann::json parse_json(const std::string& text, const std::filesystem::path& file, std::string_view hint = {});

}  // namespace cs::calibrate
