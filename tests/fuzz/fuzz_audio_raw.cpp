// Headerless PCM (`--raw-format`): the first two bytes choose the encoding, byte order, channel
// count and sample rate; the rest are the samples.
#include <cstdint>
#include <string_view>

#include "preprocess/audio_loader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  if (size < 2) return 0;
  static constexpr preprocess::RawEncoding kEncodings[] = {
      preprocess::RawEncoding::kS16, preprocess::RawEncoding::kS24, preprocess::RawEncoding::kS32,
      preprocess::RawEncoding::kU8,  preprocess::RawEncoding::kF32, preprocess::RawEncoding::kF64};
  static constexpr int kRates[] = {16000, 8000, 44100, 48000, 22050, 1, 1000000, 0};
  preprocess::RawFormat raw;
  raw.encoding = kEncodings[data[0] % 6];
  raw.big_endian = data[0] & 0x80;
  raw.channels = (data[1] & 0x0f) + (data[0] & 0x40 ? 60 : 0);
  raw.sample_rate = kRates[(data[1] >> 4) & 7];
  preprocess::LoadOptions options;
  options.raw = raw;
  auto& s = fuzz::scratch();
  s.clear();
  const std::string path = s.write("input.pcm", std::string_view(reinterpret_cast<const char*>(data + 2), size - 2));
  auto a = preprocess::load_audio(path, options);
  fuzz::require_message(a);
  return 0;
}
