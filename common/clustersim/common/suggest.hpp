// "Did you mean" suggestions for misspelt names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cs {

// Edit distance counting an adjacent transposition as one edit (optimal string alignment).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The closest candidate when it is close enough to be a plausible typo (distance at most
// max(1, length/3), or one is a case-insensitive match of the other); empty otherwise.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'radix'?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// "a, b or c"
std::string join_alternatives(const std::vector<std::string>& words);

}  // namespace cs
