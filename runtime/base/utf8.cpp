#include "runtime/base/utf8.h"

#include <cstdint>

namespace vrun {

int utf8_sequence_length(std::string_view s, bool* needed_more) {
  if (needed_more) *needed_more = false;
  if (s.empty()) return 0;
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return 1;
  int len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= s.size()) {
      if (needed_more) *needed_more = true;
      return 0;
    }
    const auto b = static_cast<uint8_t>(s[i]);
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return 0;
  }
  return len;
}

void append_utf8_replacing_invalid(std::string_view s, std::string& out) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  size_t i = 0;
  while (i < s.size()) {
    const int n = utf8_sequence_length(s.substr(i), nullptr);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    size_t bad = 1;
    for (size_t k = 2; k <= 3 && i + k <= s.size(); ++k) {
      bool more = false;
      utf8_sequence_length(s.substr(i, k), &more);
      if (!more) break;
      bad = k;
    }
    out += kReplacement;
    i += bad;
  }
}

}  // namespace vrun
