// What the speech-recognition benchmarks share: timing, a deterministic generator for random
// weights and audio, option parsing that ends in a usage message, and the markdown table rows
// that bench/asr/*_run.sh read by column.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace vrun::bench {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// xorshift64: the same stream on every platform, so random models and audio are reproducible.
struct Rng {
  uint64_t s;
  float next() {  // uniform in [-1, 1)
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>((s >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
  }
};

// The program's name and its usage lines ("usage: ...\n..."), printed after the reason.
struct Usage {
  const char* program;
  const char* text;
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\n%s", program, why.c_str(), text);
    std::exit(2);
  }
};

// Walks argv as "--key [value]". handle(key) reads the key's value through value()/real()/
// integer()/integer64() and returns false for a key it does not know; a missing value, a bad
// number or an unknown key ends the program with the usage message.
class OptionParser {
 public:
  OptionParser(int argc, char** argv, const Usage& usage) : argc_(argc), argv_(argv), usage_(usage) {}

  template <typename Handle>
  void parse(Handle handle) {
    for (i_ = 1; i_ < argc_; ++i_) {
      key_ = argv_[i_];
      bool known = false;
      try {
        known = handle(key_);
      } catch (const std::exception&) {
        usage_.fail("bad number after " + key_);
      }
      if (!known) usage_.fail("unknown option " + key_);
    }
  }

  std::string value() {
    if (i_ + 1 >= argc_) usage_.fail("missing value after " + key_);
    return argv_[++i_];
  }
  double real() { return std::stod(value()); }
  int integer() { return std::stoi(value()); }
  int64_t integer64() { return std::stoll(value()); }

 private:
  int argc_;
  char** argv_;
  const Usage& usage_;
  int i_ = 1;
  std::string key_;
};

// The options both benches take.
struct RunOptions {
  std::string model, audio, backend = "auto";
  double seconds = 0;
  int threads = 0;
};

// One option of a bench: its key and where its value goes (a bool is a flag: given, it is true).
struct Option {
  const char* key;
  std::variant<std::string*, int*, int64_t*, double*, bool*> target;
};

// Reads argv: the run options (--model, --audio, --seconds, --threads, --backend) into run, then
// the bench's own.
inline void parse_options(int argc, char** argv, const Usage& usage, RunOptions* run, std::initializer_list<Option> own) {
  std::vector<Option> options = {{"--model", &run->model},
                                 {"--audio", &run->audio},
                                 {"--seconds", &run->seconds},
                                 {"--threads", &run->threads},
                                 {"--backend", &run->backend}};
  options.insert(options.end(), own.begin(), own.end());
  OptionParser p(argc, argv, usage);
  p.parse([&](const std::string& key) {
    for (const Option& o : options) {
      if (key != o.key) continue;
      std::visit(
          [&](auto* t) {
            using T = std::remove_pointer_t<decltype(t)>;
            if constexpr (std::is_same_v<T, bool>) *t = true;
            else if constexpr (std::is_same_v<T, std::string>) *t = p.value();
            else if constexpr (std::is_same_v<T, double>) *t = p.real();
            else if constexpr (std::is_same_v<T, int>) *t = p.integer();
            else *t = p.integer64();
          },
          o.target);
      return true;
    }
    return false;
  });
}

// The last component of a model path ("models/tiny.en/" -> "tiny.en").
inline std::string model_basename(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  return path.substr(path.find_last_of('/') + 1);
}

// `want` samples of `samples` repeated from the start (or cut); samples must not be empty.
inline std::vector<float> tile_audio(const std::vector<float>& samples, size_t want) {
  std::vector<float> tiled(want);
  for (size_t i = 0; i < want; ++i) tiled[i] = samples[i % samples.size()];
  return tiled;
}

// A markdown table: text columns left-aligned, numbers right-aligned with the column's decimals.
struct Column {
  const char* name;
  int width;
  int decimals = 0;
  bool text = false;
};
using Cell = std::variant<std::string, double, int64_t>;

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  void header() const {
    std::string names = "|", rule = "|";
    for (const Column& c : columns_) {
      names += format(c, std::string(c.name)) + "|";
      rule += std::string(static_cast<size_t>(c.width) + 2, '-') + "|";
    }
    std::printf("%s\n%s\n", names.c_str(), rule.c_str());
  }

  void row(const std::vector<Cell>& cells) const {
    std::string line = "|";
    for (size_t i = 0; i < columns_.size() && i < cells.size(); ++i) {
      const Column& c = columns_[i];
      std::visit([&](const auto& v) { line += format(c, v) + "|"; }, cells[i]);
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  static std::string format(const Column& c, const std::string& s) {
    const std::string pad(s.size() < static_cast<size_t>(c.width) ? static_cast<size_t>(c.width) - s.size() : 0, ' ');
    return " " + (c.text ? s + pad : pad + s) + " ";
  }
  static std::string format(const Column& c, double v) { return printf_string(" %*.*f ", c.width, c.decimals, v); }
  static std::string format(const Column& c, int64_t v) {
    return printf_string(" %*lld ", c.width, static_cast<long long>(v));
  }
  template <typename... T>
  static std::string printf_string(const char* fmt, T... args) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof buf, fmt, args...);
    return std::string(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  }

  std::vector<Column> columns_;
};

}  // namespace vrun::bench
