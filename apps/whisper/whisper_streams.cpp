// Several files transcribed together (WhisperRunner::transcribe_many): each round encodes the
// next window of every file in the round with one encoder call and decodes the windows' greedy
// steps together, each file in a stream of its own (its own cross K/V, cache region and
// position); the rest of a window (fallback temperatures, beam search, word timestamps) runs
// from that window's cross K/V copied where the one-window methods read it.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

#include "apps/whisper/file_job.h"
#include "apps/whisper/whisper_runner.h"
#include "runtime/base/clock.h"

namespace vrun::whisper {

Status WhisperRunner::encode_streams(std::span<const float> mels, int64_t n) {
  const int64_t frames = 2 * config_.n_audio_ctx;
  if (n < 1 || n > streams_ || static_cast<int64_t>(mels.size()) != n * config_.n_mels * frames)
    return err(ErrorCode::kInvalidArgument, "whisper encode: ", mels.size(), " feature values for ", n, " windows of ", config_.n_mels,
               " x ", frames, " (at most ", streams_, " windows)");
  // As many windows a call as the encoder's attention scores ([windows, heads, 1500, 1500] f32)
  // fit in one tensor of the device.
  int64_t chunk = n;
  const uint64_t most = executor_->max_tensor_bytes();
  const auto scores = static_cast<uint64_t>(config_.n_audio_head * config_.n_audio_ctx * config_.n_audio_ctx) * 4;
  if (most > 0) chunk = std::clamp<int64_t>(static_cast<int64_t>(most / scores), 1, n);
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t k = std::min(chunk, n - first);
    float* at = const_cast<float*>(mels.data()) + first * config_.n_mels * frames;
    auto out = executor_->run("encode_streams", {TensorView::dense(at, DType::f32, {k, config_.n_mels, frames})}, {{"first", first}});
    if (!out.is_ok()) return out.status();
  }
  return Status::ok();
}

Status WhisperRunner::select_stream(int slot) {
  auto out = executor_->run("select_stream", {}, {{"slot", slot}});
  return out.is_ok() ? Status::ok() : out.status();
}

