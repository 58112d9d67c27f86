#include "apps/cli/vad_hook.h"

#include <tuple>

#include "models/onnx/silero_vad.h"
#include "runtime/base/knobs.h"

namespace vrun::cli {

std::string default_vad_model() {
  return cache_dir() + "/models/silero_vad_16k_op15.onnx";
}

Result<SpeechOnly> keep_speech(std::span<const float> samples, const std::string& model_path,
                               const vad::SpanOptions& options) {
  const std::string path = model_path.empty() ? default_vad_model() : model_path;
  auto vad = onnx::SileroVad::load(path);
  if (!vad.is_ok())
    return vad.status().with_context("--vad: loading " + path +
                                     (model_path.empty() ? " (scripts/fetch-models.sh silero-vad fetches it)" : ""));
  const int64_t n = static_cast<int64_t>(samples.size());
  VRUN_ASSIGN_OR_RETURN(auto probs, (*vad)->probabilities(samples.data(), n));
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

}  // namespace vrun::cli
