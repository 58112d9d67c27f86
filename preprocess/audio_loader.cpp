#include "preprocess/audio_loader.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>

#include "preprocess/resampler.h"

namespace vrun::preprocess {
namespace {

constexpr int kMaxChannels = 64;
constexpr int kMaxRate = 1'000'000;
constexpr sf_count_t kBlockFrames = 1 << 15;

// libsndfile virtual I/O over a byte vector (standard input is read fully first, since libsndfile
// needs to seek in most containers).
struct MemoryFile {
  const std::vector<uint8_t>* bytes;
  sf_count_t pos = 0;
};
sf_count_t mem_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes->size()); }
sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(f->bytes->size());
  sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->pos : size;
  f->pos = std::clamp<sf_count_t>(base + offset, 0, size);
  return f->pos;
}
sf_count_t mem_read(void* ptr, sf_count_t count, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::min<sf_count_t>(count, static_cast<sf_count_t>(f->bytes->size()) - f->pos);
  if (n <= 0) return 0;
  std::memcpy(ptr, f->bytes->data() + f->pos, static_cast<size_t>(n));
  f->pos += n;
  return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

int raw_subtype(RawEncoding e) {
  switch (e) {
    case RawEncoding::kS16: return SF_FORMAT_PCM_16;
    case RawEncoding::kS24: return SF_FORMAT_PCM_24;
    case RawEncoding::kS32: return SF_FORMAT_PCM_32;
    case RawEncoding::kU8: return SF_FORMAT_PCM_U8;
    case RawEncoding::kF32: return SF_FORMAT_FLOAT;
    case RawEncoding::kF64: return SF_FORMAT_DOUBLE;
  }
  return SF_FORMAT_PCM_16;
}

Status fill_raw_info(const RawFormat& raw, const std::string& name, SF_INFO& info) {
  if (raw.sample_rate <= 0 || raw.sample_rate > kMaxRate)
    return err(ErrorCode::kInvalidArgument, name, ": raw PCM sample rate ", raw.sample_rate, " Hz is out of range (1..", kMaxRate, ")");
  if (raw.channels <= 0 || raw.channels > kMaxChannels)
    return err(ErrorCode::kInvalidArgument, name, ": raw PCM channel count ", raw.channels, " is out of range (1..", kMaxChannels, ")");
  info.samplerate = raw.sample_rate;
  info.channels = raw.channels;
  info.format = SF_FORMAT_RAW | raw_subtype(raw.encoding) | (raw.big_endian ? SF_ENDIAN_BIG : SF_ENDIAN_LITTLE);
  return Status::ok();
}

// Decodes an opened SNDFILE, down-mixing and resampling block by block so the source-rate,
// multi-channel signal is never held whole.
// `source_bytes`: the size of the file or buffer (0 when unknown).
Result<AudioBuffer> decode(SNDFILE* sf, const SF_INFO& info, const std::string& name, const LoadOptions& options,
                           uint64_t source_bytes) {
  if (info.channels <= 0 || info.channels > kMaxChannels)
    return err(ErrorCode::kInvalidArgument, name, ": header declares ", info.channels, " channels (expected 1..", kMaxChannels, ")");
  if (info.samplerate <= 0 || info.samplerate > kMaxRate)
    return err(ErrorCode::kInvalidArgument, name, ": header declares a sample rate of ", info.samplerate, " Hz (expected 1..", kMaxRate, ")");
  // Reading with SFC_SET_SCALE_FLOAT_INT_READ would rescale float files; leave floats as stored.
  sf_command(sf, SFC_SET_NORM_FLOAT, nullptr, SF_TRUE);

  AudioBuffer out;
  out.source_rate = info.samplerate;
  out.source_channels = info.channels;
  out.sample_rate = options.target_rate > 0 ? options.target_rate : info.samplerate;
  std::optional<Resampler> resampler;
  if (out.sample_rate != info.samplerate) {
    VRUN_ASSIGN_OR_RETURN(Resampler r, Resampler::create(info.samplerate, out.sample_rate));
    resampler.emplace(std::move(r));
  }
  const bool known_length = info.frames > 0 && info.frames < (sf_count_t{1} << 40);
  if (known_length) {
    // The frame count comes from the header: it sizes the output only as far as the file's bytes
    // could back it (one byte a frame bounds every PCM encoding; compressed files grow past it).
    const double frames = std::min<double>(static_cast<double>(info.frames), source_bytes ? static_cast<double>(source_bytes) : 0.0);
    const double scale = static_cast<double>(out.sample_rate) / info.samplerate;
    out.samples.reserve(static_cast<size_t>(frames * scale) + 64);
  }
  std::vector<float> block(static_cast<size_t>(kBlockFrames * info.channels));
  std::vector<float> mono(static_cast<size_t>(kBlockFrames));
  sf_count_t total = 0;
  for (;;) {
    const sf_count_t got = sf_readf_float(sf, block.data(), kBlockFrames);
    if (got <= 0) break;
    total += got;
    std::span<const float> chunk;
    if (info.channels == 1) {
      chunk = std::span<const float>(block.data(), static_cast<size_t>(got));
    } else {
      const float inv = 1.0f / static_cast<float>(info.channels);
      for (sf_count_t i = 0; i < got; ++i) {
        float s = 0;
        for (int c = 0; c < info.channels; ++c) s += block[static_cast<size_t>(i * info.channels + c)];
        mono[static_cast<size_t>(i)] = s * inv;
      }
      chunk = std::span<const float>(mono.data(), static_cast<size_t>(got));
    }
    // Float files can hold NaN or infinity; one would spread through the resampler and every
    // feature frame near it, so it is reported rather than passed on.
    for (size_t i = 0; i < chunk.size(); ++i)
      if (!std::isfinite(chunk[i]))
        return err(ErrorCode::kInvalidArgument, name, ": sample ", total - got + static_cast<sf_count_t>(i),
                   " is not a finite number (corrupt float data)");
    if (resampler) {
      VRUN_RETURN_IF_ERROR(resampler->process(chunk, out.samples));
    } else {
      out.samples.insert(out.samples.end(), chunk.begin(), chunk.end());
    }
  }
  const int sf_err = sf_error(sf);
  if (sf_err != SF_ERR_NO_ERROR)
    return err(ErrorCode::kInvalidArgument, name, ": decoding failed after ", total, " frames: ", sf_error_number(sf_err));
  if (known_length && total < info.frames)
    return err(ErrorCode::kInvalidArgument, name, ": header declares ", info.frames, " frames but the data ends after ", total,
               " (truncated file?)");
  if (total == 0) return err(ErrorCode::kInvalidArgument, name, ": no audio frames could be decoded (empty, truncated or corrupt stream)");
  // libsndfile repairs a WAV whose data chunk claims more bytes than the file holds and only says
  // so in its log ("data : 176400 (should be 88178)"); such a file was cut short, and silently
  // decoding the rest would hide that. Streaming writers put 0 or 0xFFFFFFFF there on purpose.
  char log[8192] = {0};
  sf_command(sf, SFC_GET_LOG_INFO, log, sizeof(log));
  std::string complaints;
  for (const char* line = log; *line;) {
    const char* end = std::strchr(line, '\n');
    const std::string text(line, end ? static_cast<size_t>(end - line) : std::strlen(line));
    unsigned long long claimed = 0, actual = 0;
    if (std::sscanf(text.c_str(), "data : %llu (should be %llu)", &claimed, &actual) == 2 && claimed > actual &&
        claimed < 0xFFFFFFF0ull)
      complaints += (complaints.empty() ? "" : "; ") + text;
    // RF64's ds64 chunk carries a 64-bit frame count; libsndfile decodes what the data holds and
    // only logs the claim.
    if (std::sscanf(text.c_str(), " Frames : %llu", &claimed) == 1 && claimed > static_cast<unsigned long long>(total) &&
        claimed != ~0ull)
      complaints += (complaints.empty() ? "" : "; ") + ("header declares " + std::to_string(claimed) + " frames, the data holds " +
                                                        std::to_string(total));
    if (!end) break;
    line = end + 1;
  }
  if (!complaints.empty())
    return err(ErrorCode::kInvalidArgument, name, ": header and data disagree (truncated file?): ", complaints);
  if (resampler) VRUN_RETURN_IF_ERROR(resampler->flush(out.samples));
  if (out.samples.empty())
    return err(ErrorCode::kInvalidArgument, name, ": ", total, " frames at ", info.samplerate, " Hz are too short to give one sample at ",
               out.sample_rate, " Hz");
  return out;
}

Result<AudioBuffer> open_and_decode(SNDFILE* sf, const SF_INFO& info, const std::string& name, const LoadOptions& options,
                                    uint64_t source_bytes) {
  if (!sf) {
    return err(ErrorCode::kInvalidArgument, name, ": not a readable audio file (",
               options.raw ? "raw PCM: " : "expected WAV, FLAC, OGG/Vorbis or MP3; libsndfile: ", sf_strerror(nullptr), ")");
  }
  Result<AudioBuffer> result = decode(sf, info, name, options, source_bytes);
  sf_close(sf);
  return result;
}

}  // namespace

