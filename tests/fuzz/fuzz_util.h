// What the fuzz targets share: the readers that only take a path get the input through a file in
// a private temporary folder, and inputs made of several files are split at a marker line.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace vrun::fuzz {

// One folder per process, emptied for every input.
class Scratch {
 public:
  Scratch() {
    dir_ = std::filesystem::temp_directory_path() / ("vrun-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void clear() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) std::filesystem::remove_all(e.path(), ec);
  }
  // Writes `bytes` to <folder>/<name> and returns the path.
  std::string write(const std::string& name, std::string_view bytes) {
    const std::string path = (dir_ / name).string();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) __builtin_trap();
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) __builtin_trap();
    std::fclose(f);
    return path;
  }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

inline Scratch& scratch() {
  static Scratch s;
  return s;
}

// The marker line that separates the files of a multi-file input (config.json, then weights).
inline constexpr std::string_view kPartMarker = "\n--vrun-fuzz-part--\n";

inline std::vector<std::string_view> split_parts(const uint8_t* data, size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = all.find(kPartMarker);
    if (at == std::string_view::npos) break;
    parts.push_back(all.substr(0, at));
    all.remove_prefix(at + kPartMarker.size());
  }
  parts.push_back(all);
  return parts;
}

// A multi-file input in the scratch folder, emptied first: part k written as names[k], for the
// parts that have a name and the names that have a part. Returns all the parts.
inline std::vector<std::string_view> write_parts(const uint8_t* data, size_t size,
                                                 std::initializer_list<const char*> names) {
  const auto parts = split_parts(data, size);
  Scratch& s = scratch();
  s.clear();
  size_t k = 0;
  for (const char* name : names) {
    if (k == parts.size()) break;
    s.write(name, parts[k++]);
  }
  return parts;
}

// A failed load must say why.
template <class R>
void require_message(const R& r) {
  if constexpr (requires { r.status(); }) {
    if (!r.is_ok() && r.status().message().empty()) __builtin_trap();
  } else {
    if (!r.is_ok() && r.message().empty()) __builtin_trap();
  }
}

}  // namespace vrun::fuzz
