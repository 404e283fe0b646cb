#include "calibrate_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "clustersim/calibrate/calibration.hpp"
#include "clustersim/calibrate/cpu_probe.hpp"
#include "clustersim/calibrate/nccl_tests.hpp"
#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/models/training_scenario.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/text_table.hpp"
#include "output_dir.hpp"
#include "report_command.hpp"

namespace cs::app {

namespace {

namespace fs = std::filesystem;

// Every file calibrate may write into --out (attention.csv only with attention kernels, cuda-probe.json
// only under --device cuda).
constexpr const char* kOutputFiles[] = {"profile.yaml", "measurements.json", "gemm.csv", "memory.csv", "collectives.csv", "attention.csv", "cuda-probe.json"};

struct Options {
  std::string device;                      // cpu or cuda: run the probes here
  bool quick = false;
  std::vector<std::string> from;           // recorded measurement JSON files
  std::vector<std::string> nccl_tests;     // nccl-tests outputs
  std::vector<std::string> torch_probe;    // scripts/torch-probe.py outputs
  std::string op;                          // for nccl-tests files that do not say
  std::string link;
  std::string algorithm;                   // the NCCL_ALGO the nccl-tests runs forced
  int ranks = 0;                           // for nccl-tests output without its device list
  int nodes = 0;
  std::string base;                        // profile to start from
  std::string out;
  std::string profile;                     // an already fitted profile (for --compare without new data)
  std::string compare;
  std::string scenario;
  std::optional<std::string> attention_backend;  // the attention kernels to fit (unset: cudnn)
  std::optional<int> attention_head_dim;         // and their head dim (unset: 128)
  bool no_table = false;
};

hardware::HardwareProfile load_profile(const std::string& reference) {
  IncludeStack includes;
  return hardware::load_hardware_profile(resolve_part(reference, "hardware"), includes);
}

// Runs clustersim-probe-cuda (installed beside this binary) and reads what it measured.
calibrate::Measurements probe_cuda(bool quick, const fs::path& out_json) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path probe = self.parent_path() / "clustersim-probe-cuda";
  if (ec || !fs::exists(probe)) {
    throw InputError("--device cuda needs clustersim-probe-cuda beside clustersim; it is built only where the CUDA toolkit, cuBLAS and NCCL "
                     "are found (configure with -DCLUSTERSIM_CUDA=ON to require it)");
  }
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("calibrate: fork failed");
  if (child == 0) {
    const std::string out = out_json.string();
    if (quick) {
      ::execl(probe.c_str(), probe.c_str(), "--quick", "--out", out.c_str(), static_cast<char*>(nullptr));
    } else {
      ::execl(probe.c_str(), probe.c_str(), "--out", out.c_str(), static_cast<char*>(nullptr));
    }
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(fmt::format("calibrate: {} failed (exit status {}); its message is above", probe.string(),
                                         WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return calibrate::load_measurements(out_json);
}

std::optional<models::CollectiveOp> op_option(const std::string& s) {
  if (s.empty()) return std::nullopt;
  if (auto op = models::parse_collective_op(s)) return op;
  throw InputError(fmt::format("--op: expected all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all or send_recv, found '{}'", s));
}
std::optional<calibrate::LinkClass> link_option(const std::string& s) {
  if (s.empty()) return std::nullopt;
  for (auto c : {calibrate::LinkClass::nvlink, calibrate::LinkClass::pcie, calibrate::LinkClass::network, calibrate::LinkClass::process}) {
    if (s == calibrate::to_string(c)) return c;
  }
  throw InputError(fmt::format("--link: expected nvlink, pcie, network or process, found '{}'", s));
}

// Step time of a training scenario with its GPU profile replaced by each of `profiles`.
std::string scenario_effect(const std::string& file, const std::vector<std::pair<std::string, hardware::HardwareProfile>>& profiles) {
  const models::TrainingScenario sc = models::load_training_scenario(file);
  reports::TextTable t({"profile", "step time", "MFU", "compute", "exposed TP/CP/EP", "exposed DP"},
                       {reports::TextTable::Align::left, reports::TextTable::Align::right, reports::TextTable::Align::right,
                        reports::TextTable::Align::right, reports::TextTable::Align::right, reports::TextTable::Align::right});
  double first = 0;
  for (const auto& [label, hw] : profiles) {
    if (!hw.supports(sc.job.precision)) {
      const std::string precision(hardware::to_string(sc.job.precision));
      throw InputError(fmt::format("{}: precision {}: the {} profile {} has no {} peak to run the scenario with (a profile with {} tensor cores, or "
                                   "another scenario)",
                                   file, precision, label, hw.name, precision, precision));
    }
    topology::Topology topo = *sc.topology;
    topo.gpu = std::make_shared<const hardware::HardwareProfile>(hw);
    const models::TrainingResult r = models::simulate_training(sc.job, topo, {});
    if (first == 0) first = r.step_time.value();
    t.add_row({label, fmt::format("{} ({:+.1f}%)", to_string(r.step_time), 100 * (r.step_time.value() / first - 1)), fmt::format("{:.1f}%", 100 * r.mfu),
               to_string(Seconds(r.breakdown.compute)),
               to_string(Seconds(r.breakdown.tp_comm + r.breakdown.cp_comm + r.breakdown.ep_comm)), to_string(Seconds(r.breakdown.dp_comm))});
  }
  // The plan's GPUs, not the topology's (a scenario may use part of a larger cluster).
  const int used = sc.job.plan.gpus();
  const std::size_t present = sc.topology->gpus().size();
  const std::string of = std::size_t(used) < present ? fmt::format(" of the topology's {}", present) : "";
  return fmt::format("\neffect on {} ({} GPUs{}, {} in the scenario):\n", sc.name, used, of, sc.topology->gpu->name) + t.render("  ");
}

void run(const Options& o) {
  const bool has_data = !o.device.empty() || !o.from.empty() || !o.nccl_tests.empty() || !o.torch_probe.empty();
  if (!has_data && o.profile.empty()) {
    throw InputError(
        "calibrate: nothing to fit: give --device cpu|cuda, --from MEASUREMENTS.json, --from-nccl-tests FILE or --from-torch-probe FILE (or --profile "
        "with --compare)");
  }
  if (has_data && !o.profile.empty()) throw InputError("calibrate: --profile names an already fitted profile; it cannot be combined with new measurements");
  // Alone it would load a profile and print nothing (exit 0).
  if (!o.profile.empty() && o.compare.empty()) throw InputError("calibrate: --profile is compared with --compare PROFILE; give --compare too");
  if (!o.scenario.empty() && o.compare.empty()) throw InputError("calibrate: --scenario shows the effect of --compare; give --compare PROFILE too");
  if (o.quick && o.device.empty()) throw InputError("calibrate: --quick shortens the probes of --device cpu|cuda; without --device it would do nothing");
  // --attention-backend and --attention-head-dim pick among attention kernels: without any they are a mistake.
  const auto check_attention_options = [&](bool have_attention) {
    if ((o.attention_backend || o.attention_head_dim) && !have_attention) {
      throw InputError("calibrate: --attention-backend and --attention-head-dim choose the attention kernels to fit, and the measurements hold "
                       "none (give --from-torch-probe FILE)");
    }
  };
  if (o.attention_backend && o.attention_backend->empty()) {
    throw InputError("calibrate: --attention-backend: expected a backend name (cudnn, or flash for FlashAttention-2), found an empty string");
  }
  // Only measurement files carry attention kernels (the probes measure none): say so before probing.
  if (o.from.empty() && o.torch_probe.empty()) check_attention_options(false);
  // The nccl-tests reader's options do nothing without its files (they had been ignored, exit 0),
  // and a --compare profile is loaded before the probes run, not after them (a probe's mistyped
  // name failed only once the probe had run and its files were written).
  if (o.nccl_tests.empty() && (!o.op.empty() || !o.link.empty() || !o.algorithm.empty() || o.ranks > 0 || o.nodes > 0)) {
    throw InputError("calibrate: --op, --link, --algorithm, --ranks and --nodes describe the runs of --from-nccl-tests files, and none is given");
  }
  if (!o.compare.empty()) (void)load_profile(o.compare);
  // So is --scenario (a training scenario only): its mistakes had shown after the fit was written.
  if (!o.scenario.empty()) (void)models::load_training_scenario(o.scenario);

  hardware::HardwareProfile fitted;
  if (has_data) {
    if (o.base.empty() && o.device != "cpu") {
      throw InputError("calibrate: --base PROFILE is needed (the shipped profile of the GPU measured, e.g. --base h200-sxm-141gb): it gives the "
                       "datasheet peaks the fit starts from");
    }
    hardware::HardwareProfile base = o.base.empty() ? calibrate::cpu_base_profile() : load_profile(o.base);
    if (o.device == "cpu" && base.architecture != "cpu") {
      throw InputError(fmt::format("calibrate: --device cpu measures this machine's CPU, but --base {} is a {} GPU profile", o.base, base.architecture));
    }
    if (!o.out.empty()) {
      // No output may replace a file this command reads (a torch-probe file named measurements.json
      // in --out had been overwritten, its kernels lost): checked before any probe runs.
      for (const auto* list : {&o.from, &o.nccl_tests, &o.torch_probe}) {
        for (const auto& f : *list) InputsRead::note(f);
      }
      std::vector<fs::path> outputs;
      for (const char* name : kOutputFiles) {
        if (std::string_view(name) == "cuda-probe.json" && o.device != "cuda") continue;  // the probe's own record
        outputs.push_back(fs::path(o.out) / name);
      }
      refuse_outputs_over_inputs(outputs, "--out");
    }
    calibrate::Measurements m;
    calibrate::CalibrationOptions copt;
    copt.gemm.residual_table = !o.no_table;
    // The probes write into --out as they run; a fit of files makes it once they have been read (a
    // refused input had left an empty directory behind).
    if (!o.out.empty() && !o.device.empty()) reports::make_output_directory(o.out, "--out");
    if (o.device == "cpu") {
      std::cerr << "calibrate: probing this machine's CPU (GEMM, memory copies, transfers between processes)...\n";
      m.append(calibrate::probe_cpu({.quick = o.quick}));
      copt.sources.push_back("cpu probe");
    } else if (o.device == "cuda") {
      fs::path dir = o.out;
      if (dir.empty()) {
        // A private scratch directory (never a fixed name in a shared /tmp).
        std::string tmpl = (fs::temp_directory_path() / "clustersim-calibrate-XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("calibrate: cannot create a scratch directory for the probe's output");
        dir = tmpl;
      }
      m.append(probe_cuda(o.quick, dir / "cuda-probe.json"));
      if (o.out.empty()) fs::remove_all(dir);
      copt.sources.push_back("clustersim-probe-cuda");
    }
    std::map<fs::path, std::string> read;  // each file once: given twice, its samples had counted twice
    const auto once = [&](const std::string& f, const char* option) {
      std::error_code ec;
      const fs::path same = fs::weakly_canonical(f, ec);
      if (const auto [it, fresh] = read.emplace(ec ? fs::path(f) : same, f); !fresh) {
        throw InputError(fmt::format("{} {}: expected each measurements file once, found it again (given as {}): its samples would count twice", option, f,
                                     it->second));
      }
    };
    for (const auto& f : o.from) {
      once(f, "--from");
      const calibrate::Measurements part = calibrate::load_measurements(f);
      // Said of the file, with the record, where the fit would only say it of all of them.
      if (part.empty()) {
        throw InputError(fmt::format("{}: the gemm, memory, collectives and attention lists are all empty: nothing to fit", f));
      }
      if (!o.base.empty()) {
        for (std::size_t i = 0; i < part.gemm.size(); ++i) {
          if (!base.supports(part.gemm[i].dtype)) {
            throw InputError(fmt::format("{}: gemm[{}].dtype: expected a dtype with a peak in --base {}, found {}", f, i, base.name,
                                         hardware::to_string(part.gemm[i].dtype)));
          }
        }
      }
      m.append(part);
      copt.sources.push_back(fs::path(f).filename().string());
    }
    // The CPU's peak from its reported clock may sit below what it measured (a boosting VM core).
    if (o.base.empty()) base = calibrate::cpu_base_profile(m);
    calibrate::NcclTestsOptions nopt;
    nopt.op = op_option(o.op);
    nopt.link = link_option(o.link);
    if (o.ranks > 0) nopt.ranks = o.ranks;
    if (o.nodes > 0) nopt.nodes = o.nodes;
    if (!o.algorithm.empty() && !models::parse_algorithm(o.algorithm)) {
      throw InputError(fmt::format("--algorithm: expected ring, tree, hierarchical, nvls, collnet, pairwise or direct, found '{}'", o.algorithm));
    }
    for (const auto& f : o.nccl_tests) {
      once(f, "--from-nccl-tests");
      calibrate::Measurements run = calibrate::read_nccl_tests(f, nopt);
      for (auto& s : run.collectives) s.algorithm = o.algorithm;
      m.append(run);
      copt.sources.push_back("nccl-tests " + fs::path(f).filename().string());
    }
    for (const auto& f : o.torch_probe) {
      once(f, "--from-torch-probe");
      m.append(calibrate::read_torch_probe(f));
      copt.sources.push_back("torch-probe " + fs::path(f).filename().string());
    }
    check_attention_options(!m.attention.empty());
    if (!o.out.empty() && o.device.empty()) reports::make_output_directory(o.out, "--out");
    if (o.attention_backend) copt.attention.backend = *o.attention_backend;
    if (o.attention_head_dim) copt.attention.head_dim = *o.attention_head_dim;
    const calibrate::CalibrationResult r = calibrate::calibrate(base, m, copt);
    std::cout << calibrate::summary_text(r);
    if (!o.out.empty()) {
      const fs::path dir(o.out);
      std::vector<reports::OutputFile> files{{"profile.yaml", calibrate::profile_yaml(r)}, {"measurements.json", calibrate::to_json(m)}};
      std::string names;
      for (auto& f : calibrate::csv_files(m)) {
        names += (names.empty() ? "" : ", ") + f.name;
        files.push_back(std::move(f));
      }
      std::error_code ec;
      const bool replaced = fs::exists(dir / "measurements.json", ec);
      reports::write_files_atomically(dir, files);
      // An earlier fit's attention.csv beside measurements.json that holds no attention kernels.
      const std::string removed =
          m.attention.empty() ? remove_stale_companion(o.out, "attention.csv", calibrate::kAttentionCsvHeader, "measurements.json", replaced) : "";
      std::cout << fmt::format("wrote {0}/profile.yaml, {0}/measurements.json and {0}/{1}{2}\n", o.out, names, removed);
    }
    fitted = r.profile;
  } else {
    fitted = load_profile(o.profile);
  }
  if (!o.compare.empty()) {
    const hardware::HardwareProfile shipped = load_profile(o.compare);
    // Ratios against another chip's profile (an H100 fit against the A100's: memory bandwidth x1.97)
    // compare chips, not a calibration: said, not refused, as a CPU probe's profile standing in for
    // a GPU's (--scenario) is a way to try the pipeline on a machine without one.
    // H100 and H200 share an architecture and SM count: the GPU model their names give tells them apart.
    const std::string model_a = calibrate::gpu_model_of(shipped.name), model_b = calibrate::gpu_model_of(fitted.name);
    const bool other_model = !model_a.empty() && !model_b.empty() && model_a != model_b;
    if (shipped.architecture != fitted.architecture || shipped.sm_count != fitted.sm_count || other_model) {
      std::cout << fmt::format("note: --compare {} is a profile of another chip ({}: {}, {} SMs) than the fitted one ({}: {}, {} SMs): the ratios below "
                               "compare the two chips, not a calibration of one\n",
                               o.compare, shipped.name, shipped.architecture, shipped.sm_count, fitted.name, fitted.architecture, fitted.sm_count);
    }
    std::cout << fmt::format("\nfitted {} versus {} ({}):\n", fitted.name, shipped.name, o.compare) << calibrate::compare_text(fitted, shipped);
    if (!o.scenario.empty()) std::cout << scenario_effect(o.scenario, {{"shipped " + o.compare, shipped}, {"fitted", fitted}});
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Measure this machine (or read recorded measurements and nccl-tests output) and fit a hardware profile");
  cmd->add_option("--device", o->device, "Run the probes here: cpu (Eigen GEMM, memcpy, processes) or cuda (clustersim-probe-cuda)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_flag("--quick", o->quick, "Smaller probe sweeps (seconds instead of minutes)");
  cmd->add_option("--from", o->from, "Recorded measurements (clustersim-measurements/1 JSON) to fit")->check(input_file());
  cmd->add_option("--from-nccl-tests", o->nccl_tests, "nccl-tests output files (text or -J JSON) to fit the fabric from")->check(input_file());
  cmd->add_option("--from-torch-probe", o->torch_probe,
                  "scripts/torch-probe.py output (clustersim-torch-probe/1) whose fused attention kernels set the profile's attention constants")
      ->check(input_file());
  cmd->add_option("--attention-backend", o->attention_backend, "The attention backend of --from-torch-probe to fit (default cudnn; flash: FlashAttention-2)");
  cmd->add_option("--attention-head-dim", o->attention_head_dim, "The head dim of the attention kernels to fit (default 128)")->check(CLI::Range(1, 1024));
  cmd->add_option("--op", o->op, "The collective of nccl-tests files that do not name it (all_reduce, all_gather, ...)");
  cmd->add_option("--link", o->link, "The link class of nccl-tests files: nvlink, pcie, network or process (default: network across nodes, else nvlink)");
  cmd->add_option("--algorithm", o->algorithm, "The algorithm nccl-tests runs were forced to (NCCL_ALGO: ring, tree, nvls, ...); default: NCCL chose");
  cmd->add_option("--ranks", o->ranks, "Ranks of nccl-tests output that lists no devices (must agree when it does)")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--nodes", o->nodes, "Nodes of nccl-tests output that lists no devices (default 1)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--base", o->base, "Profile the fit starts from (shipped name or file); default for --device cpu: this CPU's description");
  cmd->add_option("--out", o->out, "Directory for profile.yaml, measurements.json and CSV files")->transform(output_directory());
  cmd->add_option("--profile", o->profile, "An already fitted profile to compare (instead of new measurements)");
  cmd->add_option("--compare", o->compare, "Shipped profile (name or file) to compare the fitted parameters with");
  cmd->add_option("--scenario", o->scenario, "Training scenario whose step time --compare shows under both profiles")->check(input_file());
  cmd->add_flag("--no-residual-table", o->no_table, "Fit the GEMM model alone, without the residual table");
  cmd->callback([o] { run(*o); });
}

}  // namespace cs::app
