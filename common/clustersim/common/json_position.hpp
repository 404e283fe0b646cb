// Where a field of a JSON input stands: nlohmann::json keeps no positions, so an error that names a
// field ("gemm[3].seconds") finds its line and column by scanning the file's text again along that
// path. Used on the error path only: the text is read again when an error is thrown.
#pragma once

#include <filesystem>
#include <string_view>

#include "clustersim/common/input_error.hpp"

namespace cs {

// The 1-based line and column of the value at `path` in the JSON `text` (keys joined by '.', list
// indices as "[i]": "plans[3].status"; a leading "<document>" names the whole document); where the
// path's tail is not there (a missing field), of the deepest object or list on the path that is
// (the document's own for a missing key at its top); {0, 0} for a text of nothing but spaces. Of a key written
// more than once, the `occurrence`-th (1-based; the last there is where it has fewer). Keys are
// compared as the parser decodes them; a key holding '.' or '[' cannot be named by a path (its
// object's position is given).
struct TextPosition {
  int line = 0;
  int column = 0;
};
TextPosition json_position(std::string_view text, std::string_view path, int occurrence = 1);

// `where` (a file) with the line and column of `path` in `text`, that file's text.
SourceLocation json_location(const SourceLocation& where, std::string_view text, std::string_view path, int occurrence = 1);

// `file` with the line and column of `path` in it, read from the file again (for readers that
// stream the file and keep no text); the file alone where it cannot be read or is larger than
// 256 MiB (an error's position is not worth reading more).
SourceLocation json_location(const std::filesystem::path& file, std::string_view path, int occurrence = 1);

}  // namespace cs
