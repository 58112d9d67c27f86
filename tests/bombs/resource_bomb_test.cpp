// Each bomb runs in a forked child that measures its own peak resident memory (VmHWM after
// clearing it) and time, so a reader that allocates what a header claims shows up here as growth,
// or as the child dying, instead of as a slow machine.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "apps/common/tokenizer/gguf_metadata.h"
#include "models/gguf/gguf_file.h"
#include "models/parakeet/yaml_json.h"
#include "models/safetensors/safetensors_file.h"
#include "models/torch_ckpt/archive.h"
#include "preprocess/audio_loader.h"

namespace {

constexpr uint64_t kTB = uint64_t{1} << 40;
constexpr long kMaxGrowthKb = 100 * 1024;

struct Outcome {
  bool refused = false;
  std::string message;
  long growth_kb = -1;
  double seconds = 0;
};

long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  return -1;
}

// Runs `load` (which returns the error message, or "" when it loaded) in a child process.
Outcome run_bounded(const std::function<std::string()>& load) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    alarm(60);
    // Resets the peak (VmHWM) to the current resident size: growth from here is the load's.
    { std::ofstream("/proc/self/clear_refs") << "5"; }
    const long base = status_kb("VmRSS:");
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = load();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long growth = status_kb("VmHWM:") - base;
    const std::string out = std::to_string(growth) + " " + std::to_string(s) + " " + (msg.empty() ? "0" : "1") + msg;
    if (write(fd[1], out.data(), out.size()) != static_cast<ssize_t>(out.size())) _exit(3);
    close(fd[1]);
    _exit(0);
  }
  close(fd[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Outcome o;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    o.message = "child died (status " + std::to_string(status) + ")";
    return o;
  }
  long growth = 0;
  double secs = 0;
  int used = 0;
  if (std::sscanf(got.c_str(), "%ld %lf %n", &growth, &secs, &used) < 2) return o;
  o.growth_kb = growth;
  o.seconds = secs;
  o.refused = got[static_cast<size_t>(used)] == '1';
  o.message = got.substr(static_cast<size_t>(used) + 1);
  return o;
}

template <class R>
std::string message_of(const R& r) {
  if (r.is_ok()) return "";
  return r.status().message();
}

void expect_refused(const Outcome& o, std::initializer_list<const char*> words) {
  EXPECT_TRUE(o.refused) << "loaded, or the child failed: " << o.message;
  for (const char* w : words) EXPECT_NE(o.message.find(w), std::string::npos) << "message lacks '" << w << "': " << o.message;
  EXPECT_GE(o.growth_kb, 0);
  EXPECT_LT(o.growth_kb, kMaxGrowthKb) << o.message;
  EXPECT_LT(o.seconds, 10.0) << o.message;
}

