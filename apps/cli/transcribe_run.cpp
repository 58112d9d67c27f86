#if VRUN_WHISPER && VRUN_PREPROCESS
#include "apps/cli/transcribe_run.h"

#include "apps/cli/job_groups.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/common/transcript/writers.h"

namespace vrun::cli {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);
}

std::vector<job::Input> Job::take(size_t n) {
  std::lock_guard<std::mutex> lock(queue_mu);
  std::vector<job::Input> got;
  if (g_stop_signal || fatal) return got;
  std::vector<double> queued_s;
  for (size_t k = next; k < queue.size(); ++k) queued_s.push_back(job::estimate_s(queue[k]));
  const size_t count = group_size(queued_s, n, workers, alone_above_s);
  got.assign(queue.begin() + static_cast<std::ptrdiff_t>(next), queue.begin() + static_cast<std::ptrdiff_t>(next + count));
  next += count;
  return got;
}

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

namespace {

void print_segment(const TranscribeArgs& a, const transcript::Segment& s, std::string* into) {
  char line[96];
  if (a.decoding.timestamps)
    std::snprintf(line, sizeof line, "[%s --> %s] ", transcript::format_timestamp(s.start).c_str(), transcript::format_timestamp(s.end).c_str());
  else
    line[0] = '\0';
  into->append(line).append(s.text).append("\n");
}

// The transcript files of one input; the paths written go to `written`.
Status write_outputs(Job& j, const job::Input& in, const transcript::Transcript& t, std::vector<std::string>* written) {
  const auto paths = job::output_paths(in, j.a.output_dir, j.formats);
  for (size_t k = 0; k < j.formats.size(); ++k) {
    VRUN_ASSIGN_OR_RETURN(auto text, transcript::render_transcript(t, j.formats[k], in.path));
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(paths[k]).parent_path(), ec);
    VRUN_RETURN_IF_ERROR(write_atomically(paths[k], text));
    std::fprintf(stderr, "vrun: wrote %s\n", paths[k].c_str());
    written->push_back(paths[k]);
  }
  return Status::ok();
}

// The worker this thread is (worker_loop's index; -1 with one worker): a summary record names it.
thread_local int t_worker = -1;

// A finished input (t null when it failed with `error`): its buffered segments on stdout, its
// stats, its transcript files, its summary line and the job's progress, under the console lock.
void finish(Job& j, const job::Input& in, const transcript::Transcript* t, const std::string& error, double audio_s, double wall,
            const std::string& printed) {
  std::lock_guard<std::mutex> lock(j.console_mu);
  if (j.progress) j.progress->clear_line();
  job::Record rec{in.path, in.id, {}, audio_s, wall, "ok", "", "", j.several_workers ? t_worker : -1};
  if (!t) {
    std::fprintf(stderr, "vrun transcribe: %s\n", error.c_str());
    rec.status = "failed";
    rec.error = error;
  } else {
    if (!printed.empty()) {
      std::fputs(printed.c_str(), stdout);
      std::fflush(stdout);
    }
    const auto& st = t->stats;
    if (t->language_probability < 1.0)
      std::fprintf(stderr, "vrun: %s: detected language %s (p = %.2f)\n", in.path.c_str(), t->language.c_str(), t->language_probability);
    char words[48] = "";
    if (j.a.decoding.word_timestamps) std::snprintf(words, sizeof words, ", words %.2f s", st.align_s);
    std::fprintf(stderr, "vrun: %s: audio %.2f s, wall %.2f s, RTFx %.1f (mel %.2f s, encode %.2f s, decode %.2f s%s; %d windows, %d tokens)\n",
                 in.path.c_str(), st.audio_s, wall, wall > 0 ? st.audio_s / wall : 0.0, st.features_s, st.encode_s, st.decode_s, words,
                 st.windows, st.tokens);
    if (j.note_chunks && st.windows > 1)
      std::fprintf(stderr,
                   "vrun: %s: longer than the model's full attention reaches in one call: encoded in %d overlapping "
                   "chunks (NeMo attends over the whole file, so tokens near the seams may differ; full attention takes up "
                   "to 10 minutes a call where the device has the memory free for it, --attention local up to 10 minutes "
                   "with less)\n",
                   in.path.c_str(), st.windows);
    rec.duration_s = st.audio_s;
    if (auto s = write_outputs(j, in, *t, &rec.outputs); !s.is_ok()) {
      std::fprintf(stderr, "vrun transcribe: %s\n", s.message().c_str());
      rec.status = "failed";
      rec.error = s.message();
      j.fatal = true;  // a transcript that cannot be written (a full disk) stops the job
    }
  }
  if (rec.status == "failed") ++j.failures;
  j.summary.write(rec);
  if (j.progress) j.progress->file_done(job::estimate_s(in), rec.duration_s, rec.status == "failed");
}

