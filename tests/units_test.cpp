#include "clustersim/common/units.hpp"

#include <optional>
#include <string>
#include <vector>

#include "catch.hpp"

#include "clustersim/common/field_count.hpp"
#include "clustersim/sim/time.hpp"
#include "support.hpp"

using namespace cs;

TEST_CASE("units parse into base units", "[units]") {
  const auto n = [](const char* text) { return test::parse(std::string("v: ") + text); };
  // 400 Gb/s of line rate is 400e9 / 8 = 50e9 bytes per second.
  CHECK(yaml::Map(n("400Gbps")).get<BytesPerSec>("v").value() == Approx(50e9));
  CHECK(yaml::Map(n("50GB/s")).get<BytesPerSec>("v").value() == Approx(50e9));
  CHECK(yaml::Map(n("80GiB")).get<Bytes>("v").value() == Approx(80.0 * 1024 * 1024 * 1024));
  CHECK(yaml::Map(n("80 GB")).get<Bytes>("v").value() == Approx(80e9));
  CHECK(yaml::Map(n("1.5us")).get<Seconds>("v").value() == Approx(1.5e-6));
  CHECK(yaml::Map(n("989TFLOPS")).get<FlopsPerSec>("v").value() == Approx(989e12));
  CHECK(yaml::Map(n("1.2e3TFLOP/s")).get<FlopsPerSec>("v").value() == Approx(1.2e15));
  CHECK(yaml::Map(n("700W")).get<Watts>("v").value() == Approx(700));
  CHECK(yaml::Map(n("1830MHz")).get<Hertz>("v").value() == Approx(1.83e9));
  // The top of a bandwidth's range (yaml::bandwidth, 1 KB/s to 1 PB/s) in the unit the docs give it.
  CHECK(yaml::Map(n("1PB/s")).get<BytesPerSec>("v").value() == Approx(1e15));
}

TEST_CASE("a bare number where a unit is required is an error listing the units", "[units]") {
  const std::string msg = test::input_error([] { yaml::Map(test::parse("bw: 400")).get<BytesPerSec>("bw"); });
  CHECK(msg == "test.yaml:1:5: field 'bw': expected a bandwidth with a unit (B/s, KB/s, MB/s, GB/s, TB/s, PB/s, KiB/s, MiB/s, "
               "GiB/s, TiB/s, bps, Kbps, Mbps, Gbps, Tbps, Gb/s, Tb/s), found '400' (a bare number: the unit is required)");
}

TEST_CASE("an unknown unit or a non-number is an error", "[units]") {
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("s: 80GX")).get<Bytes>("s"); }),
             Catch::Contains("expected a size with a unit (B, KB") && Catch::Contains("found '80GX'"));
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("s: fast")).get<Seconds>("s"); }),
             Catch::Contains("found 'fast'"));
  CHECK_THAT(test::input_error([] { yaml::Map(test::parse("s: nanGB")).get<Bytes>("s"); }), Catch::Contains("found 'nanGB'"));
}

TEST_CASE("quantities print with a fitting prefix", "[units]") {
  using namespace cs::literals;
  CHECK(to_string(450.0_GBps) == "450 GB/s");
  CHECK(to_string(80.0_GB) == "80 GB");
  CHECK(to_string(1.5_us) == "1.5 us");
  CHECK(to_string(989.0_TFLOPS) == "989 TFLOP/s");
  // Bytes / bandwidth is a duration: 80 GB at 50 GB/s take 1.6 s.
  CHECK((80.0_GB / 400.0_Gbps).value() == Approx(1.6));
}

TEST_CASE("simulated time is integer nanoseconds with named constructors", "[sim][time]") {
  using cs::sim::Time;
  CHECK(Time::us(3.5).count_ns() == 3500);
  CHECK(Time::seconds(2).count_ns() == 2'000'000'000);
  CHECK(Time::ms(1.0) + Time::us(1.0) == Time::ns(1'001'000));
  // Rounded to the nearest nanosecond: 0.4 ns -> 0, 0.6 ns -> 1.
  CHECK(Time::seconds(0.4e-9).count_ns() == 0);
  CHECK(Time::seconds(0.6e-9).count_ns() == 1);
  CHECK(fmt::format("{}", Time::us(12.3)) == "12.3 us");
  CHECK(fmt::format("{}", Time::ns(450)) == "450 ns");
}

namespace {
struct ThreeFields {
  std::string name;
  std::optional<std::vector<int>> sizes;
  cs::Seconds latency;
};
struct Nested {
  ThreeFields inner;
  int count = 0;
};
}  // namespace

TEST_CASE("field_count counts an aggregate's fields, members of class type as one each") {
  STATIC_REQUIRE(cs::field_count<ThreeFields>() == 3);
  STATIC_REQUIRE(cs::field_count<Nested>() == 2);
}

TEST_CASE("a run's length reads in days from one day on, in hours below (not 0.0 days)", "[units]") {
  CHECK(days_text(Seconds(20.4 * 86400)) == "20.4 days");
  CHECK(days_text(Seconds(86400)) == "1.0 days");
  CHECK(days_text(Seconds(0.0392 * 86400)) == "0.941 hours");
  CHECK(days_text(Seconds(0)) == "0 hours");
  // GPU-hours: whole from 100 on, three significant digits below (a short budget read "0 GPU-hours").
  CHECK(gpu_hours_text(2880672.4) == "2880672 GPU-hours");
  CHECK(gpu_hours_text(123.4) == "123 GPU-hours");
  CHECK(gpu_hours_text(0.030479) == "0.0305 GPU-hours");
  CHECK(gpu_hours_text(1.0) == "1 GPU-hour");
  // In table cells (plan's days column, the report's scaling and cost tables): three significant
  // digits under 10 days.
  CHECK(days_figure(20.44) == "20.4");
  CHECK(days_figure(0.0392) == "0.0392");
  CHECK(days_figure(std::nan("")) == "-");
}
