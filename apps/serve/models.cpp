#include "apps/serve/models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "apps/serve/engines.h"
#include "models/registry/families.h"

namespace vrun::serve {
namespace {

constexpr int kParakeetBatch = 4;

std::string file_name(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "folder/"
  return p.filename().string();
}

Result<std::unique_ptr<llama::LlamaRunner>> load_llama(const ModelSpec& spec) {
  llama::LoadOptions lo;
  lo.backend = spec.backend;
  lo.threads = spec.threads;
  const int64_t slots = std::max(1, spec.parallel);
  if (spec.context > 0) {
    lo.context = spec.context / slots;
    if (lo.context < 16)
      return err(ErrorCode::kInvalidArgument, "--ctx-size ", spec.context, " over --parallel ", slots,
                 " slots leaves ", lo.context, " positions a slot (at least 16)");
  } else {
    lo.default_context_cap = kDefaultSlotContext;
  }
  // Each slot holds the runner's context (batch_context 0), so a request meets the same limit in
  // a slot as in the runner's own cache.
  lo.batch_slots = slots;
  return llama::LlamaRunner::load(spec.path, lo);
}

// The decoding `vrun transcribe` does by default: greedy at the first temperature, then
// sampling at the next ones (steps of 0.2 up to 1) while the fallback checks fail.
whisper::TranscribeOptions whisper_options(const SpeechOptions& s) {
  whisper::TranscribeOptions o;
  o.language = s.language.empty() ? "auto" : s.language;
  o.task = s.task;
  o.initial_prompt = s.prompt;
  o.word_timestamps = s.word_timestamps;
  o.temperatures = {s.temperature};
  for (double t = s.temperature + 0.2; t <= 1.0 + 1e-6; t += 0.2) o.temperatures.push_back(t);
  return o;
}

// Continuous batching when the program has the batched methods (a checkpoint always does; a .vrp
// when it was exported with batch slots), else one request at a time.
Status attach_text(ServedModel& m, const ModelSpec& spec, Metrics& metrics) {
  m.kind = ModelKind::kText;
  m.chat_format = tok::detect_chat_format(m.llama->chat_template(), m.llama->tokenizer());
  llama::BatchOptions bo;
  bo.prefill_chunk = spec.prefill_chunk;
  auto session = llama::BatchSession::create(*m.llama, bo);
  std::unique_ptr<Engine> engine;
  if (session.is_ok()) {
    m.slots = (*session)->slots();
    // A GPU builds each batch size's pipelines at its first call: done here, before the server
    // listens, rather than in the first requests' time (on the CPU there is nothing to build).
    if (m.llama->uses_gpu()) {
      const auto t0 = std::chrono::steady_clock::now();
      VRUN_ASSIGN_OR_RETURN(int calls, (*session)->warm_up());
      std::fprintf(stderr, "vrun serve: %s: warmed %d batched calls in %.2f s\n", m.id.c_str(), calls,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    engine = std::make_unique<BatchTextEngine>(m.id, std::move(*session), metrics);
  } else {
    std::fprintf(stderr, "vrun serve: %s: %s; serving one request at a time\n", spec.path.c_str(),
                 session.status().message().c_str());
    engine = std::make_unique<TextEngine>(m.id, *m.llama, metrics);
  }
  m.scheduler = std::make_unique<Scheduler>(m.id, std::move(engine), spec.max_pending, metrics);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<ServedModel>> load_model(const ModelSpec& spec, Metrics& metrics) {
  auto m = std::make_unique<ServedModel>();
  const std::string name = file_name(spec.path);
  m->id = spec.alias.empty() ? name : spec.alias;
  m->names = {m->id};
  if (name != m->id) m->names.push_back(name);
  m->created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  // The family decides, found once (models/registry).
  VRUN_ASSIGN_OR_RETURN(models::Detected d, models::detect(spec.path));
  if (d.family->task == models::Task::kTextGeneration) {
    VRUN_ASSIGN_OR_RETURN(m->llama, load_llama(spec));
    VRUN_RETURN_IF_ERROR(attach_text(*m, spec, metrics));
    return m;
  }
  if (d.family->task != models::Task::kSpeechRecognition)
    return err(ErrorCode::kInvalidArgument, spec.path, ": a ", d.family->name, " model; vrun serve serves text and speech models");
  speech::LoadOptions lo;
  lo.backend = spec.backend;
  lo.threads = spec.threads;
  VRUN_ASSIGN_OR_RETURN(m->speech, speech::load(spec.path, lo));
  m->device = m->speech->device_description();
  speech::Recognizer* r = m->speech.get();
  auto one = [r](std::span<const float> samples, const SpeechOptions& s) {
    speech::Options o;
    o.whisper = whisper_options(s);
    return r->transcribe(samples, o);
  };
  SpeechEngine::TranscribeBatch batch;
  int max_batch = 1;
  if (r->family() == "parakeet") {
    // Requests queued together share batched encoder calls (the CLI's --batch-size 4).
    batch = [r](const std::vector<std::span<const float>>& files) { return r->transcribe_many(files, speech::Options{}); };
    max_batch = kParakeetBatch;
  }
  m->kind = ModelKind::kSpeech;
  m->scheduler = std::make_unique<Scheduler>(
      m->id, std::make_unique<SpeechEngine>(m->id, one, metrics, batch, max_batch), spec.max_pending, metrics);
  return m;
}

}  // namespace vrun::serve
