// Whether a string read from an input is text a profile can hold: UTF-8, without control characters
// but tabs and line breaks. Measurement metadata (a device name, a note) is copied into profile.yaml,
// whose loader refuses control characters, and into JSON, which refuses bytes that are not UTF-8: a
// log with a terminal colour code in its device name had written a profile nothing could load, and a
// stray 0xff byte had ended in the JSON library's words.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cs {

namespace plain_text_detail {
// The length of the UTF-8 character at text[i] (1 to 4), or 0 when the byte there begins none.
inline std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const int follow = c < 0x80 ? 0 : (c >= 0xc2 && c <= 0xdf) ? 1 : (c >= 0xe0 && c <= 0xef) ? 2 : (c >= 0xf0 && c <= 0xf4) ? 3 : -1;
  if (follow < 0 || i + static_cast<std::size_t>(follow) >= text.size()) return 0;
  for (int k = 1; k <= follow; ++k) {
    if ((static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]) & 0xc0) != 0x80) return 0;
  }
  return static_cast<std::size_t>(follow) + 1;
}
inline bool control(unsigned char c) { return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f; }
}  // namespace plain_text_detail

// Empty when `text` is plain text, else what is wrong with it ("it holds the control character \x1b").
inline std::string plain_text_problem(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (plain_text_detail::control(c)) return fmt::format("it holds the control character \\x{:02x}", c);
    const std::size_t n = plain_text_detail::utf8_length(text, i);
    if (n == 0) return fmt::format("it holds the byte \\x{:02x}, which is not UTF-8", c);
    i += n;
  }
  return "";
}

// `text` quoted for a message: control characters and bytes that are not UTF-8 as \xNN, at most
// 80 bytes shown.
inline std::string quoted_text(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < 80;) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = plain_text_detail::control(c) ? 0 : plain_text_detail::utf8_length(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out + (text.size() > 80 ? "...'" : "'");
}

}  // namespace cs
