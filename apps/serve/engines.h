// The jobs the server queues and the engines that run them on a model's runner: text generation
// (Llama family: continuous batching over KV-cache slots, or one request at a time for a program
// without batched methods) and speech recognition (Whisper, Parakeet). Each engine borrows its
// runner; the model's Scheduler runs it on the model's one worker thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/llama/batch_session.h"
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

// One request at a time through LlamaRunner::generate (a program without batched methods).
class TextEngine : public StepEngine {
 public:
  TextEngine(std::string model, llama::LlamaRunner& runner, Metrics& metrics)
      : model_(std::move(model)), runner_(runner), metrics_(metrics) {}
  void serve(std::span<const std::shared_ptr<Job>> jobs) override;

 private:
  std::string model_;
  llama::LlamaRunner& runner_;
  Metrics& metrics_;
};

// Continuous batching (apps/llama/batch_session.h): a queued request takes a free slot at the next
// step boundary, its prompt is prefilled in chunks between decode steps, and every step decodes
// one token for each running request together. A finished, cancelled or timed-out request frees
// its slot at once; the queue holds the rest until a slot frees.
class BatchTextEngine : public Engine {
 public:
  // engine: its index among the model's engines (one per device), for the slot metrics.
  BatchTextEngine(std::string model, std::unique_ptr<llama::BatchSession> session, Metrics& metrics, int engine = 0)
      : model_(std::move(model)), session_(std::move(session)), metrics_(metrics), engine_(engine) {}
  void run(JobQueue& queue) override;

 private:
  // Starts the jobs taken (or answers them when cancelled or refused).
  void admit(std::vector<std::shared_ptr<Job>> jobs, JobQueue& queue);
  // Cancels the sequences whose clients left; reports those that ended.
  void collect(JobQueue& queue);
  // A failed step ends every running request with the error.
  void fail_all(const Status& st, JobQueue& queue);
  void publish();

  std::string model_;
  std::unique_ptr<llama::BatchSession> session_;
  Metrics& metrics_;
  std::map<int, std::shared_ptr<Job>> running_;  // by sequence id
  int engine_ = 0;
};

class SpeechEngine : public StepEngine {
 public:
  using Transcribe =
      std::function<Result<transcript::Transcript>(std::span<const float>, const SpeechOptions&)>;
  // Several files through the model's batched calls, each with its request's options; a file
  // that fails fails alone where the model can tell.
  using TranscribeBatch = std::function<std::vector<Result<transcript::Transcript>>(const std::vector<std::span<const float>>&,
                                                                                    const std::vector<const SpeechOptions*>&)>;
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
