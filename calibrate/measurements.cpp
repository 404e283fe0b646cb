#include "clustersim/calibrate/measurements.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <regex>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/json_position.hpp"
#include "clustersim/common/plain_text.hpp"
#include "clustersim/hardware/attention_model.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "json_input.hpp"

namespace cs::calibrate {

namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "clustersim-measurements/1";
// cuBLAS takes GEMM dimensions as int; no cluster has more ranks than this.
constexpr std::int64_t kMaxDimension = (std::int64_t(1) << 31) - 1;
constexpr std::int64_t kMaxRanks = std::int64_t(1) << 24;

std::string_view json_type(const Json& j) { return j.type_name(); }

// Reads records from one JSON document, naming the file and the record's path in every error.
class Reader {
 public:
  // `text` is the document's, which places each error (the parsed JSON keeps no positions).
  Reader(const std::filesystem::path& file, std::string_view text) : where_{std::make_shared<const std::string>(file.string())}, text_(text) {}

  [[noreturn]] void fail(const std::string& field, const std::string& expected, const std::string& found) const {
    throw InputError(json_location(where_, text_, field), field, expected, found);
  }
  const Json& member(const Json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path + "." + key, "a value", "nothing (the field is missing)");
    return *it;
  }
  double positive(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = member(obj, path, key);
    if (!v.is_number()) fail(path + "." + key, "a positive number", std::string(json_type(v)));
    const double d = v.get<double>();
    if (!(d > 0) || !std::isfinite(d)) fail(path + "." + key, "a positive number", fmt::format("{}", d));
    return d;
  }
  // A positive integer no larger than `max`.
  std::int64_t positive_int(const Json& obj, const std::string& path, const char* key, std::int64_t max) const {
    const Json& v = member(obj, path, key);
    if (!v.is_number_integer() || v.get<std::int64_t>() <= 0) fail(path + "." + key, "a positive integer", v.dump());
    if (v.get<std::int64_t>() > max) fail(path + "." + key, fmt::format("at most {}", max), v.dump());
    return v.get<std::int64_t>();
  }
  std::string text(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = member(obj, path, key);
    if (!v.is_string()) fail(path + "." + key, "a string", std::string(json_type(v)));
    return v.get<std::string>();
  }
  void only(const Json& obj, const std::string& path, std::initializer_list<const char*> keys) const {
    if (!obj.is_object()) fail(path, "an object", std::string(json_type(obj)));
    for (const auto& [k, v] : obj.items()) {
      bool known = false;
      for (const char* key : keys) known = known || k == key;
      if (!known) {
        std::string list;
        for (const char* key : keys) list += (list.empty() ? "" : ", ") + std::string(key);
        fail(path + "." + k, "one of the fields " + list, "an unknown field");
      }
    }
  }
  // An attention record with its pass under `pass_key` ("pass" here, "name" in torch-probe's file).
  AttentionSample attention(const Json& g, const std::string& path, const char* pass_key) const {
    AttentionSample s;
    s.backend = text(g, path, "backend");
    if (s.backend.empty()) fail(path + ".backend", "a backend name", "an empty string");
    const std::string pass = text(g, path, pass_key);
    if (pass != "forward" && pass != "backward") fail(path + "." + pass_key, "forward or backward", "'" + pass + "'");
    s.backward = pass == "backward";
    s.batch = static_cast<int>(positive_int(g, path, "batch", kMaxRanks));
    s.heads = static_cast<int>(positive_int(g, path, "heads", kMaxRanks));
    s.seq = static_cast<int>(positive_int(g, path, "seq", kMaxDimension));
    s.head_dim = static_cast<int>(positive_int(g, path, "head_dim", 1024));
    s.seconds = positive(g, path, "seconds");
    if (g.contains("kv_heads")) {
      s.kv_heads = static_cast<int>(positive_int(g, path, "kv_heads", kMaxRanks));
      if (s.heads % s.kv_heads != 0) fail(path + ".kv_heads", fmt::format("a divisor of heads ({})", s.heads), std::to_string(s.kv_heads));
      if (s.kv_heads == s.heads) s.kv_heads = 0;
    }
    if (g.contains("sm_count")) s.sm_count = static_cast<int>(positive_int(g, path, "sm_count", kMaxRanks));
    return s;
  }
  const Json* array(const Json& doc, const char* key) const {
    auto it = doc.find(key);
    if (it == doc.end()) return nullptr;
    if (!it->is_array()) fail(key, "an array of records", std::string(json_type(*it)));
    return &*it;
  }

