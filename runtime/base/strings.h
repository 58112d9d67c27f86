// Small string helpers shared by the op registry, the importers, the command lines and the
// benchmarks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vrun {

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The parts of s between separators, empty parts kept ("a,,b" -> a, "", b); none for an empty s.
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  if (s.empty()) return parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

// split without the empty parts ("a,,b," -> a, b): comma lists given on command lines.
inline std::vector<std::string> split_nonempty(std::string_view s, char sep) {
  std::vector<std::string> parts;
  for (std::string& p : split(s, sep))
    if (!p.empty()) parts.push_back(std::move(p));
  return parts;
}

// s with every occurrence of `from` (not empty) replaced by `to`, left to right.
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t p = 0; p < s.size();) {
    if (s.compare(p, from.size(), from) == 0) {
      out += to;
      p += from.size();
    } else {
      out += s[p++];
    }
  }
  return out;
}

}  // namespace vrun
