// Atomic output files: the whole text arrives (also past the writer's buffer), and a writer that
// never commits leaves the target as it was and no temporary file behind.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "catch.hpp"

#include "clustersim/reports/atomic_file.hpp"

namespace fs = std::filesystem;
using cs::reports::AtomicFileWriter;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::size_t entries(const fs::path& d) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a streamed atomic file holds every byte written, in small pieces and in pieces larger than its buffer") {
  const fs::path d = fresh_dir("clustersim-atomic-stream");
  std::string expected;
  AtomicFileWriter w(d / "out.txt");
  for (int i = 0; i < 200000; ++i) {
    const std::string line = "line " + std::to_string(i) + "\n";
    w.write(line);
    expected += line;
  }
  const std::string big(3 << 20, 'x');  // three times the buffer
  w.write(big);
  expected += big;
  w.write("end\n");
  expected += "end\n";
  CHECK_FALSE(fs::exists(d / "out.txt"));  // nothing at the target before commit
  w.commit();
  CHECK(slurp(d / "out.txt") == expected);
  CHECK(entries(d) == 1);  // no temporary file left
  fs::remove_all(d);
}

TEST_CASE("an atomic writer that never commits leaves the old file untouched and no temporary behind") {
  const fs::path d = fresh_dir("clustersim-atomic-abort");
  cs::reports::write_file_atomically(d / "out.txt", "old\n");
  {
    AtomicFileWriter w(d / "out.txt");
    w.write(std::string(2 << 20, 'y'));
    CHECK(entries(d) == 2);  // the target and the temporary
  }
  CHECK(slurp(d / "out.txt") == "old\n");
  CHECK(entries(d) == 1);
  CHECK_THROWS_WITH(AtomicFileWriter(d / "missing" / "out.txt"), Catch::Contains("directory") && Catch::Contains("does not exist"));
  fs::remove_all(d);
}

TEST_CASE("an output's set of files is written whole or not at all") {
  const fs::path d = fresh_dir("clustersim-atomic-set");
  // Expectation: all three land with their contents; with a directory where the last one goes,
  // none is written (the first two do not appear beside the obstacle) and no temporary is left.
  cs::reports::write_files_atomically(d, {{"a.json", "{}\n"}, {"b.csv", "x\n"}, {"c.json", "[]\n"}});
  CHECK(slurp(d / "a.json") == "{}\n");
  CHECK(slurp(d / "b.csv") == "x\n");
  CHECK(slurp(d / "c.json") == "[]\n");
  const fs::path e = fresh_dir("clustersim-atomic-set-blocked");
  fs::create_directory(e / "c.json");
  CHECK_THROWS_WITH(cs::reports::write_files_atomically(e, {{"a.json", "{}\n"}, {"b.csv", "x\n"}, {"c.json", "[]\n"}}),
                    Catch::Contains("a directory of that name is in the way"));
  CHECK(entries(e) == 1);
  fs::remove_all(d);
  fs::remove_all(e);
}