 private:
  SourceLocation where_;
  std::string_view text_;
};

template <class Enum, class Parse>
Enum parse_name(const Reader& r, const std::string& field, const std::string& value, const char* expected, Parse parse) {
  if (auto e = parse(value)) return *e;
  r.fail(field, expected, "'" + value + "'");
}

std::optional<MemoryKind> parse_memory_kind(std::string_view s) {
  for (MemoryKind k : {MemoryKind::d2d, MemoryKind::h2d, MemoryKind::d2h, MemoryKind::host}) {
    if (s == to_string(k)) return k;
  }
  return std::nullopt;
}
std::optional<LinkClass> parse_link_class(std::string_view s) {
  for (LinkClass c : {LinkClass::nvlink, LinkClass::pcie, LinkClass::network, LinkClass::process}) {
    if (s == to_string(c)) return c;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(MemoryKind k) {
  switch (k) {
    case MemoryKind::d2d: return "d2d";
    case MemoryKind::h2d: return "h2d";
    case MemoryKind::d2h: return "d2h";
    case MemoryKind::host: return "host";
  }
  return "?";
}

std::string_view to_string(LinkClass c) {
  switch (c) {
    case LinkClass::nvlink: return "nvlink";
    case LinkClass::pcie: return "pcie";
    case LinkClass::network: return "network";
    case LinkClass::process: return "process";
  }
  return "?";
}

double AttentionSample::flops() const {
  return hardware::attention_pass_flops(2.0 * batch * double(heads) * double(seq) * double(seq) * head_dim, backward);
}

double AttentionSample::row_flops() const { return hardware::attention_pass_flops(hardware::attention_row_flops(seq, head_dim, head_dim), backward); }

std::string gpu_model_of(const std::string& name) {
  static const std::regex token(R"((?:^|[^A-Za-z0-9])([A-Z]{1,2}[0-9]{2,3}[A-Z]?)(?=$|[^A-Za-z0-9]))");
  std::smatch hit;
  return std::regex_search(name, hit, token) ? hit[1].str() : std::string();
}

void Measurements::append(const Measurements& other) {
  // One fit is of one device: measurements that name two (another GPU's file given by mistake) would
  // be merged into a profile of neither. Device names are compared by the GPU model they name, when
  // both name one: probes word the same GPU differently ("NVIDIA H100 80GB HBM3" from CUDA, with its
  // SM count and power limit added by others).
  // A probe sweep names its GPU `device`, a torch-probe file `torch_probe_gpu`: each against each (a
  // sweep of an H200 and attention kernels of an H100 had been merged onto a base whose name holds no
  // GPU model).
  using Pair = std::pair<const char*, const char*>;
  for (const auto& [key_mine, key_theirs] : {Pair{"device", "device"}, Pair{"sm_count", "sm_count"}, Pair{"torch_probe_gpu", "torch_probe_gpu"},
                                             Pair{"torch_probe_sm_count", "torch_probe_sm_count"}, Pair{"device", "torch_probe_gpu"},
                                             Pair{"torch_probe_gpu", "device"}, Pair{"sm_count", "torch_probe_sm_count"},
                                             Pair{"torch_probe_sm_count", "sm_count"}}) {
    const auto mine = meta.find(key_mine);
    const auto theirs = other.meta.find(key_theirs);
    if (mine == meta.end() || theirs == other.meta.end()) continue;
    const std::string a = gpu_model_of(mine->second), b = gpu_model_of(theirs->second);
    const bool same = !a.empty() && !b.empty() ? a == b : mine->second == theirs->second;
    if (!same) {
      const std::string keys = std::string_view(key_mine) == key_theirs ? fmt::format("meta.{}", key_mine) : fmt::format("meta.{} and meta.{}", key_mine, key_theirs);
      throw InputError(fmt::format("calibrate: the measurements given are of two devices ({} '{}' and '{}'): fit each device's on its own", keys,
                                   mine->second, theirs->second));
    }
  }
  for (const auto& [k, v] : other.meta) meta.emplace(k, v);
  gemm.insert(gemm.end(), other.gemm.begin(), other.gemm.end());
  memory.insert(memory.end(), other.memory.begin(), other.memory.end());
  collectives.insert(collectives.end(), other.collectives.begin(), other.collectives.end());
  attention.insert(attention.end(), other.attention.begin(), other.attention.end());
}

std::string to_json(const Measurements& m) {
  Json doc;
  doc["format"] = kFormat;
  doc["meta"] = Json::object();
  for (const auto& [k, v] : m.meta) doc["meta"][k] = v;
  doc["gemm"] = Json::array();
  for (const auto& g : m.gemm) {
    doc["gemm"].push_back({{"dtype", std::string(hardware::to_string(g.dtype))}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"seconds", g.seconds}});
  }
  doc["memory"] = Json::array();
  for (const auto& s : m.memory) doc["memory"].push_back({{"kind", std::string(to_string(s.kind))}, {"bytes", s.bytes}, {"seconds", s.seconds}});
  doc["collectives"] = Json::array();
  for (const auto& c : m.collectives) {
    doc["collectives"].push_back({{"op", std::string(models::to_string(c.op))}, {"link", std::string(to_string(c.link))},
                                  {"ranks", c.ranks}, {"nodes", c.nodes}, {"bytes", c.bytes}, {"seconds", c.seconds}});
    if (!c.algorithm.empty()) doc["collectives"].back()["algorithm"] = c.algorithm;
  }
  if (!m.attention.empty()) {
    doc["attention"] = Json::array();
    for (const auto& a : m.attention) {
      doc["attention"].push_back({{"backend", a.backend}, {"pass", a.backward ? "backward" : "forward"}, {"batch", a.batch}, {"heads", a.heads},
                                  {"seq", a.seq}, {"head_dim", a.head_dim}, {"seconds", a.seconds}});
      if (a.kv_heads > 0) doc["attention"].back()["kv_heads"] = a.kv_heads;
      if (a.sm_count > 0) doc["attention"].back()["sm_count"] = a.sm_count;
    }
  }
  return doc.dump(1) + "\n";
}

Measurements from_json(const std::string& text, const std::filesystem::path& file) {
  const Reader r(file, text);
  const Json doc = parse_json(text, file);
  r.only(doc, "<document>", {"format", "meta", "gemm", "memory", "collectives", "attention"});
  if (r.text(doc, "<document>", "format") != kFormat) {
    r.fail("format", std::string("'") + kFormat + "'", "'" + doc["format"].get<std::string>() + "'");
  }
  Measurements m;
  if (auto it = doc.find("meta"); it != doc.end()) {
    if (!it->is_object()) r.fail("meta", "an object of strings", std::string(json_type(*it)));
    for (const auto& [k, v] : it->items()) {
      const bool plain = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; });
      if (!plain) r.fail("meta", "keys of letters, digits, '_', '-' and '.'", "'" + k + "'");
      if (!v.is_string()) r.fail("meta." + k, "a string", std::string(json_type(v)));
      if (const std::string why = plain_text_problem(v.get<std::string>()); !why.empty()) {
        r.fail("meta." + k, "text without control characters", fmt::format("{} ({})", v.dump(), why));
      }
      m.meta[k] = v.get<std::string>();
    }
  }
  if (const Json* a = r.array(doc, "gemm")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& g = (*a)[i];
      const std::string path = fmt::format("gemm[{}]", i);
      r.only(g, path, {"dtype", "m", "n", "k", "seconds"});
      GemmSample s;
      s.dtype = parse_name<hardware::Dtype>(r, path + ".dtype", r.text(g, path, "dtype"), "a dtype (fp32, tf32, fp16, bf16, fp8, fp4)",
                                            hardware::parse_dtype);
      s.m = r.positive_int(g, path, "m", kMaxDimension);
      s.n = r.positive_int(g, path, "n", kMaxDimension);
      s.k = r.positive_int(g, path, "k", kMaxDimension);
      s.seconds = r.positive(g, path, "seconds");
      s.origin = fmt::format("{} {}", file.filename().string(), path);
      m.gemm.push_back(s);
    }
  }
  if (const Json* a = r.array(doc, "memory")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& g = (*a)[i];
      const std::string path = fmt::format("memory[{}]", i);
      r.only(g, path, {"kind", "bytes", "seconds"});
      MemorySample s;
      s.kind = parse_name<MemoryKind>(r, path + ".kind", r.text(g, path, "kind"), "d2d, h2d, d2h or host", parse_memory_kind);
      s.bytes = r.positive(g, path, "bytes");
      s.seconds = r.positive(g, path, "seconds");
      m.memory.push_back(s);
    }
  }
  if (const Json* a = r.array(doc, "collectives")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& g = (*a)[i];
      const std::string path = fmt::format("collectives[{}]", i);
      r.only(g, path, {"op", "link", "ranks", "nodes", "bytes", "seconds", "algorithm"});
      CollectiveSample s;
      s.op = parse_name<models::CollectiveOp>(r, path + ".op", r.text(g, path, "op"),
                                              "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all or send_recv",
                                              models::parse_collective_op);
      s.link = parse_name<LinkClass>(r, path + ".link", r.text(g, path, "link"), "nvlink, pcie, network or process", parse_link_class);
      s.ranks = static_cast<int>(r.positive_int(g, path, "ranks", kMaxRanks));
      s.nodes = static_cast<int>(r.positive_int(g, path, "nodes", kMaxRanks));
      if (s.ranks < 2) r.fail(path + ".ranks", "at least 2", std::to_string(s.ranks));
      if (s.nodes > s.ranks) r.fail(path + ".nodes", fmt::format("at most ranks ({})", s.ranks), std::to_string(s.nodes));
      // As for nccl-tests output: the fit takes ranks / nodes GPUs on every node, and only the
      // network class reaches past one node.
      if (s.ranks % s.nodes != 0) {
        r.fail(path + ".nodes", fmt::format("a count that divides the {} ranks evenly (the same number of ranks on every node)", s.ranks), std::to_string(s.nodes));
      }
      if (s.nodes > 1 && s.link != LinkClass::network) {
        r.fail(path + ".nodes", fmt::format("1 for link {} (GPUs of one node; across nodes the link is network)", to_string(s.link)), std::to_string(s.nodes));
      }
      s.bytes = r.positive(g, path, "bytes");
      s.seconds = r.positive(g, path, "seconds");
      if (g.contains("algorithm")) {
        s.algorithm = std::string(models::to_string(parse_name<models::Algorithm>(
            r, path + ".algorithm", r.text(g, path, "algorithm"), "ring, tree, hierarchical, nvls, collnet, pairwise or direct", models::parse_algorithm)));
      }
      m.collectives.push_back(s);
    }
  }
  if (const Json* a = r.array(doc, "attention")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const std::string path = fmt::format("attention[{}]", i);
      r.only((*a)[i], path, {"backend", "pass", "batch", "heads", "kv_heads", "seq", "head_dim", "seconds", "sm_count"});
      m.attention.push_back(r.attention(a->at(i), path, "pass"));
    }
  }
  return m;
}

