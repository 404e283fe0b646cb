#include "clustersim/models/cost_scenario.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/common/suggest.hpp"
#include "clustersim/common/units.hpp"

namespace cs::models {

namespace {

// Llama 3 (Dubey et al. 2024, arXiv 2407.21783, section 3.3.4): 419 unexpected interruptions in 54
// days on 16,384 H100 GPUs (2,048 nodes) = 3.79 per 1,000 node-days.
constexpr double kLlama3FailuresPer1000NodeDays = 419.0 / (2048.0 * 54.0) * 1000.0;

// An availability trace: header `hours,available`, then rows of a time (hours from the trace's start,
// increasing, the first 0) and 1 or 0 (capacity available from then on); the last row marks the end.
std::vector<std::pair<double, bool>> read_availability_trace(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file, "an availability trace (CSV)");
  InputsRead::note(file);
  const auto where = [&](int line) { return SourceLocation{std::make_shared<const std::string>(file.string()), line, 1}; };
  std::vector<std::pair<double, bool>> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1) {
      if (line != "hours,available") throw InputError(where(1), "header", "'hours,available'", "'" + line + "'");
      continue;
    }
    if (line.empty()) continue;
    const auto comma = line.find(',');
    double hours = -1;
    int state = -1;
    try {
      std::size_t used = 0;
      const std::string h = line.substr(0, comma), a = comma == std::string::npos ? "" : line.substr(comma + 1);
      hours = std::stod(h, &used);
      if (used != h.size()) throw std::invalid_argument("hours");
      state = std::stoi(a, &used);
      if (used != a.size()) throw std::invalid_argument("available");
    } catch (const std::exception&) {
      throw InputError(where(number), "row", "hours >= 0 and 0 or 1", "'" + line + "'");
    }
    if (!(hours >= 0) || !std::isfinite(hours) || (state != 0 && state != 1)) throw InputError(where(number), "row", "hours >= 0 and 0 or 1", "'" + line + "'");
    if (const double most = simulated_time_limit_s() / 3600.0; hours > most) {
      throw InputError(where(number), "hours", fmt::format("a time from 0 to {:.3g} hours (the simulator's clock)", most), fmt::format("{:g}", hours));
    }
    if (out.empty() && hours != 0) throw InputError(where(number), "hours", "0 on the first row", fmt::format("{:g}", hours));
    if (!out.empty() && hours <= out.back().first / 3600.0) {
      throw InputError(where(number), "hours", fmt::format("a time after the previous row's ({:g})", out.back().first / 3600.0), fmt::format("{:g}", hours));
    }
    out.emplace_back(hours * 3600.0, state == 1);
  }
  if (out.size() < 2) throw InputError(where(number), "the trace needs at least two rows (a start and an end)");
  return out;
}

// Capex and upfront payments: up to 1e12 per GPU in any currency (an H100's share of a cluster is
// about 5e4 US dollars, 8e8 rupiah). Past it a run's cost prints as hundreds of digits, or infinity.
constexpr double kMaxPaymentPerGpu = 1e12;

