#include "apps/whisper/whisper_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "apps/common/tokenizer/loaders.h"
#include "apps/common/tokenizer/program_metadata.h"
#include "models/whisper/ct2_whisper.h"
#include "preprocess/whisper_mel.h"

namespace vrun::whisper {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTimePrecision = 0.02;  // seconds per timestamp token
constexpr int kInputStride = 2;          // mel frames per encoder position

std::vector<double> log_softmax(const std::vector<float>& x) {
  double m = kNegInf;
  for (float v : x) m = std::max<double>(m, v);
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  const double lse = m + std::log(s);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) - lse;
  return out;
}

}  // namespace

Result<std::unique_ptr<WhisperRunner>> WhisperRunner::load(const std::string& path, const RunnerOptions& options) {
  std::unique_ptr<WhisperRunner> r(new WhisperRunner());
  if (ends_with(path, ".vrp")) {
    VRUN_ASSIGN_OR_RETURN(r->program_, load_program(path));
  } else if (is_ct2_folder(path)) {
    VRUN_ASSIGN_OR_RETURN(ImportedWhisper m, import_ct2_whisper(path));
    r->notes_ = m.notes;
    BuildSettings bs;
    // Up to whisper-small (768 wide), f32 weights cost at most ~1 GB and run faster on the CPU.
    bs.widen_f16_weights = options.backend != BackendKind::kVulkan && m.config.n_text_state <= 768;
    VRUN_ASSIGN_OR_RETURN(r->program_, build_whisper_program(m.config, m.weights, m.extras, bs));
  } else {
    return err(ErrorCode::kUnsupported, path,
               ": not a Whisper model vrun reads (a faster-whisper / CTranslate2 folder with model.bin, or a .vrp)");
  }
  const MetaValue* runner = r->program_->meta("vrun.runner");
  if (!runner || runner->s != "whisper")
    return err(ErrorCode::kInvalidProgram, path, ": not a Whisper program (vrun.runner is '", runner ? runner->s : "", "')");
  VRUN_ASSIGN_OR_RETURN(r->config_, config_from_program(*r->program_));
  r->extras_ = extras_from_program(*r->program_);
  tok::ProgramMetadataView meta(*r->program_);
  VRUN_ASSIGN_OR_RETURN(r->tokenizer_, tok::load_tokenizer(meta, path));
  auto id = [&](const char* piece) -> int32_t {
    auto v = r->tokenizer_->piece_to_id(piece);
    return v ? *v : -1;
  };
  r->eot_ = id("<|endoftext|>");
  r->sot_ = id("<|startoftranscript|>");
  r->no_timestamps_ = id("<|notimestamps|>");
  r->no_speech_ = id("<|nospeech|>") >= 0 ? id("<|nospeech|>") : id("<|nocaptions|>");
  if (r->eot_ < 0 || r->sot_ < 0 || r->no_timestamps_ < 0)
    return err(ErrorCode::kInvalidProgram, path, ": the tokenizer lacks <|endoftext|>, <|startoftranscript|> or <|notimestamps|>");
  r->timestamp_begin_ = r->no_timestamps_ + 1;
  if (r->timestamp_begin_ + 1501 > r->config_.n_vocab)
    return err(ErrorCode::kInvalidProgram, path, ": vocabulary of ", r->config_.n_vocab, " has no room for 1501 timestamp tokens after id ",
               r->no_timestamps_);
  if (r->config_.multilingual())
    return err(ErrorCode::kUnsupported, path, ": multilingual Whisper models (vocabulary ", r->config_.n_vocab,
               ") need language and task tokens; this runner decodes English-only models");
  for (int64_t t : r->extras_.suppress_tokens)
    if (t >= 0 && t < r->config_.n_vocab) r->suppress_.push_back(static_cast<int32_t>(t));
  // The special tokens openai-whisper always adds to the suppressed set.
  for (const char* s : {"<|translate|>", "<|transcribe|>", "<|startoftranscript|>", "<|startofprev|>", "<|startoflm|>"})
    if (id(s) >= 0) r->suppress_.push_back(id(s));
  if (r->no_speech_ >= 0) r->suppress_.push_back(r->no_speech_);
  std::sort(r->suppress_.begin(), r->suppress_.end());
  r->suppress_.erase(std::unique(r->suppress_.begin(), r->suppress_.end()), r->suppress_.end());
  for (int64_t t : r->extras_.suppress_begin)
    if (t >= 0 && t < r->config_.n_vocab) r->suppress_begin_.push_back(static_cast<int32_t>(t));
  if (r->suppress_begin_.empty()) {  // openai-whisper's suppress_blank: " " and the end token
    auto space = r->tokenizer_->encode(" ");
    r->suppress_begin_.insert(r->suppress_begin_.end(), space.begin(), space.end());
    r->suppress_begin_.push_back(r->eot_);
  }
  ExecutorOptions eo;
  eo.backend = options.backend;
  eo.threads = options.threads;
  VRUN_ASSIGN_OR_RETURN(r->executor_, Executor::create(r->program_, eo));
  return r;
}

