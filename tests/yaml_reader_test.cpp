#include "clustersim/common/yaml_reader.hpp"

#include <fmt/format.h>

#include "catch.hpp"

#include "clustersim/common/json_position.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/common/suggest.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "support.hpp"

using namespace cs;
using Catch::Contains;

TEST_CASE("malformed YAML names the file, line and column", "[yaml]") {
  const std::string msg = test::input_error([] { test::parse("a: [1, 2\nb: 3\n", "broken.yaml"); });
  CHECK_THAT(msg, Catch::StartsWith("broken.yaml:") && Contains("malformed YAML"));
}

TEST_CASE("a plain key past 1,024 characters is said to be one, and a long value holding a colon is not", "[yaml]") {
  const std::string long_key = test::input_error([] { test::parse("a: 1\n" + std::string(1100, 'k') + ": 2\n", "k.yaml"); });
  CHECK_THAT(long_key, Contains("k.yaml:2:") && Contains("illegal map value (a key may be at most 1,024 characters long"));
  // A review's find: the hint had fired on any such error past column 1,024.
  const std::string long_value = test::input_error([] { test::parse("description: " + std::string(1100, 'a') + " note: this\n", "v.yaml"); });
  CHECK_THAT(long_value, Contains("v.yaml:1:") && Contains("illegal map value") && !Contains("1,024"));
}

TEST_CASE("binary garbage is rejected as malformed", "[yaml]") {
  const std::string garbage("\x7f" "ELF\x02\x01\x01\0\0\0", 10);
  CHECK_THAT(test::input_error([&] { test::parse(garbage, "garbage.bin"); }), Contains("NUL bytes"));
}

TEST_CASE("an unknown key is an error with a did-you-mean suggestion", "[yaml]") {
  yaml::Node root = test::parse("tier:\n  radix: 64\n  oversubscriptoin: 2\n");
  yaml::Map top(root);
  yaml::Map tier(top.at("tier", "a map"));
  tier.get<int>("radix");
  tier.get_or<double>("oversubscription", 1.0);
  const std::string msg = test::input_error([&] { tier.finish(); });
  CHECK(msg == "test.yaml:3:3: field 'tier.oversubscriptoin': expected one of the known keys radix or oversubscription, "
               "found unknown key 'oversubscriptoin' (did you mean 'oversubscription'?)");
}

TEST_CASE("a wrong type names the field, the expected and the found", "[yaml]") {
  yaml::Node root = test::parse("hardware:\n  sm_count: many\n");
  yaml::Map top(root);
  yaml::Map hw(top.at("hardware", "a map"));
  CHECK(test::input_error([&] { hw.get<int>("sm_count"); }) ==
        "test.yaml:2:13: field 'hardware.sm_count': expected an integer, found 'many'");
  yaml::Node list = test::parse("x: [1, 2]\n");
  CHECK(test::input_error([&] { yaml::Map(list).get<int>("x"); }) ==
        "test.yaml:1:4: field 'x': expected an integer, found a list of 2 items");
}

TEST_CASE("columns count characters, not bytes, where a line holds other scripts", "[yaml]") {
  // "日本語" is 3 characters in 9 bytes of UTF-8: the value after it is at column 26, not 32 (a
  // probe's find: yaml-cpp counts bytes). Keys, list items and malformed YAML alike.
  yaml::Node root = test::parse("m: {name: \"日本語\", layers: many}\n");
  yaml::Map m(yaml::Map(root).at("m", "a map"));
  CHECK(test::input_error([&] { m.get<int>("layers"); }) == "test.yaml:1:26: field 'm.layers': expected an integer, found 'many'");
  yaml::Node list = test::parse("x: [\"é\", \"é\", many]\n");
  CHECK_THAT(test::input_error([&] { (void)yaml::Map(list).at("x", "a list").items()[2].as<int>(); }), Catch::StartsWith("test.yaml:1:15:"));
  CHECK_THAT(test::input_error([] { test::parse("a: \"日本語\" [\n", "broken.yaml"); }), Catch::StartsWith("broken.yaml:1:10:"));
  // yaml-cpp's positions start after a byte-order mark: the columns of a file with one are those
  // of the same file without it (a review's find: 3 short).
  yaml::Node bom = test::parse("\xEF\xBB\xBFm: {name: \"é\", layers: many}\n");
  yaml::Map bm(yaml::Map(bom).at("m", "a map"));
  CHECK(test::input_error([&] { bm.get<int>("layers"); }) == "test.yaml:1:24: field 'm.layers': expected an integer, found 'many'");
}

