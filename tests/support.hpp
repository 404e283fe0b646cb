// Helpers shared by the tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "catch.hpp"

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/topology/topology_loader.hpp"

namespace cs::test {

// The message of the InputError that fn throws; fails the test when it throws nothing.
inline std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError");
  return {};
}

inline yaml::Node parse(const std::string& text, const std::string& name = "test.yaml") {
  return yaml::Document::load_string(text, name)->root();
}

// A shipped hardware profile by name (scenarios/hardware/NAME.yaml).
inline hardware::HardwareProfile shipped(const std::string& name) {
  IncludeStack includes;
  return hardware::load_hardware_profile(resolve_part(name, "hardware"), includes);
}

// A topology from the text of a topology file (`topology: {...}`).
inline topology::Topology topology_from_text(const std::string& text) {
  yaml::Node root = parse(text);
  yaml::Map m(root);
  IncludeStack includes;
  topology::TopologySpec spec;
  topology::read_topology(m.at("topology", "a topology"), spec, includes);
  return topology::build_topology(spec);
}

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "clustersim-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace cs::test
