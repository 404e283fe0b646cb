// The number of fields of an aggregate, at compile time: the largest N for which T{x1, ..., xN}
// compiles with arguments convertible to anything. Code that lists a struct's fields by hand (a
// digest, a JSON object) asserts the count beside the list, so that a field added to the struct
// fails to compile there until the list is brought up to date.
#pragma once

#include <cstddef>
#include <utility>

namespace cs {

namespace detail {
struct AnyField {
  template <class T>
  operator T() const;  // unevaluated only
};
template <class T, class... A>
concept BraceInitializable = requires { T{std::declval<A>()...}; };
template <class T, class... A>
constexpr std::size_t count_fields() {
  if constexpr (BraceInitializable<T, A..., AnyField>) {
    return count_fields<T, A..., AnyField>();
  } else {
    return sizeof...(A);
  }
}
}  // namespace detail

template <class T>
constexpr std::size_t field_count() {
  return detail::count_fields<T>();
}

}  // namespace cs
