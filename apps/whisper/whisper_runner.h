// Speech to text with a Whisper model, decoding as openai-whisper's transcribe() defines it:
// sequential 30-s windows, the start-of-transcript sequence, greedy decoding at temperature 0
// with suppress-blank, suppress-tokens and the timestamp rules, segments split on timestamp
// pairs, the next window seeking to the last timestamp, and windows judged silent (no-speech
// probability above the threshold with a low average log-probability) skipped.
#pragma once

#include <functional>
#include <memory>
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
};

struct TranscribeOptions {
  bool timestamps = true;            // false: <|notimestamps|>, one segment per window
  int max_window_tokens = 224;       // sampled tokens per window (n_text_ctx / 2), the end token included
  double max_initial_timestamp = 1.0;  // seconds
  bool suppress_blank = true;
  double no_speech_threshold = 0.6;  // < 0: never skip a window
  double logprob_threshold = -1.0;
};

using transcript::Segment;
using transcript::Transcript;
using TranscribeStats = transcript::Stats;

// One window's greedy decode.
struct WindowResult {
  std::vector<int32_t> tokens;  // sampled tokens, the end token excluded
  double sum_logprob = 0, avg_logprob = 0, no_speech_prob = 0;
};

class WhisperRunner {
 public:
  // A CTranslate2 / faster-whisper folder (or its model.bin), or a .vrp exported from one.
  static Result<std::unique_ptr<WhisperRunner>> load(const std::string& path, const RunnerOptions& options);

  const WhisperConfig& config() const { return config_; }
  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  const Program& program() const { return *program_; }
  std::string device_description() const { return executor_->device_description(); }
  const std::vector<std::string>& notes() const { return notes_; }

  // 16-kHz mono samples. on_segment sees each segment as soon as its window is decoded.
  Result<Transcript> transcribe(std::span<const float> samples, const TranscribeOptions& options,
                                const std::function<void(const Segment&)>& on_segment = {});

  // The pieces: encode one window of features ([n_mels, 3000], row-major), then decode it.
  Status encode(std::span<const float> mel);
  Result<WindowResult> decode_window(const TranscribeOptions& options);

  int32_t eot() const { return eot_; }
  int32_t timestamp_begin() const { return timestamp_begin_; }

 private:
  WhisperRunner() = default;
  Result<std::vector<float>> step(int32_t token, int64_t pos);
  void filter_logits(std::vector<float>& logits, const std::vector<int32_t>& sampled, bool timestamps,
                     const TranscribeOptions& o) const;

  std::shared_ptr<Program> program_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  WhisperConfig config_;
  WhisperExtras extras_;
  std::vector<std::string> notes_;
  int32_t eot_ = -1, sot_ = -1, no_timestamps_ = -1, no_speech_ = -1, timestamp_begin_ = -1;
  std::vector<int32_t> suppress_, suppress_begin_;
};

}  // namespace vrun::whisper
