// Audio files (WAV, FLAC, OGG/Vorbis, MP3, ...) through preprocess::load_audio, the loader the CLI
// runs on each input, resampling to 16 kHz as transcription does.
#include <cstdint>
#include <string_view>

#include "preprocess/audio_loader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto& s = fuzz::scratch();
  s.clear();
  const std::string path = s.write("input.audio", std::string_view(reinterpret_cast<const char*>(data), size));
  auto a = preprocess::load_audio(path);
  fuzz::require_message(a);
  if (a.is_ok() && a->samples.empty()) __builtin_trap();
  return 0;
}