Status WhisperRunner::encode(std::span<const float> mel) {
  const int64_t frames = 2 * config_.n_audio_ctx;
  if (static_cast<int64_t>(mel.size()) != config_.n_mels * frames)
    return err(ErrorCode::kInvalidArgument, "whisper encode: ", mel.size(), " feature values; expected ", config_.n_mels, " x ", frames);
  auto out = executor_->run("encode", {TensorView::dense(const_cast<float*>(mel.data()), DType::f32, {1, config_.n_mels, frames})});
  return out.is_ok() ? Status::ok() : out.status();
}

Result<std::vector<float>> WhisperRunner::step(int32_t token, int64_t pos) {
  if (pos >= config_.n_text_ctx)
    return err(ErrorCode::kInvalidArgument, "whisper decode: position ", pos, " past the ", config_.n_text_ctx, "-token context");
  int32_t t = token, p_ = static_cast<int32_t>(pos);
  VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("decode", {TensorView::dense(&t, DType::i32, {1, 1}), TensorView::dense(&p_, DType::i32, {1, 1})},
                                                  {{"pos", pos}}));
  const float* p = outs[0].ptr<float>();
  return std::vector<float>(p, p + config_.n_vocab);
}

// Suppression and the timestamp rules, as CTranslate2's Whisper generate() applies them for
// faster-whisper (the same rules as openai-whisper's SuppressBlank, SuppressTokens and
// ApplyTimestampRules).
void WhisperRunner::filter_logits(std::vector<float>& logits, const std::vector<int32_t>& seq, bool timestamps,
                                  const TranscribeOptions& o) const {
  const int32_t n = static_cast<int32_t>(logits.size());
  auto disable = [&](int32_t from, int32_t to) {  // [from, to)
    for (int32_t i = std::max(from, 0); i < std::min(to, n); ++i) logits[static_cast<size_t>(i)] = kNegInf;
  };
  for (int32_t t : suppress_) disable(t, t + 1);
  if (seq.empty() && o.suppress_blank)
    for (int32_t t : suppress_begin_) disable(t, t + 1);
  if (!timestamps) return;
  disable(no_timestamps_, no_timestamps_ + 1);
  bool check_prob = false;
  if (seq.empty()) {
    disable(0, timestamp_begin_);
    const int32_t last_allowed = timestamp_begin_ + static_cast<int32_t>(std::lround(o.max_initial_timestamp / kTimePrecision));
    disable(last_allowed + 1, n);
  } else {
    const int32_t last = seq.back();
    if (last >= timestamp_begin_) {
      const int32_t penultimate = seq.size() >= 2 ? seq[seq.size() - 2] : last;
      if (penultimate >= timestamp_begin_) {
        disable(timestamp_begin_, n);  // a pair just closed: text or the end must follow
      } else {
        disable(0, eot_);  // an opened pair: a timestamp (not an earlier one) or the end
        disable(timestamp_begin_, last);
        check_prob = true;
      }
    } else {
      check_prob = true;
      for (auto it = seq.rbegin(); it != seq.rend(); ++it)
        if (*it >= timestamp_begin_) {  // timestamps never go back
          disable(timestamp_begin_, *it + 1);
          break;
        }
    }
  }
  if (check_prob) {
    const std::vector<double> lp = log_softmax(logits);
    double max_text = -std::numeric_limits<double>::infinity(), m = max_text;
    for (int32_t i = 0; i < timestamp_begin_; ++i) max_text = std::max(max_text, lp[static_cast<size_t>(i)]);
    for (int32_t i = timestamp_begin_; i < n; ++i) m = std::max(m, lp[static_cast<size_t>(i)]);
    double s = 0;
    if (std::isfinite(m))
      for (int32_t i = timestamp_begin_; i < n; ++i) s += std::exp(lp[static_cast<size_t>(i)] - m);
    const double ts = std::isfinite(m) ? m + std::log(s) : m;
    if (ts > max_text) disable(0, timestamp_begin_);
  }
}

Result<WindowResult> WhisperRunner::decode_window(const TranscribeOptions& o) {
  WindowResult w;
  int64_t pos = 0;
  VRUN_ASSIGN_OR_RETURN(std::vector<float> logits, step(sot_, pos++));
  if (no_speech_ >= 0) {
    const std::vector<double> lp = log_softmax(logits);
    w.no_speech_prob = std::exp(lp[static_cast<size_t>(no_speech_)]);
  }
  if (!o.timestamps) {
    VRUN_ASSIGN_OR_RETURN(logits, step(no_timestamps_, pos++));
  }
  const int max_tokens = std::max(1, std::min<int>(o.max_window_tokens, static_cast<int>(config_.n_text_ctx - pos)));
  for (int i = 0; i < max_tokens; ++i) {
    filter_logits(logits, w.tokens, o.timestamps, o);
    const auto best = std::max_element(logits.begin(), logits.end());
    const int32_t token = static_cast<int32_t>(best - logits.begin());
    const std::vector<double> lp = log_softmax(logits);
    w.sum_logprob += lp[static_cast<size_t>(token)];
    if (token == eot_) break;
    w.tokens.push_back(token);
    if (i + 1 == max_tokens || pos >= config_.n_text_ctx) break;
    VRUN_ASSIGN_OR_RETURN(logits, step(token, pos++));
  }
  w.avg_logprob = w.sum_logprob / static_cast<double>(w.tokens.size() + 1);
  return w;
}

