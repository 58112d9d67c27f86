#include "apps/common/vad/speech_spans.h"

#include <algorithm>
#include <cmath>

namespace vrun::vad {

std::vector<Span> speech_spans(const std::vector<float>& probs, int64_t total, const SpanOptions& o) {
  const double sr = o.sample_rate, w = o.window;
  const double min_speech = sr * o.min_speech_ms / 1000.0;
  const double pad = sr * o.speech_pad_ms / 1000.0;
  const double max_speech = sr * o.max_speech_s - w - 2 * pad;
  const double min_silence = sr * o.min_silence_ms / 1000.0;
  const double min_silence_at_max = sr * 98 / 1000.0;  // a pause worth cutting at when a span is too long
  const float neg = o.neg_threshold >= 0 ? o.neg_threshold : std::max(o.threshold - 0.15f, 0.01f);

  std::vector<Span> spans;
  bool in_speech = false;
  Span cur;
  bool have_cur = false;
  // silence_from: where the current pause began (0: none); last_pause_end / resume: the last
  // pause long enough to cut at and where speech resumed after it, for over-long spans.
  int64_t silence_from = 0, last_pause_end = 0, resume = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const int64_t at = static_cast<int64_t>(i) * o.window;
    const float p = probs[i];
    if (p >= o.threshold && silence_from) {
      silence_from = 0;
      if (resume < last_pause_end) resume = at;
    }
    if (p >= o.threshold && !in_speech) {
      in_speech = true;
      cur = {at, 0};
      have_cur = true;
      continue;
    }
    if (in_speech && static_cast<double>(at - cur.start) > max_speech) {
      if (last_pause_end) {
        cur.end = last_pause_end;
        spans.push_back(cur);
        have_cur = false;
        if (resume < last_pause_end) {
          in_speech = false;
        } else {
          cur = {resume, 0};
          have_cur = true;
        }
        last_pause_end = resume = silence_from = 0;
      } else {
        cur.end = at;
        spans.push_back(cur);
        have_cur = false;
        last_pause_end = resume = silence_from = 0;
        in_speech = false;
        continue;
      }
    }
    if (p < neg && in_speech) {
      if (!silence_from) silence_from = at;
      if (static_cast<double>(at - silence_from) > min_silence_at_max) last_pause_end = silence_from;
      if (static_cast<double>(at - silence_from) < min_silence) continue;
      cur.end = silence_from;
      if (static_cast<double>(cur.end - cur.start) > min_speech) spans.push_back(cur);
      have_cur = false;
      last_pause_end = resume = silence_from = 0;
      in_speech = false;
    }
  }
  if (have_cur && static_cast<double>(total - cur.start) > min_speech) {
    cur.end = total;
    spans.push_back(cur);
  }
  // Padding: each span grows by `pad` into the silence around it; where two spans are closer than
  // two pads, they meet halfway.
  const int64_t ipad = static_cast<int64_t>(pad);
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i == 0) spans[i].start = std::max<int64_t>(0, spans[i].start - ipad);
    if (i + 1 < spans.size()) {
      const int64_t gap = spans[i + 1].start - spans[i].end;
      if (static_cast<double>(gap) < 2 * pad) {
        spans[i].end += gap / 2;
        spans[i + 1].start = std::max<int64_t>(0, spans[i + 1].start - gap / 2);
      } else {
        spans[i].end = std::min(total, spans[i].end + ipad);
        spans[i + 1].start = std::max<int64_t>(0, spans[i + 1].start - ipad);
      }
    } else {
      spans[i].end = std::min(total, spans[i].end + ipad);
    }
  }
  return spans;
}

std::vector<float> gather_spans(const float* samples, int64_t n, const std::vector<Span>& spans) {
  std::vector<float> out;
  for (const Span& s : spans) {
    const int64_t a = std::clamp<int64_t>(s.start, 0, n), b = std::clamp<int64_t>(s.end, a, n);
    out.insert(out.end(), samples + a, samples + b);
  }
  return out;
}

TimeMap::TimeMap(const std::vector<Span>& spans, int sample_rate) : sample_rate_(sample_rate) {
  int64_t prev_end = 0, skipped = 0;
  for (const Span& s : spans) {
    skipped += s.start - prev_end;
    prev_end = s.end;
    gathered_end_.push_back(s.end - skipped);
    skipped_.push_back(skipped);
    start_.push_back(s.start);
    end_.push_back(s.end);
  }
}

size_t TimeMap::span_at(int64_t sample) const {
  auto it = std::upper_bound(gathered_end_.begin(), gathered_end_.end(), sample);
  return std::min(static_cast<size_t>(it - gathered_end_.begin()), gathered_end_.size() - 1);
}

std::pair<double, double> TimeMap::to_original(double start, double end) const {
  if (gathered_end_.empty()) return {start, end};
  const double sr = sample_rate_;
  const size_t k = span_at(static_cast<int64_t>((start + end) / 2 * sr));
  const double shift = static_cast<double>(skipped_[k]) / sr;
  const double lo = static_cast<double>(start_[k]) / sr, hi = static_cast<double>(end_[k]) / sr;
  return {std::clamp(start + shift, lo, hi), std::clamp(end + shift, lo, hi)};
}

double TimeMap::to_original(double seconds, bool is_end) const {
  if (gathered_end_.empty()) return seconds;
  const int64_t sample = static_cast<int64_t>(seconds * sample_rate_);
  size_t k;
  auto it = std::upper_bound(gathered_end_.begin(), gathered_end_.end(), sample);
  if (is_end && it != gathered_end_.begin() && *(it - 1) == sample) k = static_cast<size_t>(it - gathered_end_.begin() - 1);
  else k = std::min(static_cast<size_t>(it - gathered_end_.begin()), gathered_end_.size() - 1);
  return seconds + static_cast<double>(skipped_[k]) / sample_rate_;
}

}  // namespace vrun::vad