// decode_greedy for every row with a prompt (row r: stream r), all rows' steps in one call.
Result<std::vector<WindowResult>> WhisperRunner::decode_streams_greedy(const std::vector<const TranscribeOptions*>& opts,
                                                                       const std::vector<const Prompt*>& prompts) {
  const size_t n = prompts.size();
  const auto V = static_cast<size_t>(config_.n_vocab);
  const int64_t ctx = config_.n_text_ctx;
  struct Row {
    bool live = false;
    int steps = 0, done_steps = 0;
    int64_t pos = 0;
  };
  std::vector<Row> rows(n);
  std::vector<WindowResult> out(n);
  // One step of decode_greedy on row r's logits; the row goes on (its last token fed at `pos`)
  // until the end token or its step limit.
  auto advance = [&](size_t r, float* logits) {
    rows[r].live = greedy_step(logits, *opts[r], out[r]) && ++rows[r].done_steps < rows[r].steps;
  };
  // One step over the first B streams for the rows with a token (B: the smallest step method
  // that holds them all); a row without one is given its stream's next position, which it never
  // reads and its next write overwrites. Row r's logits at r * V of the result.
  std::vector<int32_t> tokens, positions, cache_rows;
  auto step = [&](const std::vector<int32_t>& token_of_row) -> Result<float*> {
    size_t hi = 0;
    for (size_t r = 0; r < n; ++r)
      if (token_of_row[r] >= 0) hi = r + 1;
    const auto it = std::lower_bound(stream_rows_.begin(), stream_rows_.end(), static_cast<int64_t>(hi));
    if (hi == 0 || it == stream_rows_.end()) return err(ErrorCode::kInternal, "whisper streams: no step method for ", hi, " rows");
    const int64_t B = *it;
    tokens.assign(static_cast<size_t>(B), eot_);
    positions.assign(static_cast<size_t>(B), 0);
    cache_rows.assign(static_cast<size_t>(B), 0);
    for (size_t b = 0; b < static_cast<size_t>(B); ++b) {
      const int64_t pos = b < n ? std::min(rows[b].pos, ctx - 1) : 0;
      if (b < n && token_of_row[b] >= 0) tokens[b] = token_of_row[b];
      positions[b] = static_cast<int32_t>(pos);
      cache_rows[b] = static_cast<int32_t>(static_cast<int64_t>(b) * ctx + pos);
    }
    VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("step_streams_" + std::to_string(B),
                                                    {TensorView::dense(tokens.data(), DType::i32, {B, 1}),
                                                     TensorView::dense(positions.data(), DType::i32, {B, 1}),
                                                     TensorView::dense(cache_rows.data(), DType::i32, {B})}));
    for (size_t r = 0; r < hi; ++r)
      if (token_of_row[r] >= 0) ++rows[r].pos;
    return outs[0].ptr<float>();
  };
  // The prompts, as prime() feeds them: each part of several tokens through prefill_stream, the
  // one-token parts of every stream together through a step (forward() runs step for those).
  std::vector<std::vector<float>> logits(n);
  for (int part = 0; part < 2; ++part) {
    std::vector<int32_t> single(n, -1);
    for (size_t r = 0; r < n; ++r) {
      if (!prompts[r]) continue;
      const std::vector<int32_t>& toks = part == 0 ? prompts[r]->before_sot : prompts[r]->after_sot;
      const auto seq = static_cast<int64_t>(toks.size());
      if (rows[r].pos + seq > ctx)
        return err(ErrorCode::kInvalidArgument, "whisper decode: ", seq, " tokens at position ", rows[r].pos, " do not fit the ", ctx,
                   "-token context");
      if (seq == 1) single[r] = toks[0];
      if (seq <= 1) continue;
      std::vector<int32_t> t(toks), p(static_cast<size_t>(seq));
      std::iota(p.begin(), p.end(), static_cast<int32_t>(rows[r].pos));
      VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("prefill_stream",
                                                      {TensorView::dense(t.data(), DType::i32, {1, seq}),
                                                       TensorView::dense(p.data(), DType::i32, {1, seq})},
                                                      {{"pos", rows[r].pos}, {"slot", static_cast<int64_t>(r)}}));
      logits[r].assign(outs[0].ptr<float>(), outs[0].ptr<float>() + V);
      rows[r].pos += seq;
    }
    if (std::any_of(single.begin(), single.end(), [](int32_t t) { return t >= 0; })) {
      VRUN_ASSIGN_OR_RETURN(float* l, step(single));
      for (size_t r = 0; r < n; ++r)
        if (single[r] >= 0) logits[r].assign(l + r * V, l + (r + 1) * V);
    }
    if (part == 0)
      for (size_t r = 0; r < n; ++r)
        if (prompts[r]) out[r].no_speech_prob = no_speech_prob(logits[r].data());
  }
  for (size_t r = 0; r < n; ++r) {
    if (!prompts[r]) continue;
    rows[r].steps = max_steps(*prompts[r], *opts[r]);
    advance(r, logits[r].data());
  }
  // The sampled tokens, every live stream's in one step.
  std::vector<int32_t> next(n);
  for (;;) {
    bool any = false;
    for (size_t r = 0; r < n; ++r) {
      next[r] = rows[r].live ? out[r].tokens.back() : -1;
      any = any || rows[r].live;
    }
    if (!any) break;
    VRUN_ASSIGN_OR_RETURN(float* l, step(next));
    for (size_t r = 0; r < n; ++r)
      if (next[r] >= 0) advance(r, l + r * V);
  }
  return out;
}

