// Every output file is written atomically: the text goes to a temporary file beside the target,
// is flushed to disk, then renamed over the target, so a reader never sees a partial file and an
// interrupted run leaves the previous file (or none) behind.
#pragma once

#include <filesystem>
#include <string_view>

namespace cs::reports {

// Throws std::runtime_error naming the path and the system's reason on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace cs::reports