TEST_CASE("a quoted number or boolean is text, refused where a number or boolean is expected", "[yaml]") {
  yaml::Map m(test::parse("tp: \"8\"\nrate: '0.5'\nsp: \"true\"\nbig: \"99999999999\"\nname: \"8\"\n"));
  CHECK(test::input_error([&] { m.get<int>("tp"); }) ==
        "test.yaml:1:5: field 'tp': expected an integer, found '8' in quotes (a quoted value is text: write it without the quotes)");
  CHECK_THAT(test::input_error([&] { m.get<double>("rate"); }), Contains("found '0.5' in quotes"));
  CHECK_THAT(test::input_error([&] { m.get<bool>("sp"); }), Contains("expected true or false, found 'true' in quotes"));
  // Out of range and quoted: the quotes are named, not the range.
  CHECK_THAT(test::input_error([&] { m.get<int>("big", yaml::positive<int>()); }), Contains("'99999999999' in quotes"));
  CHECK(m.get<std::string>("name") == "8");  // text fields take quoted digits as they are
  yaml::Map plain(test::parse("tp: 8\nsp: FALSE\n"));
  CHECK(plain.get<int>("tp") == 8);
  CHECK_FALSE(plain.get<bool>("sp"));
}

TEST_CASE("a missing required key points at the map that lacks it", "[yaml]") {
  yaml::Node root = test::parse("memory:\n  bandwidth: 3TB/s\n");
  yaml::Map top(root);
  yaml::Map mem(top.at("memory", "a map"));
  CHECK(test::input_error([&] { mem.get<Bytes>("capacity"); }) ==
        "test.yaml:2:3: field 'memory.capacity': expected a size with a unit (B, KB, MB, GB, TB, PB, KiB, MiB, GiB, "
        "TiB, PiB), found nothing (the key is missing)");
}

TEST_CASE("validators reject values out of range", "[yaml]") {
  CHECK(test::input_error([] { yaml::Map(test::parse("n: -3")).get<int>("n", yaml::positive<int>()); }) ==
        "test.yaml:1:4: field 'n': expected a positive value, found '-3'");
  CHECK(test::input_error([] { yaml::Map(test::parse("bw: 0GB/s")).get<BytesPerSec>("bw", yaml::positive<BytesPerSec>()); }) ==
        "test.yaml:1:5: field 'bw': expected a positive value, found '0GB/s'");
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("x: .nan")).get<double>("x"); }), Contains("expected a"));
  // An integer out of its field's type names that type's range, whether it is past int64 or not.
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("x: 99999999999999999999")).get<int>("x"); }),
             Contains("expected an integer from -2147483648 to 2147483647, found '99999999999999999999'"));
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("x: 9223372036854775807")).get<int>("x"); }),
             Contains("expected an integer from -2147483648 to 2147483647, found '9223372036854775807'"));
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("x: -9223372036854775809")).get<std::int64_t>("x"); }),
             Contains("expected an integer from -9223372036854775808 to 9223372036854775807"));
  // Seeds: the whole range the command line's --seed takes, and no negative one.
  CHECK(yaml::Map(test::parse("seed: 18446744073709551615")).get<std::uint64_t>("seed") == std::numeric_limits<std::uint64_t>::max());
  for (const char* text : {"seed: -1", "seed: 18446744073709551616"}) {
    CHECK_THAT(test::input_error([&] { yaml::Map(test::parse(text)).get<std::uint64_t>("seed"); }),
               Contains("expected an integer from 0 to 18446744073709551615"));
  }
}

TEST_CASE("a choice suggests the nearest option", "[yaml]") {
  CHECK(test::input_error([] { yaml::Map(test::parse("kind: fat_tree")).choice("kind", {"fat-tree", "rail-optimized"}); }) ==
        "test.yaml:1:7: field 'kind': expected one of fat-tree or rail-optimized, found 'fat_tree' (did you mean 'fat-tree'?)");
}

TEST_CASE("duplicate keys are an error", "[yaml]") {
  CHECK_THAT(test::input_error([] { yaml::Map m(test::parse("a: 1\nb: 2\na: 3\n")); }),
             Contains("field 'a': duplicate key (first given at line 1)"));
}

