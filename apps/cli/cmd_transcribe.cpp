// `vrun transcribe`: speech to text with a Whisper model. Several audio files share one model
// load; segments are printed as they are decoded; -o writes transcript files.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli/command.h"

#if VRUN_WHISPER && VRUN_PREPROCESS
#include "apps/common/transcript/writers.h"
#include "apps/whisper/whisper_runner.h"
#include "preprocess/audio_loader.h"

namespace vrun::cli {
namespace {

struct TranscribeArgs {
  std::string model, backend = "auto", formats, output_dir = ".", raw_encoding = "s16";
  int raw_rate = 0, raw_channels = 1;
  std::vector<std::string> audio;
  bool no_timestamps = false;
  int threads = 0;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int run_transcribe(const TranscribeArgs& a) {
  using Clock = std::chrono::steady_clock;
  auto backend = parse_backend_kind(a.backend);
  if (!backend.is_ok()) return fail("transcribe", backend.status().message());
  const std::vector<std::string> formats = split_list(a.formats);
  for (const auto& f : formats)
    if (f != "txt" && f != "srt" && f != "vtt" && f != "json")
      return fail("transcribe", "-o: unknown format '" + f + "' (txt, srt, vtt, json)");
  const auto t_load = Clock::now();
  whisper::RunnerOptions ro;
  ro.backend = *backend;
  ro.threads = a.threads;
  auto runner = whisper::WhisperRunner::load(a.model, ro);
  if (!runner.is_ok()) return fail("transcribe", runner.status().message());
  for (const auto& note : (*runner)->notes()) std::fprintf(stderr, "vrun: %s\n", note.c_str());
  std::fprintf(stderr, "vrun: loaded %s in %.2f s on %s\n", a.model.c_str(),
               std::chrono::duration<double>(Clock::now() - t_load).count(), (*runner)->device_description().c_str());
  whisper::TranscribeOptions opts;
  opts.timestamps = !a.no_timestamps;
  preprocess::LoadOptions load;
  if (a.raw_rate > 0) {
    auto enc = preprocess::parse_raw_encoding(a.raw_encoding);
    if (!enc) return fail("transcribe", enc.status().message());
    load.raw = preprocess::RawFormat{a.raw_rate, a.raw_channels, *enc, false};
  }
  int failures = 0;
  for (const auto& path : a.audio) {
    const auto t0 = Clock::now();
    auto audio = preprocess::load_audio(path, load);
    if (!audio.is_ok()) {
      std::fprintf(stderr, "vrun transcribe: %s\n", audio.status().message().c_str());
      ++failures;
      continue;
    }
    if (a.audio.size() > 1) std::printf("# %s\n", path.c_str());
    auto transcript = (*runner)->transcribe(audio->samples, opts, [&](const whisper::Segment& s) {
      if (opts.timestamps)
        std::printf("[%s --> %s] %s\n", transcript::format_timestamp(s.start).c_str(), transcript::format_timestamp(s.end).c_str(),
                    s.text.c_str());
      else
        std::printf("%s\n", s.text.c_str());
      std::fflush(stdout);
    });
    if (!transcript.is_ok()) {
      std::fprintf(stderr, "vrun transcribe: %s: %s\n", path.c_str(), transcript.status().message().c_str());
      ++failures;
      continue;
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto& st = transcript->stats;
    std::fprintf(stderr, "vrun: %s: audio %.2f s, wall %.2f s, RTFx %.1f (mel %.2f s, encode %.2f s, decode %.2f s; %d windows, %d tokens)\n",
                 path.c_str(), st.audio_s, wall, wall > 0 ? st.audio_s / wall : 0.0, st.features_s, st.encode_s, st.decode_s,
                 st.windows, st.tokens);
    const std::string stem = path == "-" ? "stdin" : std::filesystem::path(path).stem().string();
    for (const auto& f : formats) {
      auto text = transcript::render_transcript(*transcript, f, path);
      if (!text.is_ok()) return fail("transcribe", text.status().message());
      std::error_code ec;
      std::filesystem::create_directories(a.output_dir, ec);
      const std::string out = (std::filesystem::path(a.output_dir) / (stem + "." + f)).string();
      std::ofstream o(out, std::ios::binary);
      if (!o || !(o << *text)) return fail("transcribe", out + ": cannot write");
      std::fprintf(stderr, "vrun: wrote %s\n", out.c_str());
    }
  }
  return failures ? 1 : 0;
}

const CommandRegistrar kRegistrar("transcribe", "Transcribe speech with a Whisper model", [](CLI::App& sub) {
  auto a = std::make_shared<TranscribeArgs>();
  sub.add_option("-m,--model", a->model, "Whisper model: a faster-whisper / CTranslate2 folder (model.bin, config.json, tokenizer.json) or a .vrp")
      ->required();
  sub.add_option("audio", a->audio, "Audio files (WAV, FLAC, OGG, MP3; any rate and channel count), '-' for standard input")
      ->required();
  sub.add_flag("--no-timestamps", a->no_timestamps, "Decode without timestamp tokens and print text only");
  sub.add_option("-o,--output-format", a->formats, "Comma-separated transcript files to write: txt, srt, vtt, json");
  sub.add_option("--output-dir", a->output_dir, "Where -o writes (default: the current directory)");
  sub.add_option("--rate", a->raw_rate, "Read every AUDIO as headerless PCM at this sample rate (Hz)");
  sub.add_option("--channels", a->raw_channels, "Headerless PCM: interleaved channel count")->capture_default_str();
  sub.add_option("--encoding", a->raw_encoding, "Headerless PCM sample type, little-endian")
      ->check(CLI::IsMember({"s16", "s24", "s32", "u8", "f32", "f64"}))
      ->capture_default_str();
  sub.add_option("--backend", a->backend, "cpu, vulkan or auto")->capture_default_str();
  sub.add_option("-t,--threads", a->threads, "CPU threads (default: VRUN_THREADS or all)");
  return [a] { return run_transcribe(*a); };
});

}  // namespace
}  // namespace vrun::cli
#endif
