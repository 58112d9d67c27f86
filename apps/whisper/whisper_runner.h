// Speech to text with a Whisper model, decoding as openai-whisper's transcribe() defines it and
// faster-whisper (CTranslate2) implements it: sequential 30-s windows, the start-of-transcript
// sequence (language, task), greedy or beam search at temperature 0, sampling with best-of
// candidates at higher temperatures when the compression-ratio or log-probability check fails,
// suppress-blank, suppress-tokens and the timestamp rules, segments split on timestamp pairs,
// the next window seeking to the last timestamp, windows judged silent skipped, conditioning
// on the previous windows' text (or an initial prompt), and word timestamps from the alignment
// heads' cross-attention and dynamic time warping.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "apps/common/tokenizer/tokenizer.h"
#include "apps/common/transcript/transcript.h"
#include "models/whisper/whisper_model.h"
#include "runtime/executor.h"

namespace vrun::whisper {

struct RunnerOptions {
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;
  // Rows of the batched decoder built for checkpoints (beam size and best-of need at most this
  // many); a .vrp keeps the rows it was exported with.
  int decode_batch = 5;
  int device = -1;  // Vulkan device index; -1: VRUN_DEVICE or the best one
  // Files transcribe_many decodes together (streams of the batched encoder and decoder) for
  // checkpoints; <= 1: one after another. A .vrp keeps the streams it was exported with.
  int streams = 0;
  // The encoder's form for checkpoints (whisper::BuildSettings::fused_encoder); unset: fused.
  // A .vrp keeps the form it was exported with.
  std::optional<bool> fused_encoder = std::nullopt;
};

struct TranscribeOptions {
  bool timestamps = true;            // false: <|notimestamps|>, one segment per window
  std::string language;              // "" or "auto": detected (multilingual), "en" (English-only)
  std::string task = "transcribe";   // or "translate" (multilingual models)
  // Temperature fallback: each window is decoded at the first temperature, and again at the
  // next while the result is too repetitive or too improbable.
  std::vector<double> temperatures = {0.0, 0.2, 0.4, 0.6, 0.8, 1.0};
  // openai-whisper's CLI schedule: `start`, then (with fallback) steps of `increment` up to 1.0.
  static std::vector<double> temperature_schedule(double start, double increment, bool fallback) {
    std::vector<double> t = {start};
    if (fallback)
      for (double v = start + increment; v <= 1.0 + 1e-6; v += increment) t.push_back(v);
    return t;
  }
  double compression_ratio_threshold = 2.4;  // <= 0: no check
  double logprob_threshold = -1.0;           // -inf: no check
  double no_speech_threshold = 0.6;          // < 0: never skip a window
  int beam_size = 1;                         // at temperature 0; 1 = greedy
  int best_of = 5;                           // sampled candidates at temperature > 0
  double patience = 1.0, length_penalty = 1.0;
  uint64_t seed = 0;                         // sampling
  bool condition_on_previous_text = true;
  double prompt_reset_on_temperature = 0.5;
  std::string initial_prompt;
  int max_window_tokens = 224;       // sampled tokens per window (n_text_ctx / 2), the end token included
  double max_initial_timestamp = 1.0;  // seconds
  bool suppress_blank = true;
  bool word_timestamps = false;
  std::string prepend_punctuations = "\"'\u201c\u00bf([{-";
  std::string append_punctuations = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
};

using transcript::Segment;
using transcript::Transcript;
using TranscribeStats = transcript::Stats;

// One window's decode at one temperature.
struct WindowResult {
  std::vector<int32_t> tokens;  // sampled tokens, the end token excluded
  double sum_logprob = 0, avg_logprob = 0, no_speech_prob = 0;
  double temperature = 0, compression_ratio = 0;
};

class WhisperRunner {
 public:
  // A CTranslate2 / faster-whisper folder (or its model.bin), or a .vrp exported from one.
  static Result<std::unique_ptr<WhisperRunner>> load(const std::string& path, const RunnerOptions& options);
  // A Whisper program already loaded (source names it in messages).
  static Result<std::unique_ptr<WhisperRunner>> load(std::shared_ptr<Program> program, const RunnerOptions& options,
                                                     const std::string& source);
  // What transcribe would refuse in these options for this model (language, task, beam size,
  // word timestamps), before any audio is read.
  Status check_options(const TranscribeOptions& options) const;

  const WhisperConfig& config() const { return config_; }
  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  const Program& program() const { return *program_; }
  std::string device_description() const { return executor_->device_description(); }
  const std::vector<std::string>& notes() const { return notes_; }
  bool multilingual() const { return !languages_.empty(); }
  int decode_batch() const { return decode_batch_; }

  // 16-kHz mono samples. on_segment sees each segment as soon as its window is decoded;
  // on_progress the seconds of audio done so far after each window.
  Result<Transcript> transcribe(std::span<const float> samples, const TranscribeOptions& options,
                                const std::function<void(const Segment&)>& on_segment = {},
                                const std::function<void(double)>& on_progress = {});

  // Several files together, each with its options (one entry: the same for all): every round
  // encodes the next window of up to streams() files in one encoder call and decodes those
  // windows together, greedy steps over all of them at once (beam search, sampling, fallback
  // temperatures and word timestamps go window by window from the batched encoder's output).
  // Each transcript is the file's own transcript alone; a file that fails fails alone.
  // on_progress(i, seconds) after each of file i's windows.
  std::vector<Result<Transcript>> transcribe_many(const std::vector<std::span<const float>>& inputs,
                                                  const std::vector<TranscribeOptions>& options,
                                                  const std::function<void(size_t, double)>& on_progress = {});
  // Files transcribe_many decodes together (1: the program has no stream methods).
  int streams() const { return streams_; }

