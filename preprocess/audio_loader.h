// Reads the audio users bring (WAV, FLAC, OGG/Vorbis, MP3 through libsndfile, or headerless PCM)
// and hands it over as mono float32 at the model's rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::preprocess {

// Headerless PCM has nothing to say what it is, so the caller must.
enum class RawEncoding { kS16, kS24, kS32, kU8, kF32, kF64 };
Result<RawEncoding> parse_raw_encoding(const std::string& name);  // "s16", "s24", "s32", "u8", "f32", "f64"

struct RawFormat {
  int sample_rate = 16000;
  int channels = 1;
  RawEncoding encoding = RawEncoding::kS16;
  bool big_endian = false;
};

struct LoadOptions {
  int target_rate = 16000;        // 0 keeps the file's own rate
  std::optional<RawFormat> raw;   // set for headerless PCM
};

struct AudioBuffer {
  std::vector<float> samples;  // mono
  int sample_rate = 0;
  int source_rate = 0;      // the file's rate before resampling
  int source_channels = 0;  // the file's channel count before the down-mix
  double duration_s() const { return sample_rate ? static_cast<double>(samples.size()) / sample_rate : 0.0; }
};

// `path` "-" reads standard input. Multi-channel audio is averaged to mono, then resampled with
// libsoxr (high quality) when the file's rate differs from target_rate. Errors name the file and
// what is wrong with it (empty, not audio, truncated, inconsistent header).
Result<AudioBuffer> load_audio(const std::string& path, const LoadOptions& options = {});
// Seconds of audio a file's header announces, read without decoding it (to order and size a job of
// many files); negative when the header does not say (not audio, unreadable, headerless, stdin).
double probe_duration_s(const std::string& path);
// The same from bytes already in memory; `name` is used in messages.
Result<AudioBuffer> load_audio_memory(const std::vector<uint8_t>& bytes, const std::string& name,
                                      const LoadOptions& options = {});

}  // namespace vrun::preprocess
