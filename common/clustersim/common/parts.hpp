// Parts of a scenario (hardware profiles, node templates, topologies...) are referenced either by a
// path relative to the file that names them, or by the name of a part shipped in scenarios/<kind>/.
// IncludeStack follows the chain of files being loaded and reports a cycle with the whole chain.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "clustersim/common/yaml_reader.hpp"

namespace cs {

// The shipped scenario library: $CLUSTERSIM_SCENARIOS, else share/clustersim/scenarios beside the
// installed binary, else the source tree the binary was built from.
std::filesystem::path scenario_library_dir();

// Names of the shipped parts of one kind ("hardware", "nodes", "topologies"), sorted.
std::vector<std::string> shipped_part_names(std::string_view kind);

// Whether a reference names a file (has a '/' or a .yaml/.yml extension) rather than a shipped part.
bool is_path_reference(std::string_view reference);

// The file a reference names. A path is taken relative to the directory of the file holding
// the reference; a name is looked up among the shipped parts of that kind. Fails with the list of
// shipped names (and a suggestion) when nothing matches.
std::filesystem::path resolve_part(const yaml::Node& reference, std::string_view kind);
// The same for a reference given on the command line (relative to the working directory).
std::filesystem::path resolve_part(std::string_view reference, std::string_view kind);

// The value under the one root key of a part file (`hardware:`, `node:`, `topology:`). A file of
// another kind of part is named as such ("found a hardware file").
yaml::Node part_body(const yaml::Node& root, std::string_view key);

class IncludeStack {
 public:
  class Guard {
   public:
    Guard(IncludeStack& stack, std::filesystem::path file);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    IncludeStack& stack_;
  };
  static constexpr std::size_t kMaxDepth = 32;

  // Enters a file; `from` is where it was referenced. Throws on a cycle or excessive depth.
  [[nodiscard]] Guard enter(const std::filesystem::path& file, const SourceLocation& from);

 private:
  std::vector<std::filesystem::path> files_;
};

}  // namespace cs