TEST_CASE("aliases that expand exponentially hit the visit limit", "[yaml]") {
  // Nine levels of nine aliases each: 9^9 = 387 million leaves if expanded.
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    text += fmt::format("a{}: &a{} [", i, i);
    for (int j = 0; j < 9; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  yaml::Node root = test::parse(text);
  std::function<void(const yaml::Node&)> walk = [&](const yaml::Node& n) {
    if (n.is_list()) {
      for (const auto& item : n.items()) walk(item);
    } else if (n.is_map()) {
      yaml::Map m(n);
      for (const auto& k : m.keys()) walk(*m.find(k));
    }
  };
  CHECK_THAT(test::input_error([&] { walk(root); }), Contains("expands to more than"));
}

TEST_CASE("a map of many keys reads in linear time, and a huge unknown key is named briefly", "[yaml]") {
  // 200,000 keys: each compared with every earlier one had taken minutes.
  std::string text;
  for (int i = 0; i < 200000; ++i) text += fmt::format("k{:07}: 1\n", i);
  yaml::Map m(test::parse(text));
  CHECK(m.keys().size() == 200000);
  CHECK(m.get<int>("k0199999") == 1);
  // A key of a megabyte: the message shows its start, and no distance table is built for it.
  const std::string huge(1 << 20, 'k');
  yaml::Map one(test::parse("? " + huge + "\n: 1\n"));  // an explicit key: a plain one stops at 1,024 characters
  one.find("known");
  const std::string msg = test::input_error([&] { one.finish(); });
  CHECK(msg.size() < 400);
  CHECK_THAT(msg, Contains("unknown key 'kkkk") && Contains("...'"));
}

TEST_CASE("control characters, bare carriage returns and documents after an empty one are refused", "[yaml]") {
  // An escaped NUL had cut a path short ("./model.yaml\0../other" loaded ./model.yaml), and an
  // escape sequence reached the terminal and the reports raw.
  yaml::Map nul(test::parse("model: \"./model.yaml\\u0000../other\"\n"));
  CHECK(test::input_error([&] { nul.get<std::string>("model"); }) ==
        "test.yaml:1:8: field 'model': expected a string, found './model.yaml\\x00../other' (it holds the control character \\x00)");
  yaml::Map esc(test::parse("\"a\\eb\": 1\n"));
  CHECK_THAT(test::input_error([&] { esc.finish(); }), Contains("field 'a\\x1bb'") && !Contains("\x1b"));
  // A carriage return alone is no line break to the parser: the line after a comment was ignored.
  CHECK_THAT(test::input_error([] { test::parse("a: 1  # note\r  b: 2\n", "cr.yaml"); }),
             Catch::StartsWith("cr.yaml:1:13:") && Contains("carriage return without a line feed"));
  CHECK_NOTHROW(test::parse("a: 1  # note\r\nb: 2\r\n", "crlf.yaml"));
  // A third document after an empty second one (even a malformed one) had been ignored.
  CHECK_THAT(test::input_error([] { test::parse("a: 1\n---\n---\nb: 2\n", "three.yaml"); }),
             Catch::StartsWith("three.yaml:4:1:") && Contains("a second YAML document"));
  CHECK_THAT(test::input_error([] { test::parse("a: 1\n---\n---\nb: [1\n", "torn.yaml"); }), Contains("malformed YAML"));
}

TEST_CASE("did-you-mean picks plausible typos only", "[yaml][suggest]") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(closest_match("radx", {"radix", "planes"}) == "radix");
  CHECK(closest_match("zzzzzz", {"radix", "planes"}).empty());
}

TEST_CASE("shipped parts are found by name, unknown names get the list and a suggestion", "[parts]") {
  CHECK(std::filesystem::exists(resolve_part("h100-sxm5-80gb", "hardware")));
  const std::string msg = test::input_error([] { resolve_part("h100-sxm5-80g", "hardware"); });
  CHECK_THAT(msg, Contains("expected a file path or the name of a shipped hardware part (") &&
                      Contains("found 'h100-sxm5-80g' (did you mean 'h100-sxm5-80gb'?)"));
}

TEST_CASE("a missing file is reported with the path it was resolved to", "[parts]") {
  test::TempDir dir;
  const auto file = dir.write("topo.yaml", "topology:\n  name: t\n  node: missing/node.yaml\n");
  IncludeStack includes;
  const std::string msg = test::input_error([&] { topology::load_topology_spec(file, includes); });
  CHECK_THAT(msg, Contains("topo.yaml:3:9: field 'topology.node': expected a path to an existing YAML file, found "
                           "'missing/node.yaml' (no such file: ") &&
                      Contains("missing/node.yaml)"));
}

TEST_CASE("a part that cannot be found names the path tried, and the library directory and why it is that one", "[parts]") {
  // A probe: sub/../a.yaml through a missing sub/ was reported as "no such file: .../a.yaml", a
  // file that exists; a CLUSTERSIM_SCENARIOS that is no directory was not named as the cause.
  test::TempDir dir;
  dir.write("a.yaml", "topology: {name: a, node: dgx-h100, nodes: 1}\n");
  const auto c = dir.write("c.yaml", "topology:\n  extends: ./sub/../a.yaml\n");
  CHECK_THAT(test::input_error([&] { (void)topology::load_topology(c.string()); }), Contains("/sub/../a.yaml)"));
  const std::string saved = std::getenv("CLUSTERSIM_SCENARIOS") ? std::getenv("CLUSTERSIM_SCENARIOS") : "";
  ::setenv("CLUSTERSIM_SCENARIOS", (dir.path() / "nowhere").c_str(), 1);
  const std::string msg = test::input_error([&] { (void)resolve_part(std::string_view("dgx-h100-superpod"), "topologies"); });
  if (saved.empty()) ::unsetenv("CLUSTERSIM_SCENARIOS"); else ::setenv("CLUSTERSIM_SCENARIOS", saved.c_str(), 1);
  CHECK_THAT(msg, Contains("nowhere/topologies (set by CLUSTERSIM_SCENARIOS=") && Contains("which is not a directory"));
}

