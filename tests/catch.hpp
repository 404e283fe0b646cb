// Catch2 for the tests, v2 (Debian 12's catch2 package, a single header) or v3 (Debian 13's, a
// compiled library): the tests are written against v2's names, and under v3 the few that moved are
// brought back here. CLUSTERSIM_CATCH2_MAJOR comes from the Catch2 package CMake found.
#pragma once

#if CLUSTERSIM_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>

#include <string>

using Catch::Approx;
namespace Catch {
// v2's string matchers: Contains became ContainsSubstring (v3's Contains matches ranges).
inline Matchers::StringContainsMatcher Contains(const std::string& text, CaseSensitive sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, sensitivity);
}
using Matchers::StartsWith;
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