// The progress line of one input over 30 s (not with several inputs, whose line is the job's): on a
// terminal one line rewritten in place; elsewhere (--progress into a file) a line each.
struct FileProgress {
  FileProgress(const Job& j, double seconds, Clock::time_point start)
      : tty(isatty(STDERR_FILENO) != 0), on((j.a.progress || tty) && seconds > 30.0 && !j.several_inputs), audio_s(seconds), t0(start) {}
  void operator()(double done_s) {
    if (!on) return;
    const double wall = seconds_since(t0);
    std::fprintf(stderr, tty ? "\rvrun: %5.1f%% of %.1f s, RTFx %.1f " : "vrun: %5.1f%% of %.1f s, RTFx %.1f\n",
                 100.0 * std::min(1.0, done_s / audio_s), audio_s, wall > 0 ? done_s / wall : 0.0);
    std::fflush(stderr);
    shown = true;
  }
  // Clears the in-place line for a segment to take its place; end() ends it for good.
  void clear() const {
    if (shown && tty) std::fputs("\r\033[K", stderr);
  }
  void end() const {
    if (shown && tty) std::fputc('\n', stderr);
  }
  const bool tty, on;
  const double audio_s;
  const Clock::time_point t0;
  bool shown = false;
};

// --vad with --batch-size N (N > 1, a model that batches): the speech cut at its pauses into
// chunks of up to 30 s, N chunks transcribed side by side (each on its own, as faster-whisper's
// batched pipeline does), their transcripts joined and timed in the original audio.
void transcribe_chunks(Job& j, speech::Recognizer& r, const job::Input& in, const speech::SpeechOnly& speech, Clock::time_point t0,
                       std::string printed) {
  const double audio_s = static_cast<double>(speech.samples.size()) / 16000.0;
  FileProgress progress(j, audio_s, t0);
  auto t = speech::transcribe_in_chunks(r, speech, j.o, j.a.batch_size, [&progress](double done_s) { progress(done_s); });
  progress.end();
  if (!t.is_ok()) return finish(j, in, nullptr, in.path + ": " + t.status().message(), audio_s, seconds_since(t0), "");
  std::fprintf(stderr, "vrun: %s: %zu chunks of up to 30 s, %d at a time\n", in.path.c_str(), speech::chunk_speech(speech).size(),
               j.a.batch_size);
  for (const auto& seg : t->segments) print_segment(j.a, seg, &printed);
  finish(j, in, &*t, "", audio_s, seconds_since(t0), printed);
}