Offering read_offering(const yaml::Node& node) {
  yaml::Map m(node);
  Offering o;
  o.where = node.where();
  // The name is a column of distributions.csv, written unquoted: no commas, quotes or line breaks.
  o.name = m.get<std::string>("name", yaml::Check<std::string>{"a name without commas, quotes or line breaks (it is a column of distributions.csv)",
                                                               [](const std::string& v) { return !v.empty() && v.find_first_of(",\"\r\n") == std::string::npos; }});
  o.provider = m.get_or<std::string>("provider", "");
  o.region = m.get_or<std::string>("region", "");
  o.gpu = m.get<std::string>("gpu");
  o.gpus_per_node = m.get_or<int>("gpus_per_node", 8, yaml::positive<int>());
  const std::string pricing = m.choice("pricing", {"on-demand", "spot", "reserved", "owned"});
  o.pricing = pricing == "on-demand" ? Pricing::on_demand : pricing == "spot" ? Pricing::spot : pricing == "reserved" ? Pricing::reserved : Pricing::owned;
  // Where a price comes from and when: required, so not empty either.
  const yaml::Check<std::string> text{"text (not empty)", [](const std::string& v) { return !v.empty(); }};
  o.as_of = m.get<std::string>("as_of", text);
  o.source = m.get<std::string>("source", text);
  // Up to a year: a hold shorter than a billionth of the granularity would be billed nothing.
  const yaml::Check<Seconds> granularity{"a granularity above 0 and at most 365d", [](const Seconds& v) { return v.value() > 0 && v.value() <= 365 * 86400.0; }};
  o.billing_granularity_s = m.get_or<Seconds>("billing", Seconds(1), granularity).value();
  const yaml::Check<double> price = yaml::price_per_hour();
  const auto gpu_hour = m.find("price_per_gpu_hour");
  const auto node_hour = m.find("price_per_node_hour");
  if (o.pricing == Pricing::owned) {
    if (gpu_hour || node_hour) (gpu_hour ? *gpu_hour : *node_hour).fail_message("an owned offering is priced by its owned map, not a list price");
  } else if (gpu_hour && node_hour) {
    node_hour->fail_message("give price_per_gpu_hour or price_per_node_hour, not both");
  } else if (gpu_hour) {
    o.price_per_gpu_hour = gpu_hour->as<double>(price);
  } else if (node_hour) {
    o.price_per_gpu_hour = node_hour->as<double>(price) / o.gpus_per_node;
  } else {
    m.at("price_per_gpu_hour", "a price per GPU-hour (or price_per_node_hour)");
  }
  const auto only = [&](const char* key, Pricing p) {
    auto n = m.find(key);
    if (n && o.pricing != p) n->fail_message(fmt::format("'{}' applies to pricing: {}", key, to_string(p)));
    return n && o.pricing == p ? n : std::nullopt;
  };
  if (auto s = only("spot", Pricing::spot)) {
    yaml::Map sm(*s);
    // Required: without it the market was silently one that never preempts (kind: none says so). Its
    // own scope, so that its map is finished before the spot map's other keys are read.
    {
      yaml::Map pm(sm.at("preemption", "a preemption map (kind: poisson, weibull, trace, or none for a market that never preempts)"));
      const std::string kind = pm.choice("kind", {"poisson", "weibull", "trace", "none"});
      if (kind == "poisson") {
        o.preemption.kind = PreemptionProcess::Kind::poisson;
        o.preemption.rate_per_node_hour = pm.get<double>("per_node_hour", yaml::non_negative<double>());
      } else if (kind == "weibull") {
        o.preemption.kind = PreemptionProcess::Kind::weibull;
        // Below 0.1 the mean lifetime, scale x Gamma(1 + 1/shape), is over 3.6 million scales, set by
        // draws no trial sees (and the closed form's rate underflows to no preemptions at all).
        o.preemption.shape = pm.get<double>("shape", yaml::in_range(0.1, 100.0, "a Weibull shape from 0.1 to 100"));
        o.preemption.scale_hours = pm.get<Seconds>("scale", yaml::positive<Seconds>()).value() / 3600.0;
      } else if (kind == "trace") {
        o.preemption.kind = PreemptionProcess::Kind::trace;
        const yaml::Node f = pm.at("file", "an availability trace CSV (hours,available)");
        std::filesystem::path path = f.scalar("a path");
        if (path.is_relative()) path = f.directory() / path;
        // Named where the sheet gives it: the CSV's own errors name the CSV, but a file that is not
        // there is the sheet's mistake (a probe's message named only the missing path).
        if (std::error_code ec; !std::filesystem::exists(path, ec)) {
          f.fail("an availability trace CSV that exists (a relative path is from the sheet's directory)", "'" + path.string() + "', which does not exist");
        }
        o.preemption.availability = read_availability_trace(path);
      }
      pm.finish();
    }
    o.preemption.zone = sm.get_or<bool>("zone", false);
    // Clouds give seconds to minutes; a day bounds it far above any, and far below the clock's range
    // (a probe's 1e300 s ran to a closed form that overflowed and a meaningless break-even).
    o.notice_s = sm.get_or<Seconds>("notice", Seconds(0), yaml::Check<Seconds>{"a notice from 0 to 1d", [](const Seconds& v) { return v.value() >= 0 && v.value() <= 86400.0; }}).value();
    o.capacity_wait_s = sm.get_or<Seconds>("capacity_wait", Seconds(0), yaml::non_negative<Seconds>()).value();
    o.max_lifetime_s = sm.get_or<Seconds>("max_lifetime", Seconds(0), yaml::positive<Seconds>()).value();  // absent: no limit
    sm.finish();
  } else if (o.pricing == Pricing::spot) {
    m.at("spot", "a spot map with its preemption (kind: poisson, weibull, trace, or none for a market that never preempts), notice and capacity_wait");
  }
  if (auto r = only("reserved", Pricing::reserved)) {
    yaml::Map rm(*r);
    // At least an hour: the upfront payment is spread over the term.
    // At most a century: reservations run one to three years (a probe's 1e300 d printed a commitment of
    // hundreds of digits).
    o.term_hours = rm.get<Seconds>("term", yaml::Check<Seconds>{"a term from 1h to 100 years (36500d)", [](const Seconds& v) {
                                     return v.value() >= 3600.0 && v.value() <= 36500.0 * 86400.0;
                                   }}).value() / 3600.0;
    o.upfront_per_gpu = rm.get_or<double>("upfront_per_gpu", 0.0, yaml::in_range(0.0, kMaxPaymentPerGpu, "a payment from 0 to 1e12 per GPU"));
    rm.finish();
  } else if (o.pricing == Pricing::reserved) {
    // The term is what a reservation commits (it had been priced as a plain list price without it).
    m.at("reserved", "a reserved map with its term (and upfront_per_gpu)");
  }
  if (auto w = only("owned", Pricing::owned)) {
    yaml::Map om(*w);
    o.capex_per_gpu = om.get<double>("capex_per_gpu", yaml::Check<double>{"a price above 0 and at most 1e12 per GPU", [](double v) { return v > 0 && v <= kMaxPaymentPerGpu; }});
    o.lifetime_years = om.get<double>("lifetime_years", yaml::in_range(0.1, 100.0, "a lifetime from 0.1 to 100 years"));
    o.wacc = om.get_or<double>("wacc", 0.0, yaml::in_range(0.0, 1.0, "a yearly rate from 0 to 1"));
    o.power_w_per_gpu = om.get<Watts>("power_per_gpu", yaml::in_range(Watts(0), Watts(1e6), "a power from 0 to 1MW per GPU")).value();
    o.pue = om.get_or<double>("pue", 1.0, yaml::in_range(1.0, 5.0, "a PUE from 1 to 5"));
    o.price_per_kwh = om.get<double>("price_per_kwh", yaml::in_range(0.0, 1e6, "a price from 0 to 1e6 a kWh"));
    // At 1e-300 the GPU-hour cost 1e304 dollars: a GPU bought to be used under 1% of its life is no plan.
    o.utilisation = om.get<double>("utilisation", yaml::in_range(0.01, 1.0, "a fraction from 0.01 to 1"));
    om.finish();
  } else if (o.pricing == Pricing::owned) {
    m.at("owned", "an owned map (capex_per_gpu, lifetime_years, power_per_gpu, price_per_kwh, utilisation)");
  }
  m.finish();
  return o;
}

