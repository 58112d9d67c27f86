#include "apps/whisper/whisper_runner.h"
#include "runtime/base/clock.h"
#include "runtime/base/strings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include <zlib.h>

#include "apps/common/tokenizer/loaders.h"
#include "apps/common/tokenizer/program_metadata.h"
#include "apps/whisper/file_job.h"
#include "apps/whisper/word_timing.h"
#include "models/whisper/whisper_import.h"
#include "preprocess/whisper_mel.h"

namespace vrun::whisper {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTimePrecision = 0.02;  // seconds per timestamp token
constexpr int kInputStride = 2;          // mel frames per encoder position

// openai-whisper's tokenizer.LANGUAGES order: language token i is <|startoftranscript|> + 1 + i.
constexpr const char* kLanguages[] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi", "fi", "vi",
    "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk",
    "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
    "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};

}  // namespace

Result<std::unique_ptr<WhisperRunner>> WhisperRunner::load(std::shared_ptr<Program> program, const RunnerOptions& options,
                                                           const std::string& source) {
  std::unique_ptr<WhisperRunner> r(new WhisperRunner());
  r->program_ = std::move(program);
  VRUN_RETURN_IF_ERROR(r->init(source, options));
  return r;
}

Result<std::unique_ptr<WhisperRunner>> WhisperRunner::load(const std::string& path, const RunnerOptions& options) {
  std::unique_ptr<WhisperRunner> r(new WhisperRunner());
  if (ends_with(path, ".vrp")) {
    VRUN_ASSIGN_OR_RETURN(r->program_, load_program(path));
  } else if (is_whisper_checkpoint(path)) {
    VRUN_ASSIGN_OR_RETURN(ImportedWhisper m, import_whisper(path));
    r->notes_ = m.notes;
    BuildSettings bs;
    // Up to whisper-small (768 wide), f32 weights cost at most ~1 GB and run faster on the CPU;
    // a GPU reads the f16 ones.
    bs.widen_f16_weights = !runs_on_gpu(options.backend, options.device) && m.config.n_text_state <= 768;
    if (options.fused_encoder) bs.fused_encoder = *options.fused_encoder;
    bs.decode_batch = options.decode_batch;
    bs.streams = options.streams;
    VRUN_ASSIGN_OR_RETURN(r->program_, build_whisper_program(m.config, m.weights, m.extras, bs));
  } else {
    return err(ErrorCode::kUnsupported, path,
               ": not a Whisper model vrun reads (a faster-whisper / CTranslate2 folder, a Hugging Face Whisper folder, a whisper.cpp ggml file, or a .vrp)");
  }
  VRUN_RETURN_IF_ERROR(r->init(path, options));
  return r;
}

Status WhisperRunner::init(const std::string& path, const RunnerOptions& options) {
  WhisperRunner* r = this;
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
  r->sot_prev_ = id("<|startofprev|>");
  r->transcribe_ = id("<|transcribe|>");
  r->translate_ = id("<|translate|>");
  if (r->timestamp_begin_ + 1501 > r->config_.n_vocab)
    return err(ErrorCode::kInvalidProgram, path, ": vocabulary of ", r->config_.n_vocab, " has no room for 1501 timestamp tokens after id ",
               r->no_timestamps_);
  if (r->config_.multilingual()) {
    // Old vocabularies have 99 language tokens, large-v3's 100 (with <|yue|>), in this order.
    for (const char* code : kLanguages)
      if (id((std::string("<|") + code + "|>").c_str()) >= 0) r->languages_.emplace_back(code, id((std::string("<|") + code + "|>").c_str()));
    if (r->languages_.empty() || r->transcribe_ < 0 || r->translate_ < 0)
      return err(ErrorCode::kInvalidProgram, path, ": a multilingual vocabulary (", r->config_.n_vocab,
                 " tokens) without language tokens or <|transcribe|> / <|translate|>");
  }
  if (r->sot_prev_ < 0)
    return err(ErrorCode::kInvalidProgram, path, ": the tokenizer lacks <|startofprev|>");
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
  if (const MetaValue* b = r->program_->meta("whisper.decode_batch"); b && b->type == MetaType::kInt && b->i > 1 &&
      r->program_->method("decode_batch"))
    r->decode_batch_ = static_cast<int>(b->i);
  if (const MetaValue* st = r->program_->meta("whisper.streams"); st && st->type == MetaType::kInt && st->i > 1) {
    const MetaValue* rows = r->program_->meta("whisper.stream_rows");
    bool complete = rows && rows->type == MetaType::kInts && !rows->ints.empty() && rows->ints.back() == st->i &&
                    r->program_->method("encode_streams") && r->program_->method("prefill_stream") &&
                    r->program_->method("select_stream");
    for (size_t i = 0; complete && i < rows->ints.size(); ++i)
      complete = (i == 0 || rows->ints[i] > rows->ints[i - 1]) &&
                 r->program_->method("step_streams_" + std::to_string(rows->ints[i])) != nullptr;
    if (!complete) return err(ErrorCode::kInvalidProgram, path, ": whisper.streams is ", st->i, " but the stream methods are incomplete");
    r->streams_ = static_cast<int>(st->i);
    r->stream_rows_ = rows->ints;
  }
  r->has_prefill_ = r->program_->method("prefill") != nullptr;
  r->has_step_ = r->program_->method("step") != nullptr;
  r->rng_.seed(0);
  ExecutorOptions eo;
  eo.backend = options.backend;
  eo.threads = options.threads;
  eo.device = options.device;
  VRUN_ASSIGN_OR_RETURN(r->executor_, Executor::create(r->program_, eo));
  return Status::ok();
}

