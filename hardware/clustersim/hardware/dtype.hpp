// Numeric formats of tensor math.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace cs::hardware {

enum class Dtype { fp32, tf32, fp16, bf16, fp8, fp4 };

inline constexpr std::array kAllDtypes{Dtype::fp32, Dtype::tf32, Dtype::fp16, Dtype::bf16, Dtype::fp8, Dtype::fp4};

std::string_view to_string(Dtype d);
std::optional<Dtype> parse_dtype(std::string_view s);
// Bytes of one stored element (tf32 is stored as fp32; fp4 packs two per byte).
double bytes_per_element(Dtype d);

}  // namespace cs::hardware
