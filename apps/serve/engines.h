// The jobs the server queues and the engines that run them on a model's runner: text generation
// (Llama family) and speech recognition (Whisper, Parakeet). Each engine owns nothing but a
// reference to its runner; the model's Scheduler calls it from the model's one worker thread.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/llama/llama_runner.h"
#include "apps/serve/metrics.h"
#include "apps/serve/scheduler.h"

namespace vrun::serve {

struct TextJob : Job {
  std::vector<int32_t> prompt;
  llama::GenerateOptions options;
  // Text as it completes; false stops the generation (client gone).
  std::function<bool(const std::string&)> on_text;
  // Called exactly once, from the worker, also for a job cancelled before it ran.
  std::function<void(Result<llama::GenerateStats>)> on_done;
};

struct SpeechOptions {
  std::string language;  // "" = detect
  std::string task = "transcribe";
  std::string prompt;
  double temperature = 0.0;  // first temperature; higher ones follow on the fallback checks
  bool word_timestamps = false;
};

struct SpeechJob : Job {
  std::vector<float> samples;  // 16 kHz mono
  SpeechOptions options;
  std::function<void(Result<transcript::Transcript>)> on_done;
};

class TextEngine : public Engine {
 public:
  TextEngine(std::string model, llama::LlamaRunner& runner, Metrics& metrics)
      : model_(std::move(model)), runner_(runner), metrics_(metrics) {}
  void serve(std::span<const std::shared_ptr<Job>> jobs) override;

 private:
  std::string model_;
  llama::LlamaRunner& runner_;
  Metrics& metrics_;
};

class SpeechEngine : public Engine {
 public:
  using Transcribe =
      std::function<Result<transcript::Transcript>(std::span<const float>, const SpeechOptions&)>;
  // Several files through batched encoder calls (Parakeet); their options are the model's own.
  using TranscribeBatch =
      std::function<Result<std::vector<transcript::Transcript>>(const std::vector<std::span<const float>>&)>;
  SpeechEngine(std::string model, Transcribe transcribe, Metrics& metrics, TranscribeBatch batch = {},
               int max_batch = 1)
      : model_(std::move(model)),
        transcribe_(std::move(transcribe)),
        batch_(std::move(batch)),
        max_batch_(batch_ ? max_batch : 1),
        metrics_(metrics) {}
  int max_batch() const override { return max_batch_; }
  void serve(std::span<const std::shared_ptr<Job>> jobs) override;

 private:
  void serve_one(SpeechJob& job);
  std::string model_;
  Transcribe transcribe_;
  TranscribeBatch batch_;
  int max_batch_;
  Metrics& metrics_;
};

}  // namespace vrun::serve