std::vector<Result<Transcript>> WhisperRunner::transcribe_many(const std::vector<std::span<const float>>& inputs,
                                                               const std::vector<TranscribeOptions>& options,
                                                               const std::function<void(size_t, double)>& on_progress) {
  std::vector<Result<Transcript>> results;
  for (size_t i = 0; i < inputs.size(); ++i) results.emplace_back(err(ErrorCode::kInternal, "not transcribed"));
  if (options.size() != 1 && options.size() != inputs.size()) {
    for (auto& r : results)
      r = err(ErrorCode::kInvalidArgument, "whisper: ", options.size(), " option sets for ", inputs.size(), " inputs");
    return results;
  }
  auto options_of = [&](size_t i) -> const TranscribeOptions& { return options.size() == 1 ? options[0] : options[i]; };
  auto progress_of = [&](size_t i) {
    return on_progress ? std::function<void(double)>([&on_progress, i](double s) { on_progress(i, s); }) : std::function<void(double)>{};
  };
  if (streams_ <= 1) {
    for (size_t i = 0; i < inputs.size(); ++i) results[i] = transcribe(inputs[i], options_of(i), {}, progress_of(i));
    return results;
  }
  struct Active {
    size_t index;
    std::unique_ptr<FileJob> job;
    Status failed;
  };
  std::vector<Active> active;
  size_t next = 0;
  const int64_t per_window = config_.n_mels * 2 * config_.n_audio_ctx;
  std::vector<float> mels;
  for (;;) {
    while (active.size() < static_cast<size_t>(streams_) && next < inputs.size()) {
      const size_t i = next++;
      auto j = start_job(inputs[i], options_of(i));
      if (!j.is_ok()) {
        results[i] = j.status();
      } else if ((*j)->done()) {
        results[i] = finish_job(**j);
      } else {
        (*j)->on_progress = progress_of(i);
        active.push_back({i, std::move(*j), Status::ok()});
      }
    }
    if (active.empty()) break;
    const size_t n = active.size();
    mels.resize(n * static_cast<size_t>(per_window));
    for (size_t k = 0; k < n; ++k) {
      const std::vector<float> m = next_window(*active[k].job);
      std::copy(m.begin(), m.end(), mels.begin() + static_cast<std::ptrdiff_t>(k * per_window));
    }
    auto t0 = Clock::now();
    const Status encoded = encode_streams(mels, static_cast<int64_t>(n));
    const double encode_share = seconds_since(t0) / static_cast<double>(n);  // the call served every file
    for (auto& a : active) {
      a.job->out.stats.encode_s += encode_share;
      a.failed = encoded;
    }
    // Whose window is in cross.kv (the one-window methods' cross K/V): -1, none of this round's.
    int selected = -1;
    auto select = [&](size_t k) -> Status {
      if (selected == static_cast<int>(k)) return Status::ok();
      selected = static_cast<int>(k);
      return select_stream(static_cast<int>(k));
    };
    std::vector<std::optional<Prompt>> prompts(n);
    std::vector<const TranscribeOptions*> greedy_opts(n, nullptr);
    std::vector<const Prompt*> greedy_prompts(n, nullptr);
    t0 = Clock::now();
    for (size_t k = 0; k < n; ++k) {
      FileJob& j = *active[k].job;
      if (!active[k].failed.is_ok()) continue;
      if (j.language.empty()) active[k].failed = select(k);  // language detection reads cross.kv
      if (!active[k].failed.is_ok()) continue;
      auto p = window_prompt(j);
      if (!p.is_ok()) {
        active[k].failed = p.status();
        continue;
      }
      prompts[k] = std::move(*p);
      const bool greedy_first = j.o.beam_size == 1 && (j.o.temperatures.empty() || j.o.temperatures.front() == 0);
      if (greedy_first) {
        greedy_opts[k] = &j.o;
        greedy_prompts[k] = &*prompts[k];
      }
    }
    size_t greedy_rows = 0;
    for (const Prompt* p : greedy_prompts) greedy_rows += p != nullptr;
    std::vector<WindowResult> firsts(n);
    if (greedy_rows > 0) {
      auto r = decode_streams_greedy(greedy_opts, greedy_prompts);
      for (size_t k = 0; k < n; ++k)
        if (greedy_prompts[k] && !r.is_ok()) active[k].failed = r.status();
      if (r.is_ok()) firsts = std::move(*r);
    }
    const double shared = seconds_since(t0) / static_cast<double>(n);
    for (size_t k = 0; k < n; ++k) {
      FileJob& j = *active[k].job;
      if (!active[k].failed.is_ok()) continue;
      t0 = Clock::now();
      const bool have_first = greedy_prompts[k] != nullptr;
      Status st = have_first ? Status::ok() : select(k);
      Result<WindowResult> w = st;
      if (st.is_ok()) {
        std::swap(rng_, j.rng);
        w = decode_with_fallback(j.o, *prompts[k], have_first ? &firsts[k] : nullptr, [&] { return select(k); });
        std::swap(rng_, j.rng);
      }
      j.out.stats.decode_s += shared + seconds_since(t0);
      if (w.is_ok() && j.o.word_timestamps) st = select(k);
      active[k].failed = !w.is_ok() ? w.status() : st.is_ok() ? finish_window(j, std::move(*w)) : st;
    }
    std::vector<Active> going;
    for (auto& a : active) {
      if (!a.failed.is_ok()) results[a.index] = a.failed;
      else if (a.job->done()) results[a.index] = finish_job(*a.job);
      else going.push_back(std::move(a));
    }
    active = std::move(going);
  }
  return results;
}

}  // namespace vrun::whisper
