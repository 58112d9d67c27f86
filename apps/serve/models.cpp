#include "apps/serve/models.h"

#include <chrono>
#include <filesystem>

#include "apps/serve/engines.h"

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
  lo.context = spec.context;
  return llama::LlamaRunner::load(spec.path, lo);
}

Result<std::unique_ptr<whisper::WhisperRunner>> load_whisper(const ModelSpec& spec) {
  whisper::RunnerOptions ro;
  ro.backend = spec.backend;
  ro.threads = spec.threads;
  return whisper::WhisperRunner::load(spec.path, ro);
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

void attach_text(ServedModel& m, Metrics& metrics, int max_pending) {
  m.kind = ModelKind::kText;
  m.chat_format = tok::detect_chat_format(m.llama->chat_template(), m.llama->tokenizer());
  m.scheduler = std::make_unique<Scheduler>(m.id, std::make_unique<TextEngine>(m.id, *m.llama, metrics),
                                            max_pending, metrics);
}

void attach_speech(ServedModel& m, SpeechEngine::Transcribe fn, Metrics& metrics, int max_pending) {
  m.kind = ModelKind::kSpeech;
  m.scheduler = std::make_unique<Scheduler>(
      m.id, std::make_unique<SpeechEngine>(m.id, std::move(fn), metrics), max_pending, metrics);
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
  const std::string ext = std::filesystem::path(spec.path).extension().string();
  if (ext == ".gguf") {
    VRUN_ASSIGN_OR_RETURN(m->llama, load_llama(spec));
    attach_text(*m, metrics, spec.max_pending);
    return m;
  }
#if VRUN_PARAKEET
  if (parakeet::is_parakeet_checkpoint(spec.path)) {
    parakeet::RunnerOptions po;
    po.backend = spec.backend;
    po.threads = spec.threads;
    VRUN_ASSIGN_OR_RETURN(m->parakeet, parakeet::ParakeetRunner::load(spec.path, po));
    m->device = m->parakeet->device_description();
    parakeet::ParakeetRunner* r = m->parakeet.get();
    parakeet::TranscribeOptions o;
    o.word_timestamps = true;
    auto one = [r, o](std::span<const float> samples, const SpeechOptions&) {
      return r->transcribe(samples, o);
    };
    // Requests queued together share batched encoder calls (the CLI's --batch-size 4).
    auto batch = [r, o](const std::vector<std::span<const float>>& files) {
      return r->transcribe_batch(files, o);
    };
    m->kind = ModelKind::kSpeech;
    m->scheduler = std::make_unique<Scheduler>(
        m->id, std::make_unique<SpeechEngine>(m->id, one, metrics, batch, kParakeetBatch), spec.max_pending,
        metrics);
    return m;
  }
#endif
  auto w = load_whisper(spec);
  if (w.is_ok()) {
    m->whisper = std::move(*w);
    m->device = m->whisper->device_description();
    whisper::WhisperRunner* r = m->whisper.get();
    attach_speech(
        *m,
        [r](std::span<const float> samples, const SpeechOptions& s) {
          return r->transcribe(samples, whisper_options(s));
        },
        metrics, spec.max_pending);
    return m;
  }
  auto l = load_llama(spec);
  if (!l.is_ok())
    return err(ErrorCode::kInvalidArgument, spec.path, ": neither a speech model (", w.status().message(),
               ") nor a text model (", l.status().message(), ")");
  m->llama = std::move(*l);
  attach_text(*m, metrics, spec.max_pending);
  return m;
}

}  // namespace vrun::serve