class TempFile {
 public:
  TempFile(const std::string& name, const std::string& bytes) {
    path_ = (std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "-" + name)).string();
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
// Appends each value little-endian in its own width: one call a record.
template <typename... T>
void put_all(std::string& s, T... v) {
  (put<T>(s, v), ...);
}
void put_str(std::string& s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s += v;
}

// "GGUF", version 3, the counts; `body` follows, then padding so the file is not trivially short.
std::string gguf(uint64_t n_tensors, uint64_t n_kv, const std::string& body) {
  std::string s = "GGUF";
  put<uint32_t>(s, 3);
  put<uint64_t>(s, n_tensors);
  put<uint64_t>(s, n_kv);
  return s + body + std::string(4096, '\0');
}

TEST(ResourceBomb, GgufClaimingTwoToTheFortyTensors) {
  TempFile f("tensors.gguf", gguf(kTB, 0, ""));
  const Outcome o = run_bounded([&] { return message_of(vrun::gguf::File::open(f.path())); });
  expect_refused(o, {"1099511627776 tensors", f.path().c_str()});
}

TEST(ResourceBomb, GgufTerabyteString) {
  std::string body;
  put_str(body, "general.name");
  put<uint32_t>(body, 8);  // string
  put<uint64_t>(body, kTB);
  TempFile f("string.gguf", gguf(0, 1, body));
  const Outcome o = run_bounded([&] { return message_of(vrun::gguf::File::open(f.path())); });
  expect_refused(o, {"string of 1099511627776 bytes", "general.name"});
  // The tokenizer reads the same header with its own reader: from memory, and from the file,
  // where it reads more of the file when a claim runs past what it has read.
  const std::string bytes = gguf(0, 1, body);
  const Outcome m = run_bounded([&] { return message_of(vrun::tok::parse_gguf_metadata(bytes, "string.gguf", nullptr)); });
  expect_refused(m, {"string of 1099511627776 bytes", "general.name"});
  const Outcome r = run_bounded([&] { return message_of(vrun::tok::read_gguf_metadata(f.path())); });
  expect_refused(r, {"string of 1099511627776 bytes"});
}

TEST(ResourceBomb, GgufTwoToTheFortyElementArray) {
  for (uint32_t elem : {4u /* u32 */, 8u /* string */}) {
    std::string body;
    put_str(body, "tokenizer.ggml.tokens");
    put<uint32_t>(body, 9);  // array
    put<uint32_t>(body, elem);
    put<uint64_t>(body, kTB);
    TempFile f("array.gguf", gguf(0, 1, body));
    const Outcome o = run_bounded([&] { return message_of(vrun::gguf::File::open(f.path())); });
    expect_refused(o, {"tokenizer.ggml.tokens", "claims 1099511627776 elements"});
    const Outcome m = run_bounded([&] { return message_of(vrun::tok::read_gguf_metadata(f.path())); });
    expect_refused(m, {"tokenizer.ggml.tokens", "claims 1099511627776 elements"});
  }
  // A count the file's bytes could hold as single bytes but not as 8-byte string lengths.
  std::string body;
  put_str(body, "tokenizer.ggml.tokens");
  put<uint32_t>(body, 9);
  put<uint32_t>(body, 8);
  put<uint64_t>(body, 4000);
  const std::string bytes = gguf(0, 1, body);
  const Outcome m = run_bounded([&] { return message_of(vrun::tok::parse_gguf_metadata(bytes, "strings.gguf", nullptr)); });
  expect_refused(m, {"claims 4000 elements"});
}

TEST(ResourceBomb, SafetensorsHundredGigabyteHeader) {
  std::string s;
  put<uint64_t>(s, uint64_t{100} * 1000 * 1000 * 1000);
  s += "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  s += std::string(4096, ' ');
  TempFile f("big.safetensors", s);
  const Outcome o = run_bounded([&] { return message_of(vrun::safetensors::File::open(f.path())); });
  expect_refused(o, {"header length 100000000000 bytes", "limit"});
}

// A zip with one deflated entry: `inflated` zero bytes, compressed, with the sizes the central
// directory claims (claimed_usize; the real ones when 0).
std::string zip_of_zeros(const std::string& name, uint64_t inflated, uint64_t claimed_usize = 0) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  std::string comp(deflateBound(&zs, static_cast<uLong>(inflated)), '\0');
  const std::string zeros(1 << 20, '\0');
  zs.next_out = reinterpret_cast<Bytef*>(comp.data());
  zs.avail_out = static_cast<uInt>(comp.size());
  for (uint64_t left = inflated; left > 0;) {
    const size_t n = std::min<uint64_t>(left, zeros.size());
    left -= n;
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    zs.avail_in = static_cast<uInt>(n);
    deflate(&zs, left ? Z_NO_FLUSH : Z_FINISH);
  }
  comp.resize(zs.total_out);
  deflateEnd(&zs);
  const uint32_t usize = static_cast<uint32_t>(claimed_usize ? claimed_usize : inflated);
  std::string z;
  const uint32_t csize = static_cast<uint32_t>(comp.size());
  const uint16_t name_len = static_cast<uint16_t>(name.size());
  // Local header: signature, version 20, flags, deflate, time and date, crc (not checked), sizes,
  // name length, extra length.
  put_all(z, uint32_t{0x04034b50}, uint16_t{20}, uint16_t{0}, uint16_t{8}, uint32_t{0}, uint32_t{0}, csize, usize, name_len,
          uint16_t{0});
  z += name + comp;
  const uint32_t cd_off = static_cast<uint32_t>(z.size());
  // Central directory entry: signature, versions 20 and 20, flags, deflate, time and date, crc,
  // sizes, name length, extra, comment, disk, internal and external attributes, local header at 0.
  put_all(z, uint32_t{0x02014b50}, uint16_t{20}, uint16_t{20}, uint16_t{0}, uint16_t{8}, uint32_t{0}, uint32_t{0}, csize, usize,
          name_len, uint16_t{0}, uint16_t{0}, uint16_t{0}, uint16_t{0}, uint32_t{0}, uint32_t{0});
  z += name;
  const uint32_t cd_size = static_cast<uint32_t>(z.size() - cd_off);
  // End of central directory: signature, disks, one entry (on this disk and in all), its size and
  // offset, comment length.
  put_all(z, uint32_t{0x06054b50}, uint16_t{0}, uint16_t{0}, uint16_t{1}, uint16_t{1}, cd_size, cd_off, uint16_t{0});
  return z;
}

Outcome read_zip_bounded(const std::string& zip, const vrun::torch_ckpt::ZipLimits& limits) {
  return run_bounded([&] {
    std::vector<std::shared_ptr<std::string>> inflated;
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(zip.data()), zip.size());
    return message_of(vrun::torch_ckpt::read_zip(bytes, "bomb.ckpt", &inflated, limits));
  });
}