// A training run's failures and spot preemptions strike nodes: an offering whose instances hold
// another number of GPUs than the scenario's nodes would be priced for a machine it does not rent.
std::string shape_mismatch(const Offering& o, int node_gpus, bool training) {
  return fmt::format("offering '{}' rents nodes of {} GPU{}, but the scenario's nodes hold {}: {}", o.name, o.gpus_per_node, o.gpus_per_node == 1 ? "" : "s",
                     node_gpus,
                     training ? "its failures and preemptions would strike nodes the scenario does not have, in NVLink domains of another size"
                              : "the fleet would be billed for nodes, and placed in NVLink domains, the scenario does not have");
}

}  // namespace

CostSheet read_cost_sheet(const yaml::Node& body) {
  yaml::Map m(body);
  CostSheet sheet;
  sheet.name = m.get<std::string>("name", yaml::name());
  sheet.description = m.get_or<std::string>("description", "");
  const yaml::Node list = m.at("offerings", "a list of offerings");
  if (!list.is_list() || list.items().empty()) list.fail("a non-empty list of offerings");
  for (const yaml::Node& item : list.items()) {
    Offering o = read_offering(item);
    for (const auto& other : sheet.offerings) {
      if (other.name == o.name) item.fail_message(fmt::format("a second offering named '{}'", o.name));
    }
    sheet.offerings.push_back(std::move(o));
  }
  m.finish();
  return sheet;
}

CostSheet load_cost_sheet_reference(const yaml::Node& node, IncludeStack& includes) {
  if (node.is_map()) return read_cost_sheet(node);
  const auto file = resolve_part(node, "costs");
  auto guard = includes.enter(file, node.where());
  auto doc = yaml::Document::load_file(file);
  return read_cost_sheet(part_body(doc->root(), "cost_sheet"));
}