Status WhisperRunner::encode(std::span<const float> mel) {
  const int64_t frames = 2 * config_.n_audio_ctx;
  if (static_cast<int64_t>(mel.size()) != config_.n_mels * frames)
    return err(ErrorCode::kInvalidArgument, "whisper encode: ", mel.size(), " feature values; expected ", config_.n_mels, " x ", frames);
  auto out = executor_->run("encode", {TensorView::dense(const_cast<float*>(mel.data()), DType::f32, {1, config_.n_mels, frames})});
  return out.is_ok() ? Status::ok() : out.status();
}

Result<std::pair<std::string, double>> WhisperRunner::detect_language() {
  if (!multilingual()) return std::pair<std::string, double>{"en", 1.0};
  const int32_t t = sot_;
  VRUN_ASSIGN_OR_RETURN(std::vector<float> logits, forward(std::span<const int32_t>(&t, 1), 0));
  // Softmax over the language tokens only (openai-whisper's detect_language()).
  double m = kNegInf;
  for (const auto& l : languages_) m = std::max<double>(m, logits[static_cast<size_t>(l.second)]);
  double s = 0;
  size_t best = 0;
  for (size_t i = 0; i < languages_.size(); ++i) {
    s += std::exp(logits[static_cast<size_t>(languages_[i].second)] - m);
    if (logits[static_cast<size_t>(languages_[i].second)] > logits[static_cast<size_t>(languages_[best].second)]) best = i;
  }
  return std::pair<std::string, double>{languages_[best].first, std::exp(logits[static_cast<size_t>(languages_[best].second)] - m) / s};
}

double WhisperRunner::compression_ratio(const std::vector<int32_t>& tokens) const {
  std::vector<int32_t> text;
  for (int32_t t : tokens)
    if (t < eot_) text.push_back(t);
  std::string s = tokenizer_->decode(text);
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  s = b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
  if (s.empty()) return 0.0;
  uLongf n = compressBound(static_cast<uLong>(s.size()));
  std::vector<Bytef> out(n);
  if (compress2(out.data(), &n, reinterpret_cast<const Bytef*>(s.data()), static_cast<uLong>(s.size()), Z_DEFAULT_COMPRESSION) != Z_OK)
    return 0.0;
  return static_cast<double>(s.size()) / static_cast<double>(n);
}

Status WhisperRunner::check_options(const TranscribeOptions& o) const {
  if (o.task != "transcribe" && o.task != "translate")
    return err(ErrorCode::kInvalidArgument, "task '", o.task, "' (expected transcribe or translate)");
  if (o.beam_size < 1 || o.best_of < 1)
    return err(ErrorCode::kInvalidArgument, "beam size ", o.beam_size, " and best-of ", o.best_of, " must be at least 1");
  if (o.beam_size > 1 && o.beam_size > decode_batch_)
    return err(ErrorCode::kInvalidArgument, "beam size ", o.beam_size, " exceeds the ", decode_batch_,
               " rows of this model's batched decoder (a checkpoint loads with as many rows as RunnerOptions::decode_batch asks)");
  for (double t : o.temperatures)
    if (!(t >= 0) || !std::isfinite(t)) return err(ErrorCode::kInvalidArgument, "temperature ", t, " (expected >= 0)");
  if (o.word_timestamps && extras_.alignment_heads.size() < 2)
    return err(ErrorCode::kUnsupported, "word timestamps need the model's alignment heads (config.json alignment_heads or "
               "generation_config.json), and this model has none");
  const std::string language = o.language == "auto" ? "" : o.language;
  if (!multilingual()) {
    if (!language.empty() && language != "en")
      return err(ErrorCode::kInvalidArgument, "language '", language, "': this is an English-only model (use -l en or a multilingual model)");
    if (o.task == "translate")
      return err(ErrorCode::kInvalidArgument, "task translate: this is an English-only model");
  } else if (!language.empty()) {
    bool known = false;
    for (const auto& l : languages_) known = known || l.first == language;
    if (!known) return err(ErrorCode::kInvalidArgument, "language '", language, "' is not one of this model's ", languages_.size(), " languages");
  }
  return Status::ok();
}

