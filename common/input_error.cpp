#include "clustersim/common/input_error.hpp"

#include <fmt/format.h>

namespace cs {

std::string SourceLocation::to_string() const {
  const std::string name = file ? *file : std::string("<input>");
  if (line <= 0) return name;
  if (column <= 0) return fmt::format("{}:{}", name, line);
  return fmt::format("{}:{}:{}", name, line, column);
}

InputError::InputError(const SourceLocation& where, const std::string& field, const std::string& expected,
                       const std::string& found)
    : std::runtime_error(fmt::format("{}: field '{}': expected {}, found {}", where.to_string(), field, expected, found)),
      where_(where) {}

InputError::InputError(const SourceLocation& where, const std::string& message)
    : std::runtime_error(fmt::format("{}: {}", where.to_string(), message)), where_(where) {}

InputError::InputError(const std::string& message) : std::runtime_error(message) {}

}  // namespace cs
