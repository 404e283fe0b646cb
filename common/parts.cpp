#include "clustersim/common/parts.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "clustersim/common/input_file.hpp"
#include "clustersim/common/suggest.hpp"

#ifndef CLUSTERSIM_SOURCE_SCENARIO_DIR
#error "CLUSTERSIM_SOURCE_SCENARIO_DIR must be defined by the build"
#endif

namespace cs {

namespace fs = std::filesystem;

fs::path scenario_library_dir() {
  if (const char* env = std::getenv("CLUSTERSIM_SCENARIOS"); env && *env) return fs::path(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "clustersim" / "scenarios";
    if (fs::is_directory(installed, ec)) return installed;
  }
  return fs::path(CLUSTERSIM_SOURCE_SCENARIO_DIR);
}

std::vector<std::string> shipped_part_names(std::string_view kind) {
  std::vector<std::string> names;
  const fs::path dir = scenario_library_dir() / kind;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".yaml") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_path_reference(std::string_view reference) {
  if (reference.find('/') != std::string_view::npos) return true;
  return reference.ends_with(".yaml") || reference.ends_with(".yml");
}

namespace {

// Returns the resolved file, or an error message (expected, found) pair through the out-params.
bool resolve(std::string_view reference, std::string_view kind, const fs::path& base, fs::path& out,
             std::string& expected, std::string& found) {
  if (is_path_reference(reference)) {
    fs::path p(reference);
    if (p.is_relative()) p = base / p;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      out = fs::weakly_canonical(p, ec);
      return true;
    }
    expected = "a path to an existing YAML file";
    const std::string what = not_regular_file_kind(p);
    // The path as tried: a tidied one (sub/../a.yaml as a.yaml) can name a file that exists where
    // the one tried, through a missing directory, does not.
    found = fmt::format("'{}' ({}: {})", reference, what, p.string());
    return false;
  }
  const fs::path shipped = scenario_library_dir() / kind / (std::string(reference) + ".yaml");
  std::error_code ec;
  if (fs::is_regular_file(shipped, ec)) {
    out = fs::weakly_canonical(shipped, ec);
    return true;
  }
  const auto names = shipped_part_names(kind);
  // Where no part was found, the directory looked in, and why it is that one.
  const char* env = std::getenv("CLUSTERSIM_SCENARIOS");
  const std::string chosen = env && *env ? fmt::format(" (set by CLUSTERSIM_SCENARIOS={}{})", env, fs::is_directory(scenario_library_dir(), ec) ? "" : ", which is not a directory")
                                         : std::string();
  expected = fmt::format("a file path or the name of a shipped {} part ({})", kind,
                         names.empty() ? fmt::format("none found in {}{}", (scenario_library_dir() / kind).string(), chosen)
                                       : join_alternatives(names));
  found = fmt::format("'{}'{}", reference, did_you_mean(reference, names));
  // A bare name is a shipped part's; one that names something here (a directory, a file without
  // .yaml) was likely meant as a path: say so, and how to give it as one.
  const fs::path local = base / fs::path(reference);
  if (!reference.empty() && fs::exists(local, ec)) {
    found += fs::is_regular_file(local, ec)
                 ? fmt::format(" (a file {} is here: a file is given by a path, with a '/' or ending in .yaml: ./{})", local.string(), reference)
                 : fmt::format(" ({} is here, {}, not a part file)", local.string(), not_regular_file_kind(local));
  }
  return false;
}

}  // namespace

fs::path resolve_part(const yaml::Node& reference, std::string_view kind) {
  const std::string text = reference.scalar(fmt::format("a file path or the name of a shipped {} part", kind));
  fs::path out;
  std::string expected, found;
  if (!resolve(text, kind, reference.directory(), out, expected, found)) reference.fail(expected, found);
  return out;
}

fs::path resolve_part(std::string_view reference, std::string_view kind) {
  fs::path out;
  std::string expected, found;
  if (!resolve(reference, kind, fs::current_path(), out, expected, found)) {
    throw InputError(fmt::format("expected {}, found {}", expected, found));
  }
  return out;
}

yaml::Node part_body(const yaml::Node& root, std::string_view key) {
  const std::string expected = fmt::format("a {} file (root key '{}')", key, key);
  if (!root.is_map()) root.fail(expected);
  yaml::Map m(root);
  if (!m.has(key)) {
    const auto keys = m.keys();
    if (keys.size() == 1) root.fail(expected, fmt::format("a {} file (root key '{}')", keys.front(), keys.front()));
  }
  yaml::Node body = m.at(key, expected);
  m.finish();
  return body;
}

IncludeStack::Guard::Guard(IncludeStack& stack, fs::path file) : stack_(stack) {
  stack_.files_.push_back(std::move(file));
}

IncludeStack::Guard::~Guard() { stack_.files_.pop_back(); }

IncludeStack::Guard IncludeStack::enter(const fs::path& file, const SourceLocation& from) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  const fs::path& key = ec ? file : canonical;
  if (std::find(files_.begin(), files_.end(), key) != files_.end()) {
    std::string chain;
    for (const auto& f : files_) chain += f.string() + " -> ";
    chain += key.string();
    throw InputError(from, "include cycle: " + chain);
  }
  if (files_.size() >= kMaxDepth) {
    throw InputError(from, fmt::format("parts are nested more than {} deep", kMaxDepth));
  }
  return Guard(*this, key);
}

}  // namespace cs
