#include "clustersim/hardware/dtype.hpp"

namespace cs::hardware {

std::string_view to_string(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::tf32: return "tf32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8: return "fp8";
    case Dtype::fp4: return "fp4";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view s) {
  for (Dtype d : kAllDtypes) {
    if (to_string(d) == s) return d;
  }
  return std::nullopt;
}

double bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::fp32:
    case Dtype::tf32: return 4.0;
    case Dtype::fp16:
    case Dtype::bf16: return 2.0;
    case Dtype::fp8: return 1.0;
    case Dtype::fp4: return 0.5;
  }
  return 0.0;
}

}  // namespace cs::hardware