Result<Transcript> WhisperRunner::transcribe(std::span<const float> samples, const TranscribeOptions& o,
                                             const std::function<void(const Segment&)>& on_segment) {
  using preprocess::WhisperMelConfig;
  using preprocess::WhisperMelSpectrogram;
  Transcript out;
  out.stats.audio_s = static_cast<double>(samples.size()) / WhisperMelConfig::kSampleRate;
  auto t0 = Clock::now();
  VRUN_ASSIGN_OR_RETURN(WhisperMelSpectrogram mel, WhisperMelSpectrogram::create({static_cast<int>(config_.n_mels)}));
  const WhisperMelSpectrogram::Stream stream = mel.stream(samples);
  out.stats.features_s += seconds_since(t0);
  const int64_t window = 2 * config_.n_audio_ctx;
  const int64_t content = stream.content_frames();
  const double frame_s = static_cast<double>(WhisperMelConfig::kHop) / WhisperMelConfig::kSampleRate;
  int64_t seek = 0;
  while (seek < content) {
    const int64_t size = std::min(window, content - seek);
    const double time_offset = static_cast<double>(seek) * frame_s;
    // openai-whisper's transcribe(): the window holds `size` frames of the spectrogram (computed
    // on audio padded with 30 s of zeros), then is zero-filled to 3000 frames.
    t0 = Clock::now();
    const preprocess::Features feats = stream.frames(seek, size).slice_frames(0, window, 0.0f);
    out.stats.features_s += seconds_since(t0);
    t0 = Clock::now();
    VRUN_RETURN_IF_ERROR(encode(feats.data));
    out.stats.encode_s += seconds_since(t0);
    t0 = Clock::now();
    VRUN_ASSIGN_OR_RETURN(WindowResult w, decode_window(o));
    out.stats.decode_s += seconds_since(t0);
    ++out.stats.windows;
    out.stats.tokens += static_cast<int>(w.tokens.size());
    if (o.no_speech_threshold >= 0 && w.no_speech_prob > o.no_speech_threshold && !(w.avg_logprob > o.logprob_threshold)) {
      seek += size;  // a silent window
      continue;
    }
    std::vector<Segment> segs;
    auto add = [&](std::vector<int32_t> toks, double start, double end) {
      Segment s;
      s.start = start;
      s.end = end;
      std::vector<int32_t> text;
      for (int32_t t : toks)
        if (t < eot_) text.push_back(t);
      s.text = tokenizer_->decode(text);
      s.tokens = std::move(toks);
      s.avg_logprob = w.avg_logprob;
      s.no_speech_prob = w.no_speech_prob;
      segs.push_back(std::move(s));
    };
    const auto& tk = w.tokens;
    const int32_t tb = timestamp_begin_;
    auto is_ts = [&](size_t i) { return tk[i] >= tb; };
    const bool single_ending = tk.size() >= 2 && !is_ts(tk.size() - 2) && is_ts(tk.size() - 1);
    std::vector<size_t> slices;
    for (size_t i = 1; i < tk.size(); ++i)
      if (is_ts(i) && is_ts(i - 1)) slices.push_back(i);
    if (!slices.empty()) {
      if (single_ending) slices.push_back(tk.size());
      size_t last = 0;
      for (size_t cur : slices) {
        std::vector<int32_t> part(tk.begin() + static_cast<std::ptrdiff_t>(last), tk.begin() + static_cast<std::ptrdiff_t>(cur));
        const double start = time_offset + (part.front() - tb) * kTimePrecision;
        const double end = time_offset + (part.back() - tb) * kTimePrecision;
        add(std::move(part), start, end);
        last = cur;
      }
      if (single_ending) seek += size;
      else seek += static_cast<int64_t>(tk[last - 1] - tb) * kInputStride;
    } else {
      double duration = static_cast<double>(size) * frame_s;
      for (auto it = tk.rbegin(); it != tk.rend(); ++it)
        if (*it >= tb) {
          if (*it != tb) duration = (*it - tb) * kTimePrecision;
          break;
        }
      add(tk, time_offset, time_offset + duration);
      seek += size;
    }
    for (auto& s : segs) {
      // Instantaneous or textless segments carry nothing (both references drop or blank them).
      if (s.start == s.end || s.text.find_first_not_of(" \t\n") == std::string::npos) continue;
      if (on_segment) on_segment(s);
      out.segments.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace vrun::whisper