CostSection read_cost_section(const yaml::Node& node, const std::string& gpu, IncludeStack& includes, bool training, int node_gpus) {
  yaml::Map m(node);
  if (!training) {
    for (const char* key : {"reliability", "checkpoint", "deadline", "elastic", "trials", "seed"}) {
      if (auto k = m.find(key)) {
        k->fail_message(fmt::format("'{}' applies to training runs only: an inference scenario's cost prices the simulated fleet from its "
                                    "sheet and offerings",
                                    key));
      }
    }
  }
  CostSection c;
  c.sheet = load_cost_sheet_reference(m.at("sheet", "a cost sheet: a shipped name, a path, or a map"), includes);
  if (auto list = m.find("offerings")) {
    if (!list->is_list() || list->items().empty()) list->fail("a non-empty list of offering names");
    for (const yaml::Node& item : list->items()) {
      const std::string name = item.scalar("an offering name");
      const auto it = std::find_if(c.sheet.offerings.begin(), c.sheet.offerings.end(), [&](const Offering& o) { return o.name == name; });
      if (it == c.sheet.offerings.end()) {
        std::string names;
        for (const auto& o : c.sheet.offerings) names += (names.empty() ? "" : ", ") + o.name;
        item.fail_message(fmt::format("no offering '{}' in cost sheet {} (it has {})", name, c.sheet.name, names));
      }
      if (it->gpu != gpu) item.fail_message(fmt::format("offering '{}' rents {}, but the scenario runs on {}", name, it->gpu, gpu));
      if (node_gpus > 0 && it->gpus_per_node != node_gpus) item.fail_message(shape_mismatch(*it, node_gpus, training));
      if (std::any_of(c.offerings.begin(), c.offerings.end(), [&](const Offering& o) { return o.name == name; })) {
        item.fail_message(fmt::format("offering '{}' is listed twice", name));
      }
      c.offerings.push_back(*it);
    }
  } else {
    // An offering of the scenario's GPU or a shipped profile's under another spelling (case,
    // '-', '_' or spaces: 'h100-sxm5-80gb') is refused, naming the profile; one a typo away from the
    // scenario's GPU is left out with a note, as it may be another GPU (A800 beside A100).
    std::vector<std::string> known{gpu};
    for (std::string name : shipped_part_names("hardware")) {
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
      known.push_back(std::move(name));
    }
    const auto spelling = [](const std::string& name) {
      std::string out;
      for (unsigned char ch : name) {
        if (std::isalnum(ch)) out += static_cast<char>(std::tolower(ch));
      }
      return out;
    };
    std::vector<std::string> others;
    std::vector<std::string> other_shapes;
    for (const auto& o : c.sheet.offerings) {
      if (o.gpu == gpu && node_gpus > 0 && o.gpus_per_node != node_gpus) {
        c.notes.push_back(shape_mismatch(o, node_gpus, training) + ": left out");
        other_shapes.push_back(fmt::format("'{}' ({} a node)", o.name, o.gpus_per_node));
        continue;
      }
      if (o.gpu == gpu) {
        c.offerings.push_back(o);
        continue;
      }
      const bool profile = std::find(known.begin(), known.end(), o.gpu) != known.end();
      for (const std::string& k : known) {
        if (!profile && spelling(k) == spelling(o.gpu)) {
          throw InputError(o.where, "gpu", fmt::format("the hardware profile name '{}'", k),
                           fmt::format("'{}' (offering '{}' in cost sheet {})", o.gpu, o.name, c.sheet.name));
        }
      }
      // (A shipped profile's GPU near the scenario's, A100-SXM4-40GB beside -80GB, is another GPU.)
      if (!profile && edit_distance(spelling(o.gpu), spelling(gpu)) <= 2) {
        c.notes.push_back(fmt::format("offering '{}' rents {}, not this scenario's {}: left out (if it is this GPU, correct its name in cost sheet {})",
                                      o.name, o.gpu, gpu, c.sheet.name));
      }
      if (std::find(others.begin(), others.end(), o.gpu) == others.end()) others.push_back(o.gpu);
    }
    if (c.offerings.empty() && !other_shapes.empty()) {
      node.fail_message(fmt::format("cost sheet {} offers {} only in nodes of another size than the scenario's {} GPUs: {}", c.sheet.name, gpu, node_gpus,
                                    join_alternatives(other_shapes)));
    }
    if (c.offerings.empty()) node.fail_message(fmt::format("cost sheet {} offers no {} (it offers {})", c.sheet.name, gpu, join_alternatives(others)));
  }
  c.reliability.failures_per_1000_node_days = kLlama3FailuresPer1000NodeDays;
  c.reliability.detect_s = 5 * 60.0;
  c.reliability.restart_s = 10 * 60.0;
  c.origin.section = node;
  if (auto r = m.find("reliability")) {
    c.origin.reliability = *r;
    yaml::Map rm(*r);
    if (auto f = rm.find("failures_per_1000_node_days")) {
      c.reliability.failures_per_1000_node_days = f->as<double>(yaml::non_negative<double>());
      c.origin.failures = *f;
    }
    if (auto d = rm.find("detect")) {
      c.reliability.detect_s = d->as<Seconds>(yaml::non_negative<Seconds>()).value();
      c.origin.detect = *d;
    }
    if (auto r2 = rm.find("restart")) {
      c.reliability.restart_s = r2->as<Seconds>(yaml::non_negative<Seconds>()).value();
      c.origin.restart = *r2;
    }
    rm.finish();
  }
  if (!training) {
    m.finish();
    return c;
  }
  {
    c.origin.checkpoint = m.at("checkpoint", "a checkpoint map with write_bandwidth (bytes/s the job writes at)");
    yaml::Map cm(*c.origin.checkpoint);
    c.origin.write_bandwidth = cm.at("write_bandwidth", yaml::positive<BytesPerSec>().expected);
    c.checkpoint_bandwidth = c.origin.write_bandwidth->as<BytesPerSec>(yaml::positive<BytesPerSec>()).value();
    c.async = cm.get_or<bool>("async", false);
    if (auto i = cm.find("interval")) {
      c.origin.interval = *i;
      if (!(i->is_scalar() && i->scalar() == "optimal")) c.interval_s = i->as<Seconds>(yaml::positive<Seconds>()).value();
    }
    cm.finish();
  }
  if (auto d = m.find("deadline")) {
    c.origin.deadline = *d;
    c.options.deadline_s = d->as<Seconds>(yaml::positive<Seconds>()).value();
  }
  if (auto e = m.find("elastic")) {
    c.origin.elastic = *e;
    c.options.elastic = e->as<bool>();
  }
  c.options.trials = m.get_or<int>("trials", 1000, yaml::in_range(1, 1'000'000, "from 1 to 1,000,000 trials"));
  c.options.seed = m.get_or<std::uint64_t>("seed", 1);  // any of --seed's 0 to 2^64 - 1
  m.finish();
  return c;
}

