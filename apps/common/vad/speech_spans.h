// Speech spans from per-window speech probabilities (Silero VAD's, one per 512 samples at
// 16 kHz), with faster-whisper's rules and defaults, and the map that takes times in the audio
// made of the spans alone back to the original audio.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace vrun::vad {

struct SpanOptions {
  float threshold = 0.5f;        // a window at or above this is speech
  float neg_threshold = -1;      // below this speech ends; < 0: max(threshold - 0.15, 0.01)
  int min_speech_ms = 250;       // shorter spans are dropped
  double max_speech_s = std::numeric_limits<double>::infinity();  // longer spans are cut
  int min_silence_ms = 2000;     // a pause must last this long to end a span
  int speech_pad_ms = 400;       // each span grows by this much on both sides
  int window = 512;              // samples per probability
  int sample_rate = 16000;
};

// [start, end) in samples of the original audio.
struct Span {
  int64_t start = 0, end = 0;
};

// The spans of speech in `total_samples` samples given one probability per window.
std::vector<Span> speech_spans(const std::vector<float>& probs, int64_t total_samples, const SpanOptions& o = {});

// The spans' samples one after another: what is transcribed instead of the whole audio.
std::vector<float> gather_spans(const float* samples, int64_t n, const std::vector<Span>& spans);

// Times in the gathered audio -> times in the original audio.
class TimeMap {
 public:
  TimeMap() = default;  // no spans: the identity
  TimeMap(const std::vector<Span>& spans, int sample_rate);
  // is_end: a time exactly at a span's joint belongs to the span that ends there (an end time),
  // not to the one that starts there.
  double to_original(double seconds, bool is_end = false) const;
  // A stretch [start, end] of the gathered audio (a segment, a word): both ends mapped with the
  // span holding its midpoint and kept inside that span, so a segment the recogniser starts a
  // little before a joint does not begin in the silence that was cut out.
  std::pair<double, double> to_original(double start, double end) const;

 private:
  int sample_rate_ = 16000;
  std::vector<int64_t> gathered_end_;  // per span: where it ends in the gathered audio
  std::vector<int64_t> skipped_;       // per span: samples of silence before it
  std::vector<int64_t> start_, end_;   // per span: where it is in the original audio
  size_t span_at(int64_t gathered_sample) const;
};

}  // namespace vrun::vad