Result<std::unique_ptr<WhisperRunner::FileJob>> WhisperRunner::start_job(std::span<const float> samples,
                                                                          const TranscribeOptions& o) {
  using preprocess::WhisperMelConfig;
  using preprocess::WhisperMelSpectrogram;
  VRUN_RETURN_IF_ERROR(check_options(o));
  auto j = std::make_unique<FileJob>();
  j->o = o;
  j->language = o.language == "auto" ? "" : o.language;
  if (!multilingual()) j->language = "en";
  j->rng.seed(o.seed);
  j->out.stats.audio_s = static_cast<double>(samples.size()) / WhisperMelConfig::kSampleRate;
  const auto t0 = Clock::now();
  VRUN_ASSIGN_OR_RETURN(WhisperMelSpectrogram mel, WhisperMelSpectrogram::create({static_cast<int>(config_.n_mels)}));
  j->stream = mel.stream(samples);
  j->out.stats.features_s += seconds_since(t0);
  j->content = j->stream.content_frames();
  if (!o.initial_prompt.empty()) {
    std::string text = o.initial_prompt;
    const size_t b = text.find_first_not_of(" \t\n\r");
    text = b == std::string::npos ? "" : text.substr(b, text.find_last_not_of(" \t\n\r") - b + 1);
    j->all_tokens = tokenizer_->encode(" " + text, tok::EncodeOptions{false, false});
  }
  return j;
}

std::vector<float> WhisperRunner::next_window(FileJob& j) {
  // openai-whisper's transcribe(): the window holds `size` frames of the spectrogram (computed
  // on audio padded with 30 s of zeros), then is zero-filled to 3000 frames.
  const int64_t window = 2 * config_.n_audio_ctx;
  j.size = std::min(window, j.content - j.seek);
  const auto t0 = Clock::now();
  preprocess::Features feats = j.stream.frames(j.seek, j.size).slice_frames(0, window, 0.0f);
  j.out.stats.features_s += seconds_since(t0);
  return std::move(feats.data);
}

Result<WhisperRunner::Prompt> WhisperRunner::window_prompt(FileJob& j) {
  if (j.language.empty()) {
    VRUN_ASSIGN_OR_RETURN(auto detected, detect_language());
    j.language = detected.first;
    j.out.language_probability = detected.second;
  }
  const std::span<const int32_t> previous(j.all_tokens.data() + j.prompt_reset_since, j.all_tokens.size() - j.prompt_reset_since);
  return make_prompt(j.o, j.language, previous);
}

Result<Transcript> WhisperRunner::transcribe(std::span<const float> samples, const TranscribeOptions& o,
                                             const std::function<void(const Segment&)>& on_segment,
                                             const std::function<void(double)>& on_progress) {
  VRUN_ASSIGN_OR_RETURN(std::unique_ptr<FileJob> j, start_job(samples, o));
  j->on_segment = on_segment;
  j->on_progress = on_progress;
  while (!j->done()) {
    const std::vector<float> mel = next_window(*j);
    auto t0 = Clock::now();
    VRUN_RETURN_IF_ERROR(encode(mel));
    j->out.stats.encode_s += seconds_since(t0);
    t0 = Clock::now();
    VRUN_ASSIGN_OR_RETURN(Prompt prompt, window_prompt(*j));
    std::swap(rng_, j->rng);
    auto w = decode_with_fallback(j->o, prompt);
    std::swap(rng_, j->rng);
    if (!w.is_ok()) return w.status();
    j->out.stats.decode_s += seconds_since(t0);
    VRUN_RETURN_IF_ERROR(finish_window(*j, std::move(*w)));
  }
  return finish_job(*j);
}

Transcript WhisperRunner::finish_job(FileJob& j) {
  j.out.language = j.language.empty() ? "en" : j.language;
  return std::move(j.out);
}