Measurements load_measurements(const std::filesystem::path& file) { return from_json(read_text(file, "measurements file"), file); }

std::vector<reports::OutputFile> csv_files(const Measurements& m) {
  std::string gemm = "dtype,m,n,k,seconds,tflops\n";
  for (const auto& g : m.gemm) {
    gemm += fmt::format("{},{},{},{},{:.9g},{:.6g}\n", hardware::to_string(g.dtype), g.m, g.n, g.k, g.seconds, g.flops() / g.seconds / 1e12);
  }
  std::string memory = "kind,bytes,seconds,GBps\n";
  for (const auto& s : m.memory) memory += fmt::format("{},{:.0f},{:.9g},{:.6g}\n", to_string(s.kind), s.bytes, s.seconds, s.bytes / s.seconds / 1e9);
  std::string coll = "op,link,ranks,nodes,bytes,seconds,algbw_GBps,busbw_GBps\n";
  for (const auto& c : m.collectives) {
    coll += fmt::format("{},{},{},{},{:.0f},{:.9g},{:.6g},{:.6g}\n", models::to_string(c.op), to_string(c.link), c.ranks, c.nodes, c.bytes,
                        c.seconds, c.algbw() / 1e9, c.busbw() / 1e9);
  }
  std::vector<reports::OutputFile> files{{"gemm.csv", std::move(gemm)}, {"memory.csv", std::move(memory)}, {"collectives.csv", std::move(coll)}};
  if (!m.attention.empty()) {
    std::string att = std::string(kAttentionCsvHeader) + "\n";
    for (const auto& a : m.attention) {
      att += fmt::format("{},{},{},{},{},{},{},{:.9g},{:.6g}\n", a.backend, a.backward ? "backward" : "forward", a.batch, a.heads,
                         a.kv_heads > 0 ? a.kv_heads : a.heads, a.seq, a.head_dim, a.seconds, a.flops() / a.seconds / 1e12);
    }
    files.push_back({"attention.csv", std::move(att)});
  }
  return files;
}

