// The models one server holds: each loaded once with its runner, reachable by its file or
// folder name and by an alias, and served by its own Scheduler.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/common/tokenizer/chat_template.h"
#include "apps/llama/llama_runner.h"
#include "apps/serve/metrics.h"
#include "apps/serve/scheduler.h"
#include "apps/whisper/whisper_runner.h"
#if VRUN_PARAKEET
#include "apps/parakeet/parakeet_runner.h"
#endif

namespace vrun::serve {

enum class ModelKind { kText, kSpeech };

struct ModelSpec {
  std::string path, alias;
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;
  int64_t context = 0;  // text models; 0: the model's, bounded by memory
  int max_pending = 8;
};

struct ServedModel {
  std::string id;                  // the alias, else the file or folder name
  std::vector<std::string> names;  // every name that reaches it
  ModelKind kind = ModelKind::kText;
  int64_t created = 0;
  std::string device;
  std::unique_ptr<llama::LlamaRunner> llama;
  tok::ChatFormat chat_format;
  std::unique_ptr<whisper::WhisperRunner> whisper;
#if VRUN_PARAKEET
  std::unique_ptr<parakeet::ParakeetRunner> parakeet;
#endif
  // Last: destroyed first, so the worker stops before the runner it drives goes away.
  std::unique_ptr<Scheduler> scheduler;
};

// GGUF and Parakeet checkpoints are recognised by their files; anything else is tried as a
// Whisper model, then as a Llama-family program.
Result<std::unique_ptr<ServedModel>> load_model(const ModelSpec& spec, Metrics& metrics);

}  // namespace vrun::serve