Status WhisperRunner::finish_window(FileJob& j, WindowResult w) {
  using preprocess::WhisperMelConfig;
  const TranscribeOptions& o = j.o;
  Transcript& out = j.out;
  int64_t& seek = j.seek;
  const int64_t size = j.size, content = j.content;
  const double frame_s = static_cast<double>(WhisperMelConfig::kHop) / WhisperMelConfig::kSampleRate;
  const double time_offset = static_cast<double>(seek) * frame_s;
  ++out.stats.windows;
  out.stats.tokens += static_cast<int>(w.tokens.size());
  if (o.no_speech_threshold >= 0 && w.no_speech_prob > o.no_speech_threshold && !(w.avg_logprob > o.logprob_threshold)) {
    seek += size;  // a silent window
    if (j.on_progress) j.on_progress(static_cast<double>(std::min(seek, content)) * frame_s);
    return Status::ok();
  }
  std::vector<Segment> segs;
  auto add = [&](std::vector<int32_t> toks, double start, double end) {
    Segment s;
    s.start = start;
    s.end = end;
    s.tokens = std::move(toks);
    s.avg_logprob = w.avg_logprob;
    s.no_speech_prob = w.no_speech_prob;
    s.temperature = w.temperature;
    s.compression_ratio = w.compression_ratio;
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
  std::vector<std::vector<int32_t>> text_tokens;
  for (auto& s : segs) {
    std::vector<int32_t> text;
    for (int32_t t : s.tokens)
      if (t < eot_) text.push_back(t);
    s.text = tokenizer_->decode(text);
    text_tokens.push_back(std::move(text));
  }
  if (o.word_timestamps) {
    const auto t0 = Clock::now();
    VRUN_ASSIGN_OR_RETURN(Prompt sot, make_prompt(o, j.language, {}));
    std::vector<int32_t> sot_sequence = sot.before_sot;
    for (int32_t t : sot.after_sot)
      if (t != no_timestamps_) sot_sequence.push_back(t);
    VRUN_RETURN_IF_ERROR(add_word_timestamps(segs, text_tokens, sot_sequence, size, time_offset, j.language, j.last_speech_timestamp, o));
    // faster-whisper's get_end(): the last word's end, else the last segment's.
    double last_end = segs.empty() ? -1.0 : segs.back().end;
    for (auto it = segs.rbegin(); it != segs.rend(); ++it)
      if (!it->words.empty()) {
        last_end = it->words.back().end;
        break;
      }
    // It seeks to the last word's end unless the window closed on its own.
    if (!single_ending && !segs.empty() && last_end > time_offset) seek = static_cast<int64_t>(std::nearbyint(last_end / frame_s));
    if (!segs.empty()) j.last_speech_timestamp = last_end;
    out.stats.align_s += seconds_since(t0);
  }
  for (auto& s : segs) {
    // Instantaneous or textless segments carry nothing (both references drop or blank them).
    if (s.start == s.end || s.text.find_first_not_of(" \t\n") == std::string::npos) continue;
    j.all_tokens.insert(j.all_tokens.end(), s.tokens.begin(), s.tokens.end());
    if (j.on_segment) j.on_segment(s);
    out.segments.push_back(std::move(s));
  }
  if (!o.condition_on_previous_text || w.temperature > o.prompt_reset_on_temperature) j.prompt_reset_since = j.all_tokens.size();
  if (j.on_progress) j.on_progress(static_cast<double>(std::min(seek, content)) * frame_s);
  return Status::ok();
}

// faster-whisper's add_word_timestamps() for the segments of one window.
Status WhisperRunner::add_word_timestamps(std::vector<Segment>& segs, const std::vector<std::vector<int32_t>>& text_tokens,
                                          const std::vector<int32_t>& sot_sequence, int64_t num_frames, double time_offset,
                                          const std::string& language, double last_speech_timestamp,
                                          const TranscribeOptions& o) {
  std::vector<int32_t> text;
  for (const auto& t : text_tokens) text.insert(text.end(), t.begin(), t.end());
  const int64_t frames = num_frames / 2;  // encoder positions
  if (text.empty() || frames == 0 || extras_.alignment_heads.size() < 2) return Status::ok();
  std::vector<int32_t> tokens = sot_sequence;
  tokens.push_back(no_timestamps_);
  tokens.insert(tokens.end(), text.begin(), text.end());
  tokens.push_back(eot_);
  const auto seq = static_cast<int64_t>(tokens.size());
  const int64_t max_seq = std::min(config_.n_text_ctx, config_.n_text_ctx / 2 + 8);  // the align method's bound
  if (seq > max_seq)
    return err(ErrorCode::kInvalidArgument, "word timestamps: ", seq, " tokens in a window; the alignment takes at most ", max_seq);
  std::vector<int32_t> positions(static_cast<size_t>(seq));
  std::iota(positions.begin(), positions.end(), 0);
  VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("align", {TensorView::dense(tokens.data(), DType::i32, {1, seq}),
                                                             TensorView::dense(positions.data(), DType::i32, {1, seq})}));
  if (outs.size() < 2) return err(ErrorCode::kInvalidProgram, "word timestamps: the align method returns no alignment scores");
  const int64_t heads = outs[1].shape[1], ctx = outs[1].shape[3];
  const std::vector<float> scores(outs[1].ptr<float>(), outs[1].ptr<float>() + heads * seq * ctx);
  const auto sot_len = static_cast<int64_t>(sot_sequence.size());
  const auto n_text = static_cast<int64_t>(text.size());
  // Each text token's probability among the text tokens, from the position before it.
  std::vector<double> probs;
  const float* logits = outs[0].ptr<float>();
  for (int64_t t = 0; t < n_text; ++t) {
    const float* row = logits + (sot_len + t) * config_.n_vocab;
    const float m = *std::max_element(row, row + eot_);
    double s = 0;
    for (int32_t v = 0; v < eot_; ++v) s += std::exp(static_cast<double>(row[v]) - m);
    probs.push_back(std::exp(static_cast<double>(row[text[static_cast<size_t>(t)]]) - m) / s);
  }
  const std::vector<float> matrix = alignment_matrix(scores, heads, seq, ctx, std::min(frames, ctx), sot_len, n_text + 1);
  const auto path = negative_dtw(matrix, n_text + 1, std::min(frames, ctx));
  std::vector<int32_t> with_eot = text;
  with_eot.push_back(eot_);
  std::vector<std::string> words;
  std::vector<std::vector<int32_t>> word_tokens;
  static const std::vector<std::string> no_spaces = {"zh", "ja", "th", "lo", "my", "yue"};
  const bool split_on_spaces = std::find(no_spaces.begin(), no_spaces.end(), language) == no_spaces.end();
  split_to_word_tokens(with_eot, eot_, split_on_spaces,
                       [&](int32_t id) {
                         std::string b;
                         tokenizer_->append_token_bytes(id, false, false, b);
                         return b;
                       },
                       words, word_tokens);
  std::vector<WordTiming> alignment = words_from_alignment(words, word_tokens, path, probs);
  const auto [median_duration, max_duration] = clamp_sentence_end_words(alignment);
  merge_punctuations(alignment, o.prepend_punctuations, o.append_punctuations);
  auto round2 = [](double v) { return std::nearbyint(v * 100.0) / 100.0; };
  double last_speech = last_speech_timestamp;  // the end of speech before each segment
  size_t word_index = 0;
  for (size_t si = 0; si < segs.size(); ++si) {
    Segment& seg = segs[si];
    size_t saved_tokens = 0;
    std::vector<transcript::Word> ws;
    while (word_index < alignment.size() && saved_tokens < text_tokens[si].size()) {
      const WordTiming& t = alignment[word_index];
      if (!t.word.empty()) ws.push_back({round2(time_offset + t.start), round2(time_offset + t.end), t.word, t.probability});
      saved_tokens += t.tokens.size();
      ++word_index;
    }
    if (!ws.empty()) {
      // Long first words after a pause and words past the segment's own bounds are trimmed.
      if (ws[0].end - last_speech > median_duration * 4 &&
          (ws[0].end - ws[0].start > max_duration || (ws.size() > 1 && ws[1].end - ws[0].start > max_duration * 2))) {
        if (ws.size() > 1 && ws[1].end - ws[1].start > max_duration) {
          const double boundary = std::max(ws[1].end / 2, ws[1].end - max_duration);
          ws[0].end = ws[1].start = boundary;
        }
        ws[0].start = std::max(0.0, ws[0].end - max_duration);
      }
      if (seg.start < ws[0].end && seg.start - 0.5 > ws[0].start)
        ws[0].start = std::max(0.0, std::min(ws[0].end - median_duration, seg.start));
      else
        seg.start = ws[0].start;
      if (seg.end > ws.back().start && seg.end + 0.5 < ws.back().end)
        ws.back().end = std::max(ws.back().start + median_duration, seg.end);
      else
        seg.end = ws.back().end;
      last_speech = seg.end;
    }
    seg.words = std::move(ws);
  }
  return Status::ok();
}

}  // namespace vrun::whisper