std::vector<std::string> write_csv(const Measurements& m, const std::filesystem::path& dir) {
  const std::vector<reports::OutputFile> files = csv_files(m);
  reports::write_files_atomically(dir, files);
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.name);
  return names;
}

Measurements read_torch_probe(const std::filesystem::path& file) {
  const std::string text = read_text(file, "torch-probe file");
  const Reader r(file, text);
  const Json doc = parse_json(text, file);
  if (!doc.is_object()) r.fail("<document>", "an object", std::string(json_type(doc)));
  constexpr const char* kTorchProbe = "clustersim-torch-probe/1";
  if (r.text(doc, "<document>", "format") != kTorchProbe) r.fail("format", std::string("'") + kTorchProbe + "'", "'" + doc["format"].get<std::string>() + "'");
  Measurements m;
  m.meta["source"] = "scripts/torch-probe.py";
  // What scripts/torch-probe.py writes, and nothing else (an unknown field, or a number where the GPU's
  // name belongs, had been passed over: the GPU-model check then had nothing to compare).
  r.only(doc, "<document>", {"format", "gpu", "sm_count", "memory_bytes", "torch", "cuda", "cudnn", "started", "finished", "errors", "samples"});
  for (const char* key : {"gpu", "torch", "cuda", "started", "finished"}) {
    const auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) continue;  // PyTorch without CUDA's version (a ROCm build) writes null
    if (!it->is_string()) r.fail(key, "a string", std::string(json_type(*it)));
    if (const std::string why = plain_text_problem(it->get<std::string>()); !why.empty()) {
      r.fail(key, "text without control characters", fmt::format("{} ({})", it->dump(), why));
    }
    if (std::string_view(key) != "finished") m.meta[std::string("torch_probe_") + key] = it->get<std::string>();
  }
  for (const char* key : {"cudnn", "memory_bytes"}) {
    if (auto it = doc.find(key); it != doc.end() && !it->is_null() && !(it->is_number_integer() && it->get<long long>() >= 0)) {
      r.fail(key, "a whole number (or null)", it->dump());
    }
  }
  if (auto it = doc.find("errors"); it != doc.end() && !it->is_object()) r.fail("errors", "an object", std::string(json_type(*it)));
  if (auto it = doc.find("cudnn"); it != doc.end() && it->is_number_integer()) m.meta["torch_probe_cudnn"] = std::to_string(it->get<long long>());
  int sm_count = 0;
  if (auto it = doc.find("sm_count"); it != doc.end()) {
    if (!it->is_number_integer() || it->get<long long>() <= 0 || it->get<long long>() > kMaxRanks) r.fail("sm_count", "a positive integer", it->dump());
    sm_count = static_cast<int>(it->get<long long>());
    m.meta["torch_probe_sm_count"] = std::to_string(sm_count);
  }
  // What the probe could not measure (a backend refused a shape): kept in the provenance.
  if (auto it = doc.find("errors"); it != doc.end() && it->is_object() && !it->empty()) {
    std::string failed;
    for (const auto& [k, v] : it->items()) failed += (failed.empty() ? "" : ", ") + k;
    if (const std::string why = plain_text_problem(failed); !why.empty()) r.fail("errors", "keys without control characters", fmt::format("'{}' ({})", failed, why));
    m.meta["torch_probe_errors"] = failed;
  }
  const Json& samples = r.member(doc, "<document>", "samples");
  if (!samples.is_array()) r.fail("samples", "an array of samples", std::string(json_type(samples)));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::string path = fmt::format("samples[{}]", i);
    const Json& s = samples[i];
    if (!s.is_object()) r.fail(path, "an object", std::string(json_type(s)));
    if (r.text(s, path, "section") != "attention") continue;
    // The fields scripts/torch-probe.py writes for an attention kernel: another is a typo or a foreign
    // file (a probe's "bogus" field had been taken in silence).
    r.only(s, path, {"section", "name", "backend", "batch", "heads", "kv_heads", "seq", "head_dim", "seconds", "flops", "sm_count"});
    m.attention.push_back(r.attention(s, path, "name"));
    m.attention.back().sm_count = sm_count;
  }
  if (m.attention.empty()) r.fail("samples", "attention samples (the attention section)", "none");
  return m;
}

}  // namespace cs::calibrate

namespace cs::calibrate {

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace cs::calibrate
