// `vrun transcribe`: speech to text with a Whisper or a NeMo Parakeet model (the checkpoint decides).
// Files, folders and lists of files make one job that shares one model load per worker; segments are
// printed as they are decoded; -o writes transcript files mirroring the inputs' tree; --summary,
// --resume, --shard and several workers (--workers, --devices) for archives; a progress line on
// stderr; stats at the end. The job's parts are in transcribe_job.h and transcribe_run.h.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/cli/command.h"
#include "apps/cli/model_options.h"

#if VRUN_WHISPER && VRUN_PREPROCESS
#include "apps/cli/transcribe_run.h"
#include "runtime/backend.h"
#include "runtime/base/strings.h"
#include "runtime/base/thread_pool.h"

namespace vrun::cli {
namespace {

Status range_error(const char* option, const std::string& accepted, double got) {
  return err(ErrorCode::kInvalidArgument, option, " must be ", accepted, ", got ", got);
}

// Option ranges, checked before anything is read: the message names the option and what it accepts.
Status validate_options(const TranscribeArgs& a, const std::vector<std::string>& formats) {
  if (a.raw.rate < 0) return range_error("--rate", "> 0", a.raw.rate);  // 0, the default, reads file headers
  if (a.raw.channels < 1 || a.raw.channels > 64) return range_error("--channels", "in 1..64", a.raw.channels);
  if (a.batch_size < 0) return range_error("--batch-size", ">= 0", a.batch_size);
  VRUN_RETURN_IF_ERROR(a.decoding.validate("--", '-'));
  if (a.run.threads < 0) return range_error("-t/--threads", ">= 0", a.run.threads);
  if (a.workers < 1) return range_error("--workers", ">= 1", a.workers);
  if (a.audio.empty() && a.input_list.empty()) return err(ErrorCode::kInvalidArgument, "no audio given (files, folders or --input-list)");
  if (a.resume && formats.empty() && a.summary.empty())
    return err(ErrorCode::kInvalidArgument, "--resume needs -o (the transcripts to look for) or --summary (the files recorded as done)");
  if (!a.devices.empty() && a.workers != 1)
    return err(ErrorCode::kInvalidArgument, "--devices and --workers exclude each other (--devices 0,0 runs two workers on device 0)");
  if (!a.devices.empty() && a.run.backend == "cpu")
    return err(ErrorCode::kInvalidArgument, "--devices picks Vulkan devices; with --backend cpu use --workers N");
  return Status::ok();
}

// The inputs that can be read are checked now, before the load. When some are fine the run goes on
// without the bad ones (each is recorded as failed when its turn comes and the exit status says so);
// when none is, it stops here. Then --output-dir must take a file.
Status validate_inputs(const TranscribeArgs& a, const std::vector<job::Input>& inputs, const std::vector<std::string>& formats) {
  Status first_bad = Status::ok();
  size_t bad = 0;
  for (const auto& in : inputs) {
    if (in.path == "-") continue;
    std::error_code ec;
    Status s = Status::ok();
    if (!std::filesystem::is_regular_file(in.path, ec))
      s = err(ErrorCode::kNotFound, in.path, ": ", std::filesystem::exists(in.path, ec) ? "not a file" : "no such file");
    else if (access(in.path.c_str(), R_OK) != 0)
      s = err(ErrorCode::kIo, in.path, ": not readable");
    if (s.is_ok()) continue;
    if (bad++ == 0) first_bad = s;
    if (inputs.size() > 1) std::fprintf(stderr, "vrun transcribe: %s (skipped)\n", s.message().c_str());
  }
  if (!inputs.empty() && bad == inputs.size()) return first_bad;
  if (!formats.empty()) {
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

// One worker: the Vulkan device it loads on (-1: the backend's choice) and its CPU threads.
struct WorkerSpec {
  int device = -1;
  int threads = 0;
};

// --devices all|0,1,... (one worker per entry, on Vulkan) or --workers N (N on the chosen backend).
// Without -t the CPU threads are shared out among the workers.
Result<std::vector<WorkerSpec>> worker_specs(const TranscribeArgs& a, BackendKind* backend) {
  std::vector<WorkerSpec> specs;
  if (!a.devices.empty()) {
    VRUN_ASSIGN_OR_RETURN(auto devices, parse_device_list("--devices", a.devices));
    for (int d : devices) specs.push_back({d, 0});
    *backend = BackendKind::kVulkan;
  } else {
    specs.resize(static_cast<size_t>(a.workers));
  }
  const int threads = a.run.threads > 0 ? a.run.threads
                      : specs.size() > 1 ? std::max(1, ThreadPool::default_size() / static_cast<int>(specs.size()))
                                         : 0;
  for (auto& s : specs) s.threads = threads;
  return specs;
}

// The model through the speech interface (its family found once), its notes, and what the options
// ask of it checked before any audio is read. `first`: the one whose notes are printed.
Result<std::unique_ptr<speech::Recognizer>> load_recognizer(const TranscribeArgs& a, BackendKind backend, const speech::Options& o,
                                                            const WorkerSpec& w, bool first) {
  const auto t0 = Clock::now();
  bool sampling = false;
  for (double t : o.whisper.temperatures) sampling = sampling || t > 0;
  speech::LoadOptions lo;
  lo.backend = backend;
  lo.threads = w.threads;
  lo.device = w.device;
  lo.decode_batch = std::max(a.decoding.beam_size, sampling ? a.decoding.best_of : 1);
  lo.streams = std::max(1, a.batch_size);  // Whisper: files (with --vad: a file's chunks) decoded together
  VRUN_ASSIGN_OR_RETURN(auto r, speech::load(a.model, lo));
  std::vector<std::string> ignored;
  VRUN_RETURN_IF_ERROR(r->check(o, &ignored));
  if (first) {
    for (const auto& note : r->notes()) std::fprintf(stderr, "vrun: %s\n", note.c_str());
    if (a.batch_size > 1 && r->batch() <= 1)
      ignored.push_back("--batch-size: " + a.model + " has no batched methods (a Whisper .vrp has them when exported " +
                        "with `vrun export --batch-size N`); the files go one after another");
    for (const auto& w : ignored) std::fprintf(stderr, "vrun: %s\n", w.c_str());
  }
  std::fprintf(stderr, "vrun: loaded %s in %.2f s on %s\n", a.model.c_str(), seconds_since(t0), r->device_description().c_str());
  return r;
}

// Every worker's model, loaded at the same time (each its own executor); the first error wins.
Result<std::vector<std::unique_ptr<speech::Recognizer>>> load_workers(const TranscribeArgs& a, BackendKind backend,
                                                                      const speech::Options& o, const std::vector<WorkerSpec>& specs) {
  std::vector<Result<std::unique_ptr<speech::Recognizer>>> loaded;
  for (size_t k = 0; k < specs.size(); ++k) loaded.emplace_back(err(ErrorCode::kInternal, "not loaded"));
  std::vector<std::thread> threads;
  for (size_t k = 0; k < specs.size(); ++k)
    threads.emplace_back([&, k] { loaded[k] = load_recognizer(a, backend, o, specs[k], k == 0); });
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<speech::Recognizer>> out;
  for (auto& r : loaded) {
    if (!r.is_ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

// --resume: the inputs whose transcripts all exist (with -o), or that the summary records as done
// (without -o), are skipped, each with a summary line saying so.
Result<std::vector<job::Input>> drop_done(Job& j, std::vector<job::Input> inputs) {
  std::set<std::string> done_before;
  if (!j.a.summary.empty()) {
    VRUN_ASSIGN_OR_RETURN(done_before, job::done_in_summary(j.a.summary));
  }
  std::vector<job::Input> todo;
  for (auto& in : inputs) {
    const auto outs = job::output_paths(in, j.a.output_dir, j.formats);
    std::error_code ec;
    const bool exist = !outs.empty() && std::all_of(outs.begin(), outs.end(), [&](const std::string& p) { return std::filesystem::is_regular_file(p, ec); });
    const bool done = j.formats.empty() ? done_before.count(in.path) > 0 : exist;
    if (!done) {
      todo.push_back(std::move(in));
      continue;
    }
    j.summary.write({in.path, in.id, outs, 0, 0, "skipped", "", j.formats.empty() ? "done in the summary" : "outputs exist"});
  }
  if (todo.size() < inputs.size())
    std::fprintf(stderr, "vrun: --resume: %zu of %zu inputs done already, skipped\n", inputs.size() - todo.size(), inputs.size());
  return todo;
}

// The job's inputs: expanded, named, this shard's, checked, and the ones --resume finds done left
// out; with more than one, their lengths read from the headers for the queue order and progress.
Result<std::vector<job::Input>> job_inputs(Job& j) {
  VRUN_ASSIGN_OR_RETURN(auto inputs, job::expand({j.a.audio, j.a.input_list}));
  j.several_inputs = inputs.size() > 1;
  if (!j.a.shard.empty()) {
    VRUN_ASSIGN_OR_RETURN(auto shard, job::parse_shard(j.a.shard));
    inputs = job::take_shard(std::move(inputs), shard);
  }
  VRUN_RETURN_IF_ERROR(validate_inputs(j.a, inputs, j.formats));
  if (!j.a.summary.empty()) VRUN_RETURN_IF_ERROR(j.summary.open(j.a.summary, j.a.resume));
  if (j.a.resume) {
    VRUN_ASSIGN_OR_RETURN(inputs, drop_done(j, std::move(inputs)));
  }
  if (inputs.size() > 1)
    for (auto& in : inputs) in.duration_s = preprocess::probe_duration_s(in.path);
  return inputs;
}

int run_transcribe(const TranscribeArgs& a) {
  auto backend = parse_backend_kind(a.run.backend);
  if (!backend.is_ok()) return fail("transcribe", backend.status().message());
  const std::vector<std::string> formats = split_nonempty(a.formats, ',');
  for (const auto& f : formats)
    if (f != "txt" && f != "srt" && f != "vtt" && f != "tsv" && f != "json")
      return fail("transcribe", "-o: unknown format '" + f + "' (txt, srt, vtt, tsv, json)");
  if (auto st = validate_options(a, formats); !st.is_ok()) return fail("transcribe", st.message());
  BackendKind kind = *backend;
  auto specs = worker_specs(a, &kind);
  if (!specs.is_ok()) return fail("transcribe", specs.status().message());
  const speech::Options o = a.decoding.options();
  Job j(a, o, formats);
  if (Status st = apply_raw_pcm(a.raw, &j.load); !st.is_ok()) return fail("transcribe", st.message());
  auto inputs = job_inputs(j);
  if (!inputs.is_ok()) return fail("transcribe", inputs.status().message());
  if (inputs->empty()) {
    std::fprintf(stderr, "vrun: nothing to transcribe%s\n", a.resume ? " (--resume: every input is done)" : " in this shard");
    return 0;
  }
  j.several_workers = specs->size() > 1;
  j.workers = specs->size();
  // Several workers take the longest files first, so the job does not end waiting on one long file.
  if (j.several_workers)
    std::stable_sort(inputs->begin(), inputs->end(), [](const job::Input& x, const job::Input& y) { return job::estimate_s(x) > job::estimate_s(y); });
  j.queue = std::move(*inputs);
  if (a.vad) {
    auto vad = speech::VoiceActivity::load(a.vad_model);
    if (!vad.is_ok()) return fail("transcribe", "--vad: " + vad.status().message());
    j.vad = std::move(*vad);
  }
  auto recognizers = load_workers(a, kind, o, *specs);
  if (!recognizers.is_ok()) return fail("transcribe", recognizers.status().message());
  j.note_chunks = !recognizers->empty() && (*recognizers)[0]->family() == "parakeet" && a.decoding.attention == "full";
  if (!recognizers->empty()) j.alone_above_s = (*recognizers)[0]->alone_above_s();
  if (j.several_inputs) {
    double total = 0;
    for (const auto& in : j.queue) total += job::estimate_s(in);
    j.progress = std::make_unique<job::Progress>(a.progress || isatty(STDERR_FILENO), isatty(STDERR_FILENO) != 0, j.queue.size(), total);
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::vector<std::thread> workers;
  for (size_t k = 0; k < recognizers->size(); ++k)
    workers.emplace_back([&j, &recognizers, k] { worker_loop(j, *(*recognizers)[k], static_cast<int>(k)); });
  for (auto& t : workers) t.join();
  if (j.progress) j.progress->final_line();
  if (g_stop_signal) {
    std::fprintf(stderr, "vrun transcribe: stopped by signal %d; %zu of %zu files not started (--resume goes on from here)\n",
                 static_cast<int>(g_stop_signal), j.queue.size() - j.next, j.queue.size());
    return 128 + g_stop_signal;
  }
  if (j.failures > 0) std::fprintf(stderr, "vrun transcribe: %d of %zu files failed\n", j.failures.load(), j.queue.size());
  return j.fatal || j.failures > 0 ? 1 : 0;
}

// The job over many files (docs/archive.md).
void add_job_options(CLI::App& sub, TranscribeArgs& x) {
  TranscribeArgs* a = &x;
  sub.add_option("--input-list", a->input_list,
                 "More inputs from FILE: a path a line (blank lines and # comments skipped; relative to the list's "
                 "folder), or JSONL lines {\"path\": ..., \"id\": ...}; the id (optional) names the transcripts")
      ->type_name("FILE");
  sub.add_option("--summary", a->summary,
                 "Append a JSON line per file as it finishes: input, id, outputs, duration_s, seconds, rtfx, status "
                 "(ok, failed, skipped), error or reason (docs/archive.md); starts empty unless --resume")
      ->type_name("FILE");
  sub.add_flag("--resume", a->resume,
               "Skip the files whose transcripts (every -o format) exist; without -o, those --summary records as ok");
  sub.add_option("--shard", a->shard,
                 "I/N: transcribe every N-th file (from the I-th, 0-based) of the inputs sorted by path; the N shards of "
                 "one job cover every file once")
      ->type_name("I/N");
  sub.add_option("--workers", a->workers,
                 "Models loaded side by side, each taking the next file from one queue (longest first); the CPU "
                 "threads are shared out among them unless -t is given")
      ->capture_default_str();
  sub.add_option("--devices", a->devices,
                 "all or Vulkan device indices (0,1): one worker per entry on the Vulkan backend; an index twice "
                 "runs two workers on that device")
      ->type_name("all|0,1,...");
}

// -o and everything about where the text goes, the input format and the backend.
void add_output_options(CLI::App& sub, TranscribeArgs& x) {
  TranscribeArgs* a = &x;
  sub.add_option("-o,--output-format", a->formats, "Comma-separated transcript files to write: txt, srt, vtt, tsv, json");
  sub.add_flag("--vad", a->vad,
               "Transcribe only the speech Silero VAD finds (threshold 0.5, min speech 250 ms, min silence 2 s, "
               "padding 400 ms); times stay those of the whole audio");
  sub.add_option("--vad-model", a->vad_model,
                 "Silero VAD .onnx (default: the cache's, from scripts/fetch-models.sh silero-vad)");
  sub.add_option("--output-dir", a->output_dir,
                 "Where -o writes (default: the current directory); transcripts mirror the inputs' folders below it");
  sub.add_flag("--progress", a->progress,
               "Show the progress line even when stderr is not a terminal: over the job (files, audio hours, RTFx, "
               "ETA) for several inputs, within the file for one over 30 s");
  add_raw_pcm_options(sub, a->raw, "every AUDIO");
  add_backend_options(sub, a->run);
  sub.add_option("--batch-size", a->batch_size,
                 "Files transcribed together, each file's transcript the same as alone. Parakeet: the files' chunks "
                 "share batched encoder calls, longest first, as many a call as their length allows (4 of 160 s, 64 "
                 "of 10 s with the default export), then decode side by side; 0 (the default) is 64 on a GPU and 1 on "
                 "the CPU. Whisper: encodes "
                 "the next 30-s window of each of N files in one call and decodes their windows together (greedy "
                 "steps over all N); 0 is 1. With --vad and N > 1: one file at a time, its speech cut at pauses into "
                 "chunks of up to 30 s, N chunks side by side, each transcribed on its own (faster-whisper's batched "
                 "pipeline)")
      ->capture_default_str();
  sub.add_option("--attention", a->decoding.attention,
                 "Parakeet: full (every frame sees the whole file, as NeMo: up to 10 minutes in one call where the device has "
                 "about 4 GB free for it; longer audio in overlapping chunks, said on stderr), or local "
                 "(NeMo's limited-context attention: each frame sees the frames within the window the model was exported "
                 "with, 128 = 10.24 s on either side by default; faster on long audio, up to 10 minutes per call; files "
                 "then go one at a time)")
      ->check(CLI::IsMember({"full", "local"}))
      ->capture_default_str();
  add_job_options(sub, x);
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
      "\n"
      "Many files are one job. Inputs are files, folders (searched recursively for wav, flac, ogg,\n"
      "opus, mp3, aiff, au, caf, w64) and --input-list FILE (a path a line, or JSONL {\"path\": ...,\n"
      "\"id\": ...}). Transcripts mirror the inputs under --output-dir: a folder's files by their path\n"
      "inside it, a JSONL entry by its id, other files by their path below the folder they share\n"
      "(d1/x.wav d2/x.wav -o srt writes d1/x.srt and d2/x.srt). Each is written whole or not at all\n"
      "(a temporary file, then a rename). A file that cannot be read or decoded is recorded, skipped,\n"
      "and makes the exit status 1 at the end. --summary writes a JSON line per file as it finishes;\n"
      "--resume skips the files already done; --shard I/N runs every N-th file of the sorted list;\n"
      "--workers N or --devices 0,1 run several models, each taking the next file (longest first).\n"
      "SIGINT/SIGTERM: no new file starts, those running finish, exit 128+signal; a second one ends\n"
      "at once. The command is checked before the model loads: option ranges, the lists, that every\n"
      "input exists and is readable, that --output-dir takes a file, and that no two inputs write the\n"
      "same transcript. See docs/archive.md.\n"
      "Examples:\n"
      "  vrun transcribe -m ~/.cache/vrun/models/whisper-tiny.en talk.wav\n"
      "  vrun transcribe -m MODEL -o srt,json --output-dir out --word-timestamps a.wav b.flac\n"
      "  vrun transcribe -m MODEL --beam-size 5 -l de --task translate interview.mp3\n"
      "  vrun transcribe -m MODEL -o txt,json --output-dir out --summary out/summary.jsonl --resume archive/\n"
      "  vrun transcribe -m MODEL -o srt --output-dir out --input-list files.jsonl --shard 3/8 --devices all\n"
      "  ffmpeg -i video.mkv -f s16le -ar 16000 -ac 1 - | vrun transcribe -m MODEL --rate 16000 -");
  sub.add_option("-m,--model", a->model,
                 "Whisper model (faster-whisper / CTranslate2 folder, Hugging Face folder, whisper.cpp ggml-*.bin), "
                 "Parakeet model (.nemo archive or Hugging Face ParakeetForTDT/CTC folder), or a .vrp exported from one")
      ->required();
  sub.add_option("audio", a->audio,
                 "Audio files (WAV, FLAC, OGG, MP3; any rate and channel count), folders (every audio file under them), "
                 "'-' for standard input");
  sub.add_option("-l,--language", a->decoding.language,
                 "Spoken language code (en, de, fr, ...); auto: detected from the first 30 s (multilingual models). English-only "
                 "(.en) models accept only en")
      ->capture_default_str();
  sub.add_option("--task", a->decoding.task, "transcribe, or translate (into English; multilingual models)")
      ->check(CLI::IsMember({"transcribe", "translate"}))
      ->capture_default_str();
  sub.add_flag_callback("--no-timestamps", [a] { a->decoding.timestamps = false; }, "Decode without timestamp tokens and print text only (one segment per window)");
  sub.add_flag("--word-timestamps", a->decoding.word_timestamps,
               "Times for every word (cross-attention alignment); also tightens segment bounds; json gets a words list");
  sub.add_option("--beam-size", a->decoding.beam_size, "Beam search width at temperature 0; 1 = greedy")->capture_default_str();
  sub.add_option("--best-of", a->decoding.best_of, "Candidates sampled at each fallback temperature; the most probable wins")->capture_default_str();
  sub.add_option("--patience", a->decoding.patience, "Beam search stops after beam-size x patience finished hypotheses")->capture_default_str();
  sub.add_option("--length-penalty", a->decoding.length_penalty, "Hypotheses are ranked by log-probability / length^this")->capture_default_str();
  sub.add_option("--temperature", a->decoding.temperature, "First decoding temperature (0 = greedy or beam search)")->capture_default_str();
  sub.add_option("--temperature-increment", a->decoding.temperature_increment, "Step between fallback temperatures, up to 1.0")
      ->capture_default_str();
  sub.add_flag_callback("--no-fallback", [a] { a->decoding.fallback = false; }, "Decode each window once, at --temperature");
  sub.add_option("--seed", a->decoding.seed, "Random seed of sampling (temperature > 0)")->capture_default_str();
  sub.add_option("--compression-ratio-threshold", a->decoding.compression_ratio_threshold,
                 "Fall back when the text's zlib compression ratio is above this (repetition); <= 0: never")
      ->capture_default_str();
  sub.add_option("--logprob-threshold", a->decoding.logprob_threshold, "Fall back when the average token log-probability is below this")
      ->capture_default_str();
  sub.add_option("--no-speech-threshold", a->decoding.no_speech_threshold,
                 "Skip a window as silence when its no-speech probability is above this and the log-probability is low; < 0: never")
      ->capture_default_str();
  sub.add_flag_callback("--no-condition", [a] { a->decoding.condition_on_previous_text = false; }, "Do not feed the previous window's text to the next one (less drift, less consistency)");
  sub.add_option("--prompt", a->decoding.prompt, "Text the first window is conditioned on (spellings, names, style)");
  add_output_options(sub, *a);
  return [a] { return run_transcribe(*a); };
});

}  // namespace
}  // namespace vrun::cli
#endif
