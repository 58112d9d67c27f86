#include "apps/serve/models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "apps/serve/engines.h"
#include "models/registry/families.h"
#include "runtime/backend.h"

namespace vrun::serve {
namespace {

// Whisper requests decoded together (streams of its batched encoder and decoder), on a GPU: on
// the CPU the streams' caches and the encoder's arena for four windows would hold several times
// the memory of one request for a few percent of speed (the CPU's GEMMs are as fast on one
// window), so there the requests go one at a time.
constexpr int kSpeechBatch = 4;

std::string file_name(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "folder/"
  return p.filename().string();
}

Result<std::unique_ptr<llama::LlamaRunner>> load_llama(const ModelSpec& spec, int device) {
  llama::LoadOptions lo;
  lo.backend = spec.backend;
  lo.threads = spec.threads;
  lo.device = device;
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
// when it was exported with batch slots), else one request at a time. One engine per runner.
Result<std::unique_ptr<Engine>> text_engine(ServedModel& m, llama::LlamaRunner& runner, const ModelSpec& spec,
                                            Metrics& metrics, int engine_index) {
  llama::BatchOptions bo;
  bo.prefill_chunk = spec.prefill_chunk;
  auto session = llama::BatchSession::create(runner, bo);
  if (!session.is_ok()) {
    if (engine_index == 0)
      std::fprintf(stderr, "vrun serve: %s: %s; serving one request at a time\n", spec.path.c_str(),
                   session.status().message().c_str());
    return std::unique_ptr<Engine>(std::make_unique<TextEngine>(m.id, runner, metrics));
  }
  m.slots += (*session)->slots();
  // A GPU builds each batch size's pipelines at its first call: done here, before the server
  // listens, rather than in the first requests' time (on the CPU there is nothing to build).
  if (runner.uses_gpu()) {
    const auto t0 = std::chrono::steady_clock::now();
    VRUN_ASSIGN_OR_RETURN(int calls, (*session)->warm_up());
    std::fprintf(stderr, "vrun serve: %s: warmed %d batched calls in %.2f s\n", m.id.c_str(), calls,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return std::unique_ptr<Engine>(std::make_unique<BatchTextEngine>(m.id, std::move(*session), metrics, engine_index));
}

Status attach_text(ServedModel& m, const ModelSpec& spec, Metrics& metrics) {
  m.kind = ModelKind::kText;
  m.chat_format = tok::detect_chat_format(m.llama->chat_template(), m.llama->tokenizer());
  std::vector<std::unique_ptr<Engine>> engines;
  VRUN_ASSIGN_OR_RETURN(auto first, text_engine(m, *m.llama, spec, metrics, 0));
  engines.push_back(std::move(first));
  for (auto& r : m.more_llama) {
    VRUN_ASSIGN_OR_RETURN(auto e, text_engine(m, *r, spec, metrics, static_cast<int>(engines.size())));
    engines.push_back(std::move(e));
  }
  m.scheduler = std::make_unique<Scheduler>(m.id, std::move(engines), spec.max_pending, metrics);
  return Status::ok();
}

// The engine of one loaded speech model: requests queued together share its batched calls
// (Parakeet's encoder, Whisper's streams), each with its own options.
std::unique_ptr<Engine> speech_engine(const std::string& id, speech::Recognizer* r, Metrics& metrics) {
  auto one = [r](std::span<const float> samples, const SpeechOptions& s) {
    speech::Options o;
    o.whisper = whisper_options(s);
    return r->transcribe(samples, o);
  };
  SpeechEngine::TranscribeBatch batch;
  if (r->batch() > 1)
    batch = [r](const std::vector<std::span<const float>>& files, const std::vector<const SpeechOptions*>& opts) {
      std::vector<speech::Options> o(opts.size());
      for (size_t k = 0; k < opts.size(); ++k) o[k].whisper = whisper_options(*opts[k]);
      return r->transcribe_many(files, o);
    };
  return std::make_unique<SpeechEngine>(id, one, metrics, batch, r->batch());
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
  // The devices the model goes on: each of spec.devices, or the backend's choice once.
  const std::vector<int> devices = spec.devices.empty() ? std::vector<int>{-1} : spec.devices;
  if (d.family->task == models::Task::kTextGeneration) {
    for (size_t k = 0; k < devices.size(); ++k) {
      VRUN_ASSIGN_OR_RETURN(auto runner, load_llama(spec, devices[k]));
      if (k == 0)
        m->llama = std::move(runner);
      else
        m->more_llama.push_back(std::move(runner));
    }
    VRUN_RETURN_IF_ERROR(attach_text(*m, spec, metrics));
    return m;
  }
  if (d.family->task != models::Task::kSpeechRecognition)
    return err(ErrorCode::kInvalidArgument, spec.path, ": a ", d.family->name, " model; vrun serve serves text and speech models");
  std::vector<std::unique_ptr<Engine>> engines;
  for (size_t k = 0; k < devices.size(); ++k) {
    speech::LoadOptions lo;
    lo.backend = spec.backend;
    lo.threads = spec.threads;
    lo.device = devices[k];
    lo.streams = runs_on_gpu(spec.backend, devices[k]) ? kSpeechBatch : 1;  // Whisper: requests decoded together
    VRUN_ASSIGN_OR_RETURN(auto r, speech::load(spec.path, lo));
    engines.push_back(speech_engine(m->id, r.get(), metrics));
    if (k == 0)
      m->speech = std::move(r);
    else
      m->more_speech.push_back(std::move(r));
  }
  m->device = m->speech->device_description();
  m->kind = ModelKind::kSpeech;
  m->scheduler = std::make_unique<Scheduler>(m->id, std::move(engines), spec.max_pending, metrics);
  return m;
}

}  // namespace vrun::serve
