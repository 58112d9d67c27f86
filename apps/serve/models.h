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
#include "apps/speech/speech_recognizer.h"

namespace vrun::serve {

enum class ModelKind { kText, kSpeech };

// Positions a text model's slot holds when --ctx-size is not given.
constexpr int64_t kDefaultSlotContext = 4096;

struct ModelSpec {
  std::string path, alias;
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;
  // Text models: KV-cache positions of all slots together, shared out evenly (llama-server's
  // --ctx-size); 0: each slot holds min(the model's context, kDefaultSlotContext).
  int64_t context = 0;
  int parallel = 8;  // text models: KV-cache slots, the requests decoded together (per device)
  // Vulkan devices to load the model on, one engine each (a device may repeat); empty: one engine
  // on the backend's choice.
  std::vector<int> devices;
  int64_t prefill_chunk = 0;  // text models: prompt tokens prefilled per step (0: the program's chunk)
  int max_pending = 64;
};

struct ServedModel {
  std::string id;                  // the alias, else the file or folder name
  std::vector<std::string> names;  // every name that reaches it
  ModelKind kind = ModelKind::kText;
  int64_t created = 0;
  std::string device;
  int slots = 0;  // text models served by continuous batching: KV-cache slots; 0: one at a time
  std::unique_ptr<llama::LlamaRunner> llama;  // the first device's (tokenizer, chat template)
  tok::ChatFormat chat_format;
  std::unique_ptr<speech::Recognizer> speech;
  // The copies on the other devices of ModelSpec::devices, each driven by its own engine.
  std::vector<std::unique_ptr<llama::LlamaRunner>> more_llama;
  std::vector<std::unique_ptr<speech::Recognizer>> more_speech;
  // Last: destroyed first, so the worker stops before the runner it drives goes away.
  std::unique_ptr<Scheduler> scheduler;
};

// GGUF and Parakeet checkpoints are recognised by their files; anything else is tried as a
// Whisper model, then as a Llama-family program.
Result<std::unique_ptr<ServedModel>> load_model(const ModelSpec& spec, Metrics& metrics);

}  // namespace vrun::serve