Result<RawEncoding> parse_raw_encoding(const std::string& name) {
  if (name == "s16") return RawEncoding::kS16;
  if (name == "s24") return RawEncoding::kS24;
  if (name == "s32") return RawEncoding::kS32;
  if (name == "u8") return RawEncoding::kU8;
  if (name == "f32") return RawEncoding::kF32;
  if (name == "f64") return RawEncoding::kF64;
  return err(ErrorCode::kInvalidArgument, "raw PCM encoding '", name, "' is not one of s16, s24, s32, u8, f32, f64");
}

Result<AudioBuffer> load_audio_memory(const std::vector<uint8_t>& bytes, const std::string& name, const LoadOptions& options) {
  if (bytes.empty()) return err(ErrorCode::kInvalidArgument, name, ": is empty (0 bytes)");
  SF_INFO info{};
  if (options.raw) VRUN_RETURN_IF_ERROR(fill_raw_info(*options.raw, name, info));
  MemoryFile mem{&bytes, 0};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SNDFILE* sf = sf_open_virtual(&io, SFM_READ, &info, &mem);
  return open_and_decode(sf, info, name, options, bytes.size());
}

Result<AudioBuffer> load_audio(const std::string& path, const LoadOptions& options) {
  if (path == "-") {
    std::vector<uint8_t> bytes;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    if (std::ferror(stdin)) return err(ErrorCode::kIo, "<stdin>: read failed");
    return load_audio_memory(bytes, "<stdin>", options);
  }
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return err(ErrorCode::kNotFound, path, ": no such file");
  if (std::filesystem::is_directory(status)) return err(ErrorCode::kInvalidArgument, path, ": is a directory, not an audio file");
  if (std::filesystem::is_regular_file(status) && std::filesystem::file_size(path, ec) == 0)
    return err(ErrorCode::kInvalidArgument, path, ": is empty (0 bytes)");
  SF_INFO info{};
  if (options.raw) VRUN_RETURN_IF_ERROR(fill_raw_info(*options.raw, path, info));
  SNDFILE* sf = sf_open(path.c_str(), SFM_READ, &info);
  const uint64_t size = std::filesystem::is_regular_file(status) ? std::filesystem::file_size(path, ec) : 0;
  return open_and_decode(sf, info, path, options, ec ? 0 : size);
}

double probe_duration_s(const std::string& path) {
  if (path == "-") return -1;
  SF_INFO info{};
  SNDFILE* sf = sf_open(path.c_str(), SFM_READ, &info);
  if (!sf) return -1;
  sf_close(sf);
  if (info.samplerate <= 0 || info.frames <= 0 || info.frames == SF_COUNT_MAX) return -1;
  return static_cast<double>(info.frames) / info.samplerate;
}

}  // namespace vrun::preprocess
