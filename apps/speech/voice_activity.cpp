#include "apps/speech/voice_activity.h"

#include <tuple>

#include "models/onnx/silero_vad.h"
#include "runtime/base/knobs.h"

namespace vrun::speech {

std::string VoiceActivity::default_model() { return cache_dir() + "/models/silero_vad_16k_op15.onnx"; }

VoiceActivity::~VoiceActivity() = default;

Result<std::shared_ptr<VoiceActivity>> VoiceActivity::load(const std::string& path) {
  const std::string p = path.empty() ? default_model() : path;
  auto vad = onnx::SileroVad::load(p);
  if (!vad.is_ok()) {
    const Status& st = vad.status();
    std::string message = st.message();
    if (message.find(p) == std::string::npos) message = p + ": " + message;  // the file is named once
    if (path.empty()) message += " (scripts/fetch-models.sh silero-vad fetches it)";
    return Status(st.code(), message);
  }
  std::shared_ptr<VoiceActivity> out(new VoiceActivity());
  out->vad_ = std::move(*vad);
  return out;
}

Result<SpeechOnly> VoiceActivity::keep_speech(std::span<const float> samples, const vad::SpanOptions& options) {
  const int64_t n = static_cast<int64_t>(samples.size());
  std::vector<float> probs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    VRUN_ASSIGN_OR_RETURN(probs, vad_->probabilities(samples.data(), n));
  }
  SpeechOnly out;
  out.spans = vad::speech_spans(probs, n, options);
  out.samples = vad::gather_spans(samples.data(), n, out.spans);
  out.map = vad::TimeMap(out.spans, options.sample_rate);
  return out;
}

void map_to_original(transcript::Segment* s, const vad::TimeMap& map) {
  std::tie(s->start, s->end) = map.to_original(s->start, s->end);
  for (auto& w : s->words) std::tie(w.start, w.end) = map.to_original(w.start, w.end);
}

void map_to_original(transcript::Transcript* t, const vad::TimeMap& map) {
  for (auto& s : t->segments) map_to_original(&s, map);
}

}  // namespace vrun::speech