// One file: --vad's cut, a progress line for a single input over 30 s, segments as they come (one
// worker) or together when the file is done (several workers, so files do not interleave).
void transcribe_file(Job& j, speech::Recognizer& r, const job::Input& in) {
  const TranscribeArgs& a = j.a;
  const auto t0 = Clock::now();
  auto audio = preprocess::load_audio(in.path, j.load);
  if (!audio.is_ok()) return finish(j, in, nullptr, audio.status().message(), 0, seconds_since(t0), "");
  std::string printed = j.several_inputs ? "# " + in.path + "\n" : "";
  const auto flush_printed = [&] {
    if (j.several_workers || printed.empty()) return;
    std::lock_guard<std::mutex> lock(j.console_mu);
    if (j.progress) j.progress->clear_line();
    std::fputs(printed.c_str(), stdout);
    std::fflush(stdout);
    printed.clear();
  };
  flush_printed();
  speech::SpeechOnly speech;  // --vad: the speech alone, and how its times map back
  const double full_s = audio->duration_s();
  // --vad --batch-size N: chunks of the speech side by side (transcribe_chunks); VAD spans are
  // then cut at 30 s, as faster-whisper's batched pipeline cuts them.
  const bool chunked = j.vad && j.a.batch_size > 1 && r.batch() > 1;
  if (j.vad) {
    auto cut = j.vad->keep_speech(audio->samples, chunked ? speech::chunk_span_options() : vad::SpanOptions{});
    if (!cut.is_ok()) return finish(j, in, nullptr, in.path + ": --vad: " + cut.status().message(), full_s, seconds_since(t0), "");
    std::fprintf(stderr, "vrun: %s: --vad kept %zu spans, %.1f s of %.1f s\n", in.path.c_str(), cut->spans.size(),
                 static_cast<double>(cut->samples.size()) / 16000.0, full_s);
    speech = std::move(*cut);
    if (chunked) return transcribe_chunks(j, r, in, speech, t0, printed);
    audio->samples = speech.samples;
  }
  const double audio_s = static_cast<double>(audio->samples.size()) / 16000.0;
  FileProgress progress(j, audio_s, t0);
  auto transcript = r.transcribe(audio->samples, j.o, [&](const transcript::Segment& s) {
    progress.clear();  // the segment takes the progress line's place
    transcript::Segment mapped = s;
    if (j.vad) speech::map_to_original(&mapped, speech.map);
    print_segment(a, mapped, &printed);
    flush_printed();
  }, [&progress](double done_s) { progress(done_s); });
  progress.end();
  if (!transcript.is_ok()) return finish(j, in, nullptr, in.path + ": " + transcript.status().message(), audio_s, seconds_since(t0), "");
  if (j.vad) speech::map_to_original(&*transcript, speech.map);
  finish(j, in, &*transcript, "", audio_s, seconds_since(t0), printed);
}

// A group of --batch-size files (Parakeet's batched encoder, Whisper's streams): transcribed
// together, then each file is finished in turn, the same as alone.
void transcribe_group(Job& j, speech::Recognizer& r, const std::vector<job::Input>& group) {
  const auto t0 = Clock::now();
  std::vector<const job::Input*> ins;
  std::vector<std::vector<float>> samples;
  for (const auto& in : group) {
    auto audio = preprocess::load_audio(in.path, j.load);
    if (!audio.is_ok()) {
      finish(j, in, nullptr, audio.status().message(), 0, seconds_since(t0), "");
      continue;
    }
    ins.push_back(&in);
    samples.push_back(std::move(audio->samples));
  }
  if (ins.empty()) return;
  std::vector<std::span<const float>> spans(samples.begin(), samples.end());
  auto ts = r.transcribe_many(spans, {j.o});
  const double wall = seconds_since(t0);
  std::fprintf(stderr, "vrun: %zu files in %.2f s\n", ins.size(), wall);
  double total_audio = 0;
  for (const auto& s : samples) total_audio += static_cast<double>(s.size()) / 16000.0;
  for (size_t k = 0; k < ins.size(); ++k) {
    const double audio_s = static_cast<double>(samples[k].size()) / 16000.0;
    // The group's wall time, shared by audio length (the batched calls served all files).
    const double share = total_audio > 0 ? audio_s / total_audio : 1.0 / static_cast<double>(ins.size());
    if (!ts[k].is_ok()) {
      finish(j, *ins[k], nullptr, ins[k]->path + ": " + ts[k].status().message(), audio_s, wall * share, "");
      continue;
    }
    std::string printed = j.several_inputs ? "# " + ins[k]->path + "\n" : "";
    for (const auto& seg : ts[k]->segments) print_segment(j.a, seg, &printed);
    finish(j, *ins[k], &*ts[k], "", audio_s, wall * share, printed);
  }
}

}  // namespace

void worker_loop(Job& j, speech::Recognizer& r, int index) {
  t_worker = index;
  // --batch-size 0 (the default): the model's choice (Parakeet on a GPU: its batch).
  const int asked = j.a.batch_size > 0 ? j.a.batch_size : r.default_batch();
  const size_t group = r.batch() > 1 && asked > 1 && !j.a.vad ? static_cast<size_t>(asked) : 1;
  for (auto files = j.take(group); !files.empty(); files = j.take(group)) {
    if (group == 1) transcribe_file(j, r, files.front());
    else transcribe_group(j, r, files);
  }
}

}  // namespace vrun::cli
#endif