void CostSection::refuse(const CostInputError& e) const {
  using Input = CostInputError::Input;
  if (e.input() == Input::preemption) {
    const auto it = std::find_if(offerings.begin(), offerings.end(), [&](const Offering& o) { return o.name == e.offering(); });
    if (it != offerings.end()) throw InputError(it->where, fmt::format("offering '{}': {}", it->name, e.what()));
  }
  const std::optional<yaml::Node>* blamed = &origin.section;
  switch (e.input()) {
    case Input::train_tokens: blamed = &origin.train_tokens; break;
    case Input::failures: blamed = origin.failures ? &origin.failures : &origin.reliability; break;
    case Input::reliability:
      // The restart's longer part.
      blamed = reliability.detect_s > reliability.restart_s ? &origin.detect : &origin.restart;
      if (!*blamed) blamed = &origin.reliability;
      break;
    case Input::write_bandwidth: blamed = &origin.write_bandwidth; break;
    case Input::interval: blamed = origin.interval ? &origin.interval : &origin.checkpoint; break;
    case Input::deadline: blamed = &origin.deadline; break;
    case Input::preemption: break;
  }
  if (!*blamed) blamed = &origin.section;
  // What the section left out of the offerings priced may be why a deadline finds no offering to
  // fall back on (an on-demand offering in nodes of another size had read as none at all).
  std::string message = e.what();
  std::vector<std::string> left_out;
  for (const std::string& n : notes) {
    if (e.input() == Input::deadline && n.find("left out") != std::string::npos) left_out.push_back(n);
  }
  if (!left_out.empty()) {
    message += " (";
    for (std::size_t i = 0; i < left_out.size(); ++i) message += (i ? "; " : "") + left_out[i];
    message += ")";
  }
  if (!*blamed) throw InputError(message);
  (*blamed)->fail_message(message);
}

}  // namespace cs::models