  // The pieces: encode one window of features ([n_mels, 3000], row-major), then decode it
  // (the start-of-transcript sequence for `language`, after `previous` text tokens).
  Status encode(std::span<const float> mel);
  Result<WindowResult> decode_window(const TranscribeOptions& options, const std::string& language = "en",
                                     std::span<const int32_t> previous = {});
  // Language of the encoded window: code and probability (multilingual models).
  Result<std::pair<std::string, double>> detect_language();

  int32_t eot() const { return eot_; }
  int32_t timestamp_begin() const { return timestamp_begin_; }

 private:
  WhisperRunner() = default;
  Status init(const std::string& path, const RunnerOptions& options);
  struct Prompt {
    std::vector<int32_t> before_sot, after_sot;  // up to and including <|startoftranscript|>; the rest
  };
  Result<Prompt> make_prompt(const TranscribeOptions& o, const std::string& language, std::span<const int32_t> previous) const;
  Result<std::vector<float>> forward(std::span<const int32_t> tokens, int64_t pos);
  // The same where the executor left them (valid, and free to be filtered in place, until the
  // method runs again): no copy of the vocabulary row per token.
  Result<float*> forward_in_place(std::span<const int32_t> tokens, int64_t pos);
  Result<std::vector<float>> forward_batch(std::span<const int32_t> tokens, int64_t seq, int64_t pos);
  Status reorder_batch(const std::vector<int32_t>& rows, int64_t len);
  // Feeds the prompt (to the batch-1 or the batched cache): the first step's logits, the
  // no-speech probability and the next position.
  struct Primed {
    std::vector<float> logits;  // [rows, vocab]
    double no_speech_prob = 0;
    int64_t pos = 0;
  };
  Result<Primed> prime(const Prompt& p, bool batched);
  // Of the logits after <|startoftranscript|>: the no-speech token's probability (0 without one).
  double no_speech_prob(const float* logits) const;
  Result<WindowResult> decode_greedy(const TranscribeOptions& o, const Prompt& p);
  // One greedy step on a row's logits (filtered in place): the token's log-probability added to
  // w, the token appended unless it is the end; false at the end.
  bool greedy_step(float* logits, const TranscribeOptions& o, WindowResult& w) const;
  Result<WindowResult> decode_sampling(const TranscribeOptions& o, const Prompt& p, double temperature);
  Result<WindowResult> decode_beam(const TranscribeOptions& o, const Prompt& p);
  // first: the result at the first temperature, already decoded (streams); before_fallback runs
  // before any other temperature is tried.
  Result<WindowResult> decode_with_fallback(const TranscribeOptions& o, const Prompt& p, const WindowResult* first = nullptr,
                                            const std::function<Status()>& before_fallback = {});
  // One file's long-form state: transcribe's loop, cut at the encoder and the decoder so that
  // transcribe_many can run several files' windows together.
  struct FileJob;
  Result<std::unique_ptr<FileJob>> start_job(std::span<const float> samples, const TranscribeOptions& o);
  // The next window's features (3000 frames) and their frame count in the file.
  std::vector<float> next_window(FileJob& j);
  // The window's prompt; the language is detected first where it is not known (the encoded
  // window must be the one in cross.kv).
  Result<Prompt> window_prompt(FileJob& j);
  // Segments, word timestamps (the window must be in cross.kv) and the seek of a decoded window.
  Status finish_window(FileJob& j, WindowResult w);
  Transcript finish_job(FileJob& j);
  // The streams' pieces (transcribe_many).
  Status encode_streams(std::span<const float> mels, int64_t n);
  Status select_stream(int slot);
  Result<std::vector<WindowResult>> decode_streams_greedy(const std::vector<const TranscribeOptions*>& opts,
                                                          const std::vector<const Prompt*>& prompts);
  int max_steps(const Prompt& p, const TranscribeOptions& o) const;
  void filter_logits(float* logits, const std::vector<int32_t>& sampled, const TranscribeOptions& o) const;
  double compression_ratio(const std::vector<int32_t>& tokens) const;
  Status add_word_timestamps(std::vector<Segment>& segs, const std::vector<std::vector<int32_t>>& text_tokens,
                             const std::vector<int32_t>& sot_sequence, int64_t num_frames, double time_offset,
                             const std::string& language, double last_speech_timestamp, const TranscribeOptions& o);

  std::shared_ptr<Program> program_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  WhisperConfig config_;
  WhisperExtras extras_;
  std::vector<std::string> notes_;
  int32_t eot_ = -1, sot_ = -1, sot_prev_ = -1, no_timestamps_ = -1, no_speech_ = -1, timestamp_begin_ = -1;
  int32_t transcribe_ = -1, translate_ = -1;
  std::vector<std::pair<std::string, int32_t>> languages_;  // code, token (multilingual models)
  std::vector<int32_t> suppress_, suppress_begin_;
  int decode_batch_ = 1;
  int streams_ = 1;
  std::vector<int64_t> stream_rows_;  // rows of the step_streams_B methods, ascending
  bool has_prefill_ = false, has_step_ = false;
  std::mt19937_64 rng_;
};

}  // namespace vrun::whisper
