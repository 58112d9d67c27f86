// `vrun transcribe`: speech to text with a Whisper or a NeMo Parakeet model (the checkpoint decides).
// Several audio files share one model load; segments are printed as they are decoded; -o writes transcript files; a progress line
// on stderr for audio longer than one window; stats at the end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "apps/cli/command.h"
#include "apps/cli/vad_hook.h"
#include "apps/cli/model_options.h"

#if VRUN_WHISPER && VRUN_PREPROCESS
#include "apps/common/transcript/writers.h"
#include "apps/speech/speech_recognizer.h"
#include "preprocess/audio_loader.h"
#include "runtime/base/strings.h"

namespace vrun::cli {
namespace {

struct TranscribeArgs {
  std::string model, formats, output_dir = ".", raw_encoding = "s16";
  int raw_rate = 0, raw_channels = 1;
  std::vector<std::string> audio;
  bool no_timestamps = false;
  int batch_size = 1;
  std::string attention = "full";
  BackendArgs run;
  std::string language = "auto", task = "transcribe", prompt;
  int beam_size = 1, best_of = 5;
  double patience = 1.0, length_penalty = 1.0, temperature = 0.0, temperature_increment = 0.2;
  double compression_ratio_threshold = 2.4, logprob_threshold = -1.0, no_speech_threshold = 0.6;
  uint64_t seed = 0;
  bool no_fallback = false, no_condition = false, word_timestamps = false, progress = false;
  bool vad = false;
  std::string vad_model;
};

// Everything that can be checked without the model, so a bad command fails before the load: option
// ranges (the message names the option and what it accepts), inputs that exist and are readable, an output
// folder that takes a file, and transcript names that do not collide. Two inputs with the same file stem
// would write the same transcript, so they are refused, naming both.
Status validate_transcribe(const TranscribeArgs& a, const std::vector<std::string>& formats) {
  const auto range = [](const char* option, const std::string& accepted, double got) {
    std::ostringstream os;
    os << got;
    return err(ErrorCode::kInvalidArgument, option, " must be ", accepted, ", got ", os.str());
  };
  if (a.raw_rate < 0) return range("--rate", "> 0", a.raw_rate);  // 0, the default, reads file headers
  if (a.raw_channels < 1 || a.raw_channels > 64) return range("--channels", "in 1..64", a.raw_channels);
  if (a.beam_size < 1) return range("--beam-size", ">= 1", a.beam_size);
  if (a.best_of < 1) return range("--best-of", ">= 1", a.best_of);
  if (a.batch_size < 1) return range("--batch-size", ">= 1", a.batch_size);
  if (!(a.temperature >= 0 && a.temperature <= 1)) return range("--temperature", "in [0, 1]", a.temperature);
  if (!(a.temperature_increment > 0)) return range("--temperature-increment", "> 0", a.temperature_increment);
  if (!(a.patience > 0)) return range("--patience", "> 0", a.patience);
  if (a.run.threads < 0) return range("-t/--threads", ">= 0", a.run.threads);
  if (a.attention != "full" && a.attention != "local")
    return err(ErrorCode::kInvalidArgument, "--attention must be full or local, got '", a.attention, "'");
  if (a.task != "transcribe" && a.task != "translate")
    return err(ErrorCode::kInvalidArgument, "--task must be transcribe or translate, got '", a.task, "'");
  if (a.audio.empty()) return err(ErrorCode::kInvalidArgument, "no audio given");
  std::map<std::string, std::string> by_stem;
  // Inputs that cannot be read are named now, before the load. When some inputs are fine the run
  // goes on without the bad ones (each fails alone and the exit status says so); when none is, it
  // stops here.
  Status first_bad = Status::ok();
  size_t bad = 0;
  for (const auto& path : a.audio) {
    if (path == "-") continue;
    std::error_code ec;
    Status s = Status::ok();
    if (!std::filesystem::is_regular_file(path, ec))
      s = err(ErrorCode::kNotFound, path, ": ", std::filesystem::exists(path, ec) ? "not a file" : "no such file");
    else if (access(path.c_str(), R_OK) != 0)
      s = err(ErrorCode::kIo, path, ": not readable");
    if (s.is_ok()) continue;
    if (bad++ == 0) first_bad = s;
    if (a.audio.size() > 1) std::fprintf(stderr, "vrun transcribe: %s (skipped)\n", s.message().c_str());
  }
  if (bad == a.audio.size()) return first_bad;
  if (!formats.empty()) {
    for (const auto& path : a.audio) {
      const std::string stem = path == "-" ? "stdin" : std::filesystem::path(path).stem().string();
      auto [it, fresh] = by_stem.emplace(stem, path);
      if (!fresh)
        return err(ErrorCode::kInvalidArgument, it->second, " and ", path, " would both write ", stem,
                   ".* under --output-dir; transcribe them in separate runs or rename one");
    }
    std::error_code ec;
    std::filesystem::create_directories(a.output_dir, ec);
    const std::string probe = (std::filesystem::path(a.output_dir) / (".vrun-write-test-" + std::to_string(getpid()))).string();
    std::FILE* f = std::fopen(probe.c_str(), "wb");
    if (!f) return err(ErrorCode::kIo, "--output-dir ", a.output_dir, ": not writable");
    std::fclose(f);
    std::remove(probe.c_str());
  }
  return Status::ok();
}

// Writes a file whole or not at all: a temporary file in the same folder, then a rename over the name.
Status write_atomically(const std::string& out, const std::string& text) {
  const std::string tmp = out + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream o(tmp, std::ios::binary);
    if (!o || !(o << text) || !o.flush()) {
      std::remove(tmp.c_str());
      return err(ErrorCode::kIo, out, ": cannot write");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return err(ErrorCode::kIo, out, ": cannot write (", ec.message(), ")");
  }
  return Status::ok();
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The command line's decoding options, for whichever family the model is.
speech::Options speech_options(const TranscribeArgs& a) {
  speech::Options o;
  whisper::TranscribeOptions& w = o.whisper;
  w.timestamps = !a.no_timestamps;
  w.language = a.language;
  w.task = a.task;
  w.beam_size = a.beam_size;
  w.best_of = a.best_of;
  w.patience = a.patience;
  w.length_penalty = a.length_penalty;
  w.seed = a.seed;
  w.temperatures = {a.temperature};
  // openai-whisper's CLI: the start temperature, then steps of the increment up to 1.0.
  if (!a.no_fallback)
    for (double t = a.temperature + a.temperature_increment; t <= 1.0 + 1e-6; t += a.temperature_increment) w.temperatures.push_back(t);
  w.compression_ratio_threshold = a.compression_ratio_threshold;
  w.logprob_threshold = a.logprob_threshold;
  w.no_speech_threshold = a.no_speech_threshold;
  w.condition_on_previous_text = !a.no_condition;
  w.initial_prompt = a.prompt;
  w.word_timestamps = a.word_timestamps;
  o.local_attention = a.attention == "local";
  return o;
}

// The model through the speech interface (its family found once), its notes, and what the options
// ask of it checked before any audio is read.
Result<std::unique_ptr<speech::Recognizer>> load_recognizer(const TranscribeArgs& a, BackendKind backend, const speech::Options& o) {
  const auto t0 = Clock::now();
  bool sampling = false;
  for (double t : o.whisper.temperatures) sampling = sampling || t > 0;
  speech::LoadOptions lo;
  lo.backend = backend;
  lo.threads = a.run.threads;
  lo.decode_batch = std::max(a.beam_size, sampling ? a.best_of : 1);
  VRUN_ASSIGN_OR_RETURN(auto r, speech::load(a.model, lo));
  for (const auto& note : r->notes()) std::fprintf(stderr, "vrun: %s\n", note.c_str());
  std::vector<std::string> ignored;
  VRUN_RETURN_IF_ERROR(r->check(o, &ignored));
  if (a.batch_size > 1 && r->family() != "parakeet")
    ignored.push_back("--batch-size applies to Parakeet models; Whisper transcribes the files one after another");
  for (const auto& w : ignored) std::fprintf(stderr, "vrun: %s\n", w.c_str());
  std::fprintf(stderr, "vrun: loaded %s in %.2f s on %s\n", a.model.c_str(), seconds_since(t0), r->device_description().c_str());
  return r;
}

// What a finished file leaves: its segments on stdout (as they come), a stats line, transcript files.
class Output {
 public:
  Output(const TranscribeArgs& a, std::vector<std::string> formats) : a_(a), formats_(std::move(formats)) {}

  void segment(const transcript::Segment& s) const {
    if (!a_.no_timestamps)
      std::printf("[%s --> %s] %s\n", transcript::format_timestamp(s.start).c_str(), transcript::format_timestamp(s.end).c_str(),
                  s.text.c_str());
    else
      std::printf("%s\n", s.text.c_str());
    std::fflush(stdout);
  }

  // Stats line and transcript files of one file; false when a file cannot be written.
  bool finish(const std::string& path, const transcript::Transcript& t, double wall) const {
    const auto& st = t.stats;
    if (t.language_probability < 1.0)
      std::fprintf(stderr, "vrun: %s: detected language %s (p = %.2f)\n", path.c_str(), t.language.c_str(), t.language_probability);
    char words[48] = "";
    if (a_.word_timestamps) std::snprintf(words, sizeof words, ", words %.2f s", st.align_s);
    std::fprintf(stderr, "vrun: %s: audio %.2f s, wall %.2f s, RTFx %.1f (mel %.2f s, encode %.2f s, decode %.2f s%s; %d windows, %d tokens)\n",
                 path.c_str(), st.audio_s, wall, wall > 0 ? st.audio_s / wall : 0.0, st.features_s, st.encode_s, st.decode_s, words,
                 st.windows, st.tokens);
    const std::string stem = path == "-" ? "stdin" : std::filesystem::path(path).stem().string();
    for (const auto& f : formats_) {
      auto text = transcript::render_transcript(t, f, path);
      if (!text.is_ok()) {
        std::fprintf(stderr, "vrun transcribe: %s\n", text.status().message().c_str());
        return false;
      }
      std::error_code ec;
      std::filesystem::create_directories(a_.output_dir, ec);
      const std::string out = (std::filesystem::path(a_.output_dir) / (stem + "." + f)).string();
      if (auto s = write_atomically(out, *text); !s.is_ok()) {
        std::fprintf(stderr, "vrun transcribe: %s\n", s.message().c_str());
        return false;
      }
      std::fprintf(stderr, "vrun: wrote %s\n", out.c_str());
    }
    return true;
  }

 private:
  const TranscribeArgs& a_;
  std::vector<std::string> formats_;
};

// Groups of --batch-size files (Parakeet): their encoder chunks share batched encoder calls, then
// each file is printed in turn, the same as alone. Returns the number of files that failed, or -1
// when a transcript could not be written.
int transcribe_in_groups(const TranscribeArgs& a, speech::Recognizer& r, const speech::Options& o, const preprocess::LoadOptions& load,
                         const Output& out) {
  int failures = 0;
  for (size_t g = 0; g < a.audio.size(); g += static_cast<size_t>(a.batch_size)) {
    const auto t0 = Clock::now();
    std::vector<std::string> paths;
    std::vector<std::vector<float>> samples;
    for (size_t k = g; k < std::min(a.audio.size(), g + static_cast<size_t>(a.batch_size)); ++k) {
      auto audio = preprocess::load_audio(a.audio[k], load);
      if (!audio.is_ok()) {
        std::fprintf(stderr, "vrun transcribe: %s\n", audio.status().message().c_str());
        ++failures;
        continue;
      }
      paths.push_back(a.audio[k]);
      samples.push_back(std::move(audio->samples));
    }
    if (paths.empty()) continue;
    std::vector<std::span<const float>> spans(samples.begin(), samples.end());
    auto ts = r.transcribe_many(spans, o);
    if (!ts.is_ok()) {
      for (const auto& p : paths) std::fprintf(stderr, "vrun transcribe: %s: %s\n", p.c_str(), ts.status().message().c_str());
      failures += static_cast<int>(paths.size());
      continue;
    }
    const double wall = seconds_since(t0);
    std::fprintf(stderr, "vrun: %zu files in %.2f s\n", paths.size(), wall);
    double total_audio = 0;
    for (const auto& t : *ts) total_audio += t.stats.audio_s;
    for (size_t k = 0; k < paths.size(); ++k) {
      if (a.audio.size() > 1) std::printf("# %s\n", paths[k].c_str());
      for (const auto& seg : (*ts)[k].segments) out.segment(seg);
      // The group's wall time, shared by audio length (the encoder calls served all files).
      const double share = total_audio > 0 ? (*ts)[k].stats.audio_s / total_audio : 1.0 / static_cast<double>(paths.size());
      if (!out.finish(paths[k], (*ts)[k], wall * share)) return -1;
    }
  }
  return failures;
}

// One file: --vad's cut, a progress line for audio over 30 s, segments as they come. False with
// *fatal set when the run must stop (a VAD model that does not load, a transcript not written).
bool transcribe_file(const TranscribeArgs& a, const std::string& path, speech::Recognizer& r, const speech::Options& o,
                     const preprocess::LoadOptions& load, const Output& out, bool* fatal) {
  const auto t0 = Clock::now();
  auto audio = preprocess::load_audio(path, load);
  if (!audio.is_ok()) {
    std::fprintf(stderr, "vrun transcribe: %s\n", audio.status().message().c_str());
    return false;
  }
  if (a.audio.size() > 1) std::printf("# %s\n", path.c_str());
  SpeechOnly speech;  // --vad: the speech alone, and how its times map back
  if (a.vad) {
    auto cut = keep_speech(audio->samples, a.vad_model);
    if (!cut.is_ok()) {
      fail("transcribe", cut.status().to_string());
      *fatal = true;
      return false;
    }
    std::fprintf(stderr, "vrun: %s: --vad kept %zu spans, %.1f s of %.1f s\n", path.c_str(), cut->spans.size(),
                 static_cast<double>(cut->samples.size()) / 16000.0, static_cast<double>(audio->samples.size()) / 16000.0);
    speech = std::move(*cut);
    audio->samples = speech.samples;
  }
  const double audio_s = static_cast<double>(audio->samples.size()) / 16000.0;
  const bool tty = isatty(STDERR_FILENO) != 0;
  const bool show_progress = (a.progress || tty) && audio_s > 30.0;
  bool progress_shown = false;
  auto progress = [&](double done_s) {
    if (!show_progress) return;
    const double wall = seconds_since(t0);
    // On a terminal one line rewritten in place; elsewhere (--progress into a file) a line each.
    std::fprintf(stderr, tty ? "\rvrun: %5.1f%% of %.1f s, RTFx %.1f " : "vrun: %5.1f%% of %.1f s, RTFx %.1f\n",
                 100.0 * std::min(1.0, done_s / audio_s), audio_s, wall > 0 ? done_s / wall : 0.0);
    std::fflush(stderr);
    progress_shown = true;
  };
  auto transcript = r.transcribe(audio->samples, o, [&](const transcript::Segment& s) {
    if (progress_shown && tty) std::fputs("\r\033[K", stderr);  // the segment takes the progress line's place
    transcript::Segment mapped = s;
    if (a.vad) map_to_original(&mapped, speech.map);
    out.segment(mapped);
  }, progress);
  if (progress_shown && tty) std::fputc('\n', stderr);
  if (!transcript.is_ok()) {
    std::fprintf(stderr, "vrun transcribe: %s: %s\n", path.c_str(), transcript.status().message().c_str());
    return false;
  }
  if (a.vad)
    for (auto& seg : transcript->segments) map_to_original(&seg, speech.map);
  if (!out.finish(path, *transcript, seconds_since(t0))) {
    *fatal = true;
    return false;
  }
  return true;
}

int run_transcribe(const TranscribeArgs& a) {
  auto backend = parse_backend_kind(a.run.backend);
  if (!backend.is_ok()) return fail("transcribe", backend.status().message());
  const std::vector<std::string> formats = split_nonempty(a.formats, ',');
  for (const auto& f : formats)
    if (f != "txt" && f != "srt" && f != "vtt" && f != "tsv" && f != "json")
      return fail("transcribe", "-o: unknown format '" + f + "' (txt, srt, vtt, tsv, json)");
  if (auto st = validate_transcribe(a, formats); !st.is_ok()) return fail("transcribe", st.message());
  preprocess::LoadOptions load;
  if (a.raw_rate > 0) {
    auto enc = preprocess::parse_raw_encoding(a.raw_encoding);
    if (!enc) return fail("transcribe", enc.status().message());
    load.raw = preprocess::RawFormat{a.raw_rate, a.raw_channels, *enc, false};
  }
  const speech::Options o = speech_options(a);
  auto r = load_recognizer(a, *backend, o);
  if (!r.is_ok()) return fail("transcribe", r.status().message());
  const Output out(a, formats);
  if ((*r)->family() == "parakeet" && a.batch_size > 1 && !a.vad) {
    const int failures = transcribe_in_groups(a, **r, o, load, out);
    return failures == 0 ? 0 : 1;
  }
  int failures = 0;
  for (const auto& path : a.audio) {
    bool fatal = false;
    if (!transcribe_file(a, path, **r, o, load, out, &fatal)) {
      if (fatal) return 1;
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

const CommandRegistrar kRegistrar("transcribe", "Transcribe speech with a Whisper or Parakeet model", [](CLI::App& sub) {
  auto a = std::make_shared<TranscribeArgs>();
  sub.footer(
      "Decoding follows openai-whisper's transcribe() as faster-whisper runs it: 30-s windows, greedy at\n"
      "temperature 0 (--beam-size N for beam search), and when a window's text is too repetitive\n"
      "(--compression-ratio-threshold) or too improbable (--logprob-threshold) it is decoded again by\n"
      "sampling --best-of candidates at the next temperature (0.2, 0.4, ... 1.0; --no-fallback: never).\n"
      "Windows with a high no-speech probability and a low log-probability are skipped as silence.\n"
      "Each window is conditioned on the text before it (--no-condition: each window alone), the\n"
      "first on --prompt. The default is greedy (faster-whisper's own default is --beam-size 5).\n"
      "Parakeet (NeMo FastConformer TDT/CTC) models decode greedily as NeMo does, with word times;\n"
      "the Whisper decoding options do not apply to them.\n"
      "The command is checked before the model loads: option ranges, that every input exists and is\n"
      "readable, that --output-dir takes a file, and that no two inputs write the same transcript\n"
      "(inputs with the same file name are refused, naming both). Transcripts are written whole or not at\n"
      "all (a temporary file, then a rename). See docs/archive.md.\n"
      "Examples:\n"
      "  vrun transcribe -m ~/.cache/vrun/models/whisper-tiny.en talk.wav\n"
      "  vrun transcribe -m MODEL -o srt,json --output-dir out --word-timestamps a.wav b.flac\n"
      "  vrun transcribe -m MODEL --beam-size 5 -l de --task translate interview.mp3\n"
      "  ffmpeg -i video.mkv -f s16le -ar 16000 -ac 1 - | vrun transcribe -m MODEL --rate 16000 -");
  sub.add_option("-m,--model", a->model,
                 "Whisper model (faster-whisper / CTranslate2 folder, Hugging Face folder, whisper.cpp ggml-*.bin), "
                 "Parakeet model (.nemo archive or Hugging Face ParakeetForTDT/CTC folder), or a .vrp exported from one")
      ->required();
  sub.add_option("audio", a->audio, "Audio files (WAV, FLAC, OGG, MP3; any rate and channel count), '-' for standard input")
      ->required();
  sub.add_option("-l,--language", a->language,
                 "Spoken language code (en, de, fr, ...); auto: detected from the first 30 s (multilingual models). English-only "
                 "(.en) models accept only en")
      ->capture_default_str();
  sub.add_option("--task", a->task, "transcribe, or translate (into English; multilingual models)")
      ->check(CLI::IsMember({"transcribe", "translate"}))
      ->capture_default_str();
  sub.add_flag("--no-timestamps", a->no_timestamps, "Decode without timestamp tokens and print text only (one segment per window)");
  sub.add_flag("--word-timestamps", a->word_timestamps,
               "Times for every word (cross-attention alignment); also tightens segment bounds; json gets a words list");
  sub.add_option("--beam-size", a->beam_size, "Beam search width at temperature 0; 1 = greedy")->capture_default_str();
  sub.add_option("--best-of", a->best_of, "Candidates sampled at each fallback temperature; the most probable wins")->capture_default_str();
  sub.add_option("--patience", a->patience, "Beam search stops after beam-size x patience finished hypotheses")->capture_default_str();
  sub.add_option("--length-penalty", a->length_penalty, "Hypotheses are ranked by log-probability / length^this")->capture_default_str();
  sub.add_option("--temperature", a->temperature, "First decoding temperature (0 = greedy or beam search)")->capture_default_str();
  sub.add_option("--temperature-increment", a->temperature_increment, "Step between fallback temperatures, up to 1.0")
      ->capture_default_str();
  sub.add_flag("--no-fallback", a->no_fallback, "Decode each window once, at --temperature");
  sub.add_option("--seed", a->seed, "Random seed of sampling (temperature > 0)")->capture_default_str();
  sub.add_option("--compression-ratio-threshold", a->compression_ratio_threshold,
                 "Fall back when the text's zlib compression ratio is above this (repetition); <= 0: never")
      ->capture_default_str();
  sub.add_option("--logprob-threshold", a->logprob_threshold, "Fall back when the average token log-probability is below this")
      ->capture_default_str();
  sub.add_option("--no-speech-threshold", a->no_speech_threshold,
                 "Skip a window as silence when its no-speech probability is above this and the log-probability is low; < 0: never")
      ->capture_default_str();
  sub.add_flag("--no-condition", a->no_condition, "Do not feed the previous window's text to the next one (less drift, less consistency)");
  sub.add_option("--prompt", a->prompt, "Text the first window is conditioned on (spellings, names, style)");
  sub.add_option("-o,--output-format", a->formats, "Comma-separated transcript files to write: txt, srt, vtt, tsv, json");
  sub.add_flag("--vad", a->vad,
               "Transcribe only the speech Silero VAD finds (threshold 0.5, min speech 250 ms, min silence 2 s, "
               "padding 400 ms); times stay those of the whole audio");
  sub.add_option("--vad-model", a->vad_model,
                 "Silero VAD .onnx (default: the cache's, from scripts/fetch-models.sh silero-vad)");
  sub.add_option("--output-dir", a->output_dir, "Where -o writes (default: the current directory)");
  sub.add_flag("--progress", a->progress, "Show the progress line even when stderr is not a terminal (audio over 30 s)");
  sub.add_option("--rate", a->raw_rate, "Read every AUDIO as headerless PCM at this sample rate (Hz)");
  sub.add_option("--channels", a->raw_channels, "Headerless PCM: interleaved channel count")->capture_default_str();
  sub.add_option("--encoding", a->raw_encoding, "Headerless PCM sample type, little-endian")
      ->check(CLI::IsMember({"s16", "s24", "s32", "u8", "f32", "f64"}))
      ->capture_default_str();
  add_backend_options(sub, a->run);
  sub.add_option("--batch-size", a->batch_size,
                 "Parakeet: files encoded together (their 160-s chunks share batched encoder calls, up to the model's "
                 "batch of 4); each file's transcript is the same as alone")
      ->capture_default_str();
  sub.add_option("--attention", a->attention,
                 "Parakeet: full (every frame sees the whole file; audio over 160 s in overlapping chunks), or local "
                 "(NeMo's limited-context attention: each frame sees the frames within the window the model was exported "
                 "with, 128 = 10.24 s on either side by default; faster on long audio, up to 10 minutes per call; files "
                 "then go one at a time)")
      ->check(CLI::IsMember({"full", "local"}))
      ->capture_default_str();
  return [a] { return run_transcribe(*a); };
});

}  // namespace
}  // namespace vrun::cli
#endif