TEST(ResourceBomb, ZipInflatingThousandToOnePastTheLimit) {
  // 256 MiB of zeros deflate to about 250 KiB (1000:1); the limit is 32 MiB.
  const std::string zip = zip_of_zeros("archive/data.pkl", uint64_t{256} << 20);
  ASSERT_LT(zip.size(), size_t{1} << 20);
  vrun::torch_ckpt::ZipLimits limits;
  limits.max_inflated = uint64_t{32} << 20;
  expect_refused(read_zip_bounded(zip, limits), {"archive/data.pkl", "256.0 MiB", "32.0 MiB limit"});
  // The same entry with its directory claiming only 1 MiB: inflating stops at the claim.
  const std::string liar = zip_of_zeros("archive/data.pkl", uint64_t{256} << 20, uint64_t{1} << 20);
  expect_refused(read_zip_bounded(liar, {}), {"archive/data.pkl", "inflates past"});
  // A directory claiming 100 GB from a few hundred KiB is past deflate's own ratio.
  const std::string claim = zip_of_zeros("archive/data.pkl", uint64_t{256} << 20, 0xFFFFFFF0u);
  expect_refused(read_zip_bounded(claim, {}), {"archive/data.pkl", "compression bomb"});
}

TEST(ResourceBomb, GzipInflatingPastItsBound) {
  // A .nemo's gzip layer: 256 MiB of zeros, read with a 16 MiB bound, stops at the bound.
  std::string gz(1 << 20, '\0');
  {
    z_stream zs{};
    deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
    const std::string zeros(1 << 20, '\0');
    zs.next_out = reinterpret_cast<Bytef*>(gz.data());
    zs.avail_out = static_cast<uInt>(gz.size());
    for (int i = 0; i < 256; ++i) {
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      zs.avail_in = static_cast<uInt>(zeros.size());
      deflate(&zs, i == 255 ? Z_FINISH : Z_NO_FLUSH);
    }
    gz.resize(zs.total_out);
    deflateEnd(&zs);
  }
  const Outcome o = run_bounded([&] {
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(gz.data()), gz.size());
    return message_of(vrun::torch_ckpt::gunzip(bytes, "bomb.nemo", uint64_t{16} << 20));
  });
  expect_refused(o, {"bomb.nemo", "inflates past 16.0 MiB"});
}

// The rest of a WAV after "fmt ": 16-bit mono PCM at 16 kHz, a data chunk claiming data_size
// bytes, and 400 real samples.
void put_fmt_and_data(std::string& s, uint32_t data_size) {
  // fmt chunk size, PCM, one channel, rate, bytes per second, block align, bits.
  put_all(s, uint32_t{16}, uint16_t{1}, uint16_t{1}, uint32_t{16000}, uint32_t{32000}, uint16_t{2}, uint16_t{16});
  s += "data";
  put<uint32_t>(s, data_size);
  for (int i = 0; i < 400; ++i) put<int16_t>(s, static_cast<int16_t>((i % 50) * 300));
}

// RF64 (64-bit sizes): a data chunk and sample count claiming 10^12 frames of 16-bit mono over a
// few hundred real bytes.
std::string rf64_claiming(uint64_t frames) {
  std::string s = "RF64";
  put<uint32_t>(s, 0xFFFFFFFF);
  s += "WAVE";
  s += "ds64";
  put<uint32_t>(s, 28);
  put<uint64_t>(s, 36 + frames * 2);  // riff size
  put<uint64_t>(s, frames * 2);       // data size
  put<uint64_t>(s, frames);           // sample count
  put<uint32_t>(s, 0);                // table length
  s += "fmt ";
  put_fmt_and_data(s, 0xFFFFFFFF);
  return s;
}

// A plain RIFF WAV whose data chunk claims the most a 32-bit size can (2^31 frames of 16 bits).
std::string wav_claiming_4g() {
  std::string s = "RIFF";
  put<uint32_t>(s, 0xFFFFFFF0u);
  s += "WAVEfmt ";
  put_fmt_and_data(s, 0xFFFFFFE0u);
  return s;
}

TEST(ResourceBomb, WavClaimingTenToTheTwelveFrames) {
  TempFile f("frames.wav", rf64_claiming(1000000000000ull));
  const Outcome o = run_bounded([&] { return message_of(vrun::preprocess::load_audio(f.path())); });
  expect_refused(o, {f.path().c_str(), "1000000000000 frames"});
  // The same bytes from memory (standard input takes this path).
  const std::string bytes = rf64_claiming(1000000000000ull);
  const Outcome m = run_bounded([&] {
    return message_of(vrun::preprocess::load_audio_memory(std::vector<uint8_t>(bytes.begin(), bytes.end()), "<stdin>"));
  });
  expect_refused(m, {"<stdin>", "1000000000000 frames"});
  TempFile g("4g.wav", wav_claiming_4g());
  const Outcome w = run_bounded([&] { return message_of(vrun::preprocess::load_audio(g.path())); });
  EXPECT_LT(w.growth_kb, kMaxGrowthKb) << w.message;
}

TEST(ResourceBomb, YamlBillionLaughs) {
  std::string y = "a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n";
  for (int i = 1; i < 10; ++i) {
    y += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) y += std::string(k ? ", " : "") + "*a" + std::to_string(i - 1);
    y += "]\n";
  }
  const Outcome o = run_bounded([&] { return message_of(vrun::parakeet::parse_yaml(y, "model_config.yaml")); });
  expect_refused(o, {"model_config.yaml", "aliases"});
}

}  // namespace
