#include "apps/speech/voice_activity.h"

#include <algorithm>
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

std::vector<Chunk> chunk_speech(const SpeechOnly& speech, double max_s) {
  const int64_t most = static_cast<int64_t>(max_s * 16000.0);
  std::vector<Chunk> chunks;
  int64_t at = 0;  // where the span starts in the gathered samples
  for (const vad::Span& s : speech.spans) {
    const int64_t len = s.end - s.start;
    if (!chunks.empty() && chunks.back().end == at && at + len - chunks.back().begin <= most)
      chunks.back().end = at + len;
    else
      chunks.push_back({at, at + len});
    at += len;
  }
  return chunks;
}

transcript::Transcript join_chunks(std::vector<transcript::Transcript> parts, const std::vector<Chunk>& chunks) {
  transcript::Transcript out;
  for (size_t k = 0; k < parts.size() && k < chunks.size(); ++k) {
    transcript::Transcript& p = parts[k];
    const double offset = static_cast<double>(chunks[k].begin) / 16000.0;
    if (k == 0) {
      out.language = p.language;
      out.language_probability = p.language_probability;
    }
    for (transcript::Segment& s : p.segments) {
      s.start += offset;
      s.end += offset;
      for (auto& w : s.words) {
        w.start += offset;
        w.end += offset;
      }
      out.segments.push_back(std::move(s));
    }
    const transcript::Stats& st = p.stats;
    out.stats.audio_s += st.audio_s;
    out.stats.features_s += st.features_s;
    out.stats.encode_s += st.encode_s;
    out.stats.decode_s += st.decode_s;
    out.stats.align_s += st.align_s;
    out.stats.windows += st.windows;
    out.stats.tokens += st.tokens;
  }
  return out;
}

Result<transcript::Transcript> transcribe_in_chunks(Recognizer& r, const SpeechOnly& speech, const Options& options, int batch,
                                                    const OnProgress& progress) {
  const std::vector<Chunk> chunks = chunk_speech(speech);
  std::vector<transcript::Transcript> parts;
  double done_s = 0;
  const size_t n = static_cast<size_t>(std::max(1, batch));
  for (size_t k = 0; k < chunks.size(); k += n) {
    std::vector<std::span<const float>> spans;
    for (size_t c = k; c < std::min(chunks.size(), k + n); ++c)
      spans.emplace_back(speech.samples.data() + chunks[c].begin, static_cast<size_t>(chunks[c].end - chunks[c].begin));
    auto ts = r.transcribe_many(spans, {options});
    for (size_t c = 0; c < ts.size(); ++c) {
      if (!ts[c].is_ok()) return ts[c].status();
      done_s += static_cast<double>(spans[c].size()) / 16000.0;
      parts.push_back(std::move(*ts[c]));
    }
    if (progress) progress(done_s);
  }
  transcript::Transcript t = join_chunks(std::move(parts), chunks);
  map_to_original(&t, speech.map);
  return t;
}

vad::SpanOptions chunk_span_options() {
  vad::SpanOptions o;
  o.max_speech_s = 30.0;
  return o;
}

void map_to_original(transcript::Segment* s, const vad::TimeMap& map) {
  std::tie(s->start, s->end) = map.to_original(s->start, s->end);
  for (auto& w : s->words) std::tie(w.start, w.end) = map.to_original(w.start, w.end);
}

void map_to_original(transcript::Transcript* t, const vad::TimeMap& map) {
  for (auto& s : t->segments) map_to_original(&s, map);
}

}  // namespace vrun::speech
