// The one error type for bad user input. Its text always starts with where the problem is
// ("file:line:col: ") and, for a field, reads "field 'a.b': expected ..., found ...".
// Commands print it and exit non-zero; library code never exits.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

namespace cs {

// A place in an input file; line and column are 1-based (0 when unknown).
struct SourceLocation {
  std::shared_ptr<const std::string> file;
  int line = 0;
  int column = 0;

  [[nodiscard]] std::string to_string() const;  // "path:3:7" or "path" or "<input>"
};

class InputError : public std::runtime_error {
 public:
  // "file:line:col: field 'path': expected X, found Y"
  InputError(const SourceLocation& where, const std::string& field, const std::string& expected,
             const std::string& found);
  // "file:line:col: message"
  InputError(const SourceLocation& where, const std::string& message);
  // A message with no location (for example a command-line argument).
  explicit InputError(const std::string& message);

  [[nodiscard]] const SourceLocation& where() const { return where_; }

 private:
  SourceLocation where_;
};

}  // namespace cs