TEST_CASE("include cycles are detected and reported with the chain", "[parts]") {
  test::TempDir dir;
  dir.write("a.yaml", "topology:\n  extends: b.yaml\n");
  dir.write("b.yaml", "topology:\n  extends: a.yaml\n");
  IncludeStack includes;
  const std::string msg = test::input_error([&] { topology::load_topology_spec(dir.path() / "a.yaml", includes); });
  CHECK_THAT(msg, Contains("b.yaml:2:12: include cycle: ") && Contains("a.yaml -> ") && Contains("b.yaml -> "));
}

TEST_CASE("a second YAML document is refused, but not an empty one after a closing '---'", "[yaml]") {
  CHECK_THAT(test::input_error([] { test::parse("a: 1\n---\nb: 2\n", "two.yaml"); }),
             Catch::StartsWith("two.yaml:3:1:") && Contains("a second YAML document"));
  yaml::Map closed(test::parse("---\na: 1\n---\n", "closed.yaml"));
  CHECK(closed.get<int>("a") == 1);
  // A line that opens with ',' after a comment made YAML::LoadAll loop for ever, adding documents
  // until memory ran out (found by fuzzing three of the readers); only two documents are read now.
  CHECK_NOTHROW(test::parse("# a comment\n,# another\nscenario: {name: x}\n", "comma.yaml"));
}

TEST_CASE("a JSON input's field is found at its line and column", "[json]") {
  const std::string text =
      "{\n"
      "  \"name\": \"a \\\"quoted\\\" ] } [ {\",\n"
      "  \"gemm\": [\n"
      "    {\"m\": 1, \"seconds\": 2},\n"
      "    {\"m\": [1, [2, {\"x\": 3}]], \"seconds\": 4, \"seconds\": 5}\n"
      "  ],\n"
      "  \"memory\": {\"fits\": true}\n"
      "}\n";
  const auto at = [&](std::string_view path, int occurrence = 1) {
    const TextPosition p = json_position(text, path, occurrence);
    return std::pair{p.line, p.column};
  };
  CHECK(at("name") == std::pair{2, 11});
  CHECK(at("gemm") == std::pair{3, 11});
  CHECK(at("gemm[0].seconds") == std::pair{4, 25});
  // Past a value holding nested lists and objects, and a string holding brackets and quotes.
  CHECK(at("gemm[1].m[1][1].x") == std::pair{5, 25});
  CHECK(at("memory.fits") == std::pair{7, 22});
  // A key written twice: the first, or the one asked for (the second is where a reader refuses it).
  CHECK(at("gemm[1].seconds") == std::pair{5, 42});
  CHECK(at("gemm[1].seconds", 2) == std::pair{5, 56});
  CHECK(at("gemm[1].seconds", 3) == std::pair{5, 56});
  // calibrate's name for the document itself.
  CHECK(at("<document>.memory") == std::pair{7, 13});
  CHECK(at("<document>") == std::pair{1, 1});
  // A missing field or element: the deepest object or list on the path that is there.
  CHECK(at("gemm[1].flops") == std::pair{5, 5});
  CHECK(at("gemm[7].seconds") == std::pair{3, 11});
  CHECK(at("nothing.at.all") == std::pair{1, 1});  // the document, whose key is missing
  // Keys compared as the parser decodes them (\u escapes, a surrogate pair); a byte order mark
  // skipped; columns in characters.
  CHECK(json_position("{\"g\\u0065mm\": 1}", "gemm").column == 15);
  CHECK(json_position("{\"\\ud83d\\ude00\": 1, \"b\": 2}", "\xF0\x9F\x98\x80").column == 18);
  CHECK(json_position("\xEF\xBB\xBF{\"a\": 1}", "a").column == 7);
  CHECK(json_position("{\"\xC3\xA9\": 1, \"b\": 2}", "b").column == 15);
  // Parents written twice: the first copy, where a reader met the second copy of a key inside it.
  CHECK(json_position("{\"g\": {\"x\": 1, \"x\": 2},\n\"g\": {\"x\": 3}}", "g.x", 2).line == 1);
  // Text that is not JSON where the path leads, and no text at all.
  CHECK(json_position("[1, 2", "[5]").line == 1);
  CHECK(json_position("", "a").line == 0);
  CHECK(json_position("   ", "a").line == 0);
}
