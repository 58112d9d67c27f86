// One window's decode: the prompt, the logit filters, and the three searches CTranslate2 runs
// for faster-whisper (greedy, best-of sampling, beam search), with the temperature fallback of
// openai-whisper's transcribe().
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "apps/whisper/logit_scan.h"
#include "apps/whisper/whisper_runner.h"

namespace vrun::whisper {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTimePrecision = 0.02;  // seconds per timestamp token

// log(sum(exp(x))) of n values, in double (-inf when every value is).
double log_sum_exp(const float* x, size_t n) {
  double m = kNegInf;
  for (size_t i = 0; i < n; ++i) m = std::max<double>(m, x[i]);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  return m + std::log(s);
}

// log_softmax of n values, in double.
void log_softmax(const float* x, size_t n, std::vector<double>& out) {
  const double lse = log_sum_exp(x, n);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(x[i]) - lse;
}

}  // namespace

Result<std::vector<float>> WhisperRunner::forward(std::span<const int32_t> tokens, int64_t pos) {
  VRUN_ASSIGN_OR_RETURN(float* l, forward_in_place(tokens, pos));
  return std::vector<float>(l, l + config_.n_vocab);
}

Result<float*> WhisperRunner::forward_in_place(std::span<const int32_t> tokens, int64_t pos) {
  const auto seq = static_cast<int64_t>(tokens.size());
  if (seq < 1 || pos + seq > config_.n_text_ctx)
    return err(ErrorCode::kInvalidArgument, "whisper decode: ", seq, " tokens at position ", pos, " do not fit the ", config_.n_text_ctx,
               "-token context");
  std::vector<int32_t> t(tokens.begin(), tokens.end()), p(static_cast<size_t>(seq));
  std::iota(p.begin(), p.end(), static_cast<int32_t>(pos));
  // Prompts go through prefill, single tokens through step, where the program has them (exported
  // before they existed: decode).
  const char* method = seq > 1 ? (has_prefill_ ? "prefill" : "decode") : has_step_ ? "step" : "decode";
  VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run(method, {TensorView::dense(t.data(), DType::i32, {1, seq}), TensorView::dense(p.data(), DType::i32, {1, seq})},
                                                  {{"pos", pos}}));
  return outs[0].ptr<float>();
}

// tokens: decode_batch_ rows of seq tokens each.
Result<std::vector<float>> WhisperRunner::forward_batch(std::span<const int32_t> tokens, int64_t seq, int64_t pos) {
  if (seq < 1 || pos + seq > config_.n_text_ctx)
    return err(ErrorCode::kInvalidArgument, "whisper decode: ", seq, " tokens at position ", pos, " do not fit the ", config_.n_text_ctx,
               "-token context");
  std::vector<int32_t> t(tokens.begin(), tokens.end()), p(static_cast<size_t>(seq));
  std::iota(p.begin(), p.end(), static_cast<int32_t>(pos));
  VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("decode_batch",
                                                  {TensorView::dense(t.data(), DType::i32, {decode_batch_, seq}),
                                                   TensorView::dense(p.data(), DType::i32, {1, seq})},
                                                  {{"pos", pos}}));
  const float* l = outs[0].ptr<float>();
  return std::vector<float>(l, l + decode_batch_ * config_.n_vocab);
}

Status WhisperRunner::reorder_batch(const std::vector<int32_t>& rows, int64_t len) {
  std::vector<int32_t> r = rows;
  auto out = executor_->run("reorder_batch", {TensorView::dense(r.data(), DType::i32, {decode_batch_})}, {{"len", len}});
  return out.is_ok() ? Status::ok() : out.status();
}

Result<WhisperRunner::Prompt> WhisperRunner::make_prompt(const TranscribeOptions& o, const std::string& language,
                                                         std::span<const int32_t> previous) const {
  Prompt p;
  if (!previous.empty()) {
    // At most half the context minus one, as CTranslate2 / openai-whisper keep.
    const size_t keep = std::min(previous.size(), static_cast<size_t>(config_.n_text_ctx / 2 - 1));
    p.before_sot.push_back(sot_prev_);
    p.before_sot.insert(p.before_sot.end(), previous.end() - static_cast<std::ptrdiff_t>(keep), previous.end());
  }
  p.before_sot.push_back(sot_);
  if (multilingual()) {
    int32_t lang = -1;
    for (const auto& [code, id] : languages_)
      if (code == language) lang = id;
    if (lang < 0) return err(ErrorCode::kInvalidArgument, "language '", language, "' is not one this model knows");
    p.after_sot.push_back(lang);
    p.after_sot.push_back(o.task == "translate" ? translate_ : transcribe_);
  }
  if (!o.timestamps) p.after_sot.push_back(no_timestamps_);
  return p;
}

Result<WhisperRunner::Primed> WhisperRunner::prime(const Prompt& p, bool batched) {
  Primed r;
  auto run = [&](const std::vector<int32_t>& toks) -> Result<std::vector<float>> {
    const auto n = static_cast<int64_t>(toks.size());
    std::vector<float> logits;
    if (!batched) {
      VRUN_ASSIGN_OR_RETURN(logits, forward(toks, r.pos));
    } else {
      std::vector<int32_t> rows;
      for (int b = 0; b < decode_batch_; ++b) rows.insert(rows.end(), toks.begin(), toks.end());
      VRUN_ASSIGN_OR_RETURN(logits, forward_batch(rows, n, r.pos));
    }
    r.pos += n;
    return logits;
  };
  VRUN_ASSIGN_OR_RETURN(r.logits, run(p.before_sot));
  r.no_speech_prob = no_speech_prob(r.logits.data());
  if (!p.after_sot.empty()) {
    VRUN_ASSIGN_OR_RETURN(r.logits, run(p.after_sot));
  }
  return r;
}

double WhisperRunner::no_speech_prob(const float* logits) const {
  if (no_speech_ < 0) return 0;
  const double lse = log_sum_exp(logits, static_cast<size_t>(config_.n_vocab));
  return std::exp(static_cast<double>(logits[static_cast<size_t>(no_speech_)]) - lse);
}

int WhisperRunner::max_steps(const Prompt& p, const TranscribeOptions& o) const {
  // CTranslate2: min(max_length / 2, max_length - start_step) steps, start_step = prompt - 1.
  const int64_t prompt = static_cast<int64_t>(p.before_sot.size() + p.after_sot.size());
  const int64_t ctx_left = config_.n_text_ctx - prompt + 1;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(o.max_window_tokens, ctx_left)));
}

// Suppression and the timestamp rules, as CTranslate2's Whisper generate() applies them for
// faster-whisper (the same rules as openai-whisper's SuppressBlank, SuppressTokens and
// ApplyTimestampRules). seq: the tokens sampled so far in this window.
void WhisperRunner::filter_logits(float* logits, const std::vector<int32_t>& seq, const TranscribeOptions& o) const {
  const auto n = static_cast<int32_t>(config_.n_vocab);
  auto disable = [&](int32_t from, int32_t to) {  // [from, to)
    for (int32_t i = std::max(from, 0); i < std::min(to, n); ++i) logits[i] = kNegInf;
  };
  for (int32_t t : suppress_) disable(t, t + 1);
  if (seq.empty() && o.suppress_blank)
    for (int32_t t : suppress_begin_) disable(t, t + 1);
  if (!o.timestamps) return;
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
    // Timestamps win when their total probability beats the most probable text token. Both
    // sides are log-probabilities sharing the full log-sum-exp, so it cancels: compare the
    // timestamps' log-sum-exp with the largest text logit. That log-sum-exp lies within
    // [max, max + log(count)] of the timestamp logits: outside that band the comparison is
    // decided without it.
    const double max_text = max_logit(logits, static_cast<size_t>(timestamp_begin_));
    const auto n_ts = static_cast<size_t>(n - timestamp_begin_);
    const double max_ts = max_logit(logits + timestamp_begin_, n_ts);
    bool ts_wins;
    if (max_ts > max_text) ts_wins = true;
    else if (max_ts + std::log(static_cast<double>(n_ts)) + 1e-6 < max_text) ts_wins = false;
    else ts_wins = log_sum_exp(logits + timestamp_begin_, n_ts) > max_text;
    if (ts_wins) disable(0, timestamp_begin_);
  }
}

Result<WindowResult> WhisperRunner::decode_greedy(const TranscribeOptions& o, const Prompt& p) {
  VRUN_ASSIGN_OR_RETURN(Primed pr, prime(p, false));
  WindowResult w;
  w.no_speech_prob = pr.no_speech_prob;
  // After the prompt's logits, each step's are filtered where the executor left them.
  float* logits = pr.logits.data();
  const int steps = max_steps(p, o);
  for (int i = 0; i < steps; ++i) {
    if (!greedy_step(logits, o, w) || i + 1 == steps) break;
    VRUN_ASSIGN_OR_RETURN(logits, forward_in_place(std::span<const int32_t>(&w.tokens.back(), 1), pr.pos++));
  }
  return w;
}

bool WhisperRunner::greedy_step(float* logits, const TranscribeOptions& o, WindowResult& w) const {
  const auto V = static_cast<size_t>(config_.n_vocab);
  filter_logits(logits, w.tokens, o);
  const size_t token = argmax_logit(logits, V);
  const float top = logits[token];
  w.sum_logprob += static_cast<double>(top) - log_sum_exp_logits(logits, V, top);
  if (static_cast<int32_t>(token) == eot_) return false;
  w.tokens.push_back(static_cast<int32_t>(token));
  return true;
}

// best_of candidates sampled from softmax(logits / T) (log-probabilities from the unscaled
// logits, as the average log-probability check wants); the best by length-normalised score.
Result<WindowResult> WhisperRunner::decode_sampling(const TranscribeOptions& o, const Prompt& p, double temperature) {
  const int n = std::max(1, o.best_of);
  const bool batched = n > 1 && decode_batch_ >= n;
  const int64_t V = config_.n_vocab;
  std::vector<WindowResult> cands;
  std::vector<double> lp, prob;
  auto sample = [&](const float* logits, const std::vector<int32_t>& seq, double& logprob) {
    std::vector<float> l(logits, logits + V);
    filter_logits(l.data(), seq, o);
    log_softmax(l.data(), l.size(), lp);
    prob.resize(lp.size());
    double m = -std::numeric_limits<double>::infinity();
    for (double v : lp) m = std::max(m, v / temperature);
    for (size_t i = 0; i < lp.size(); ++i) prob[i] = std::isfinite(lp[i]) ? std::exp(lp[i] / temperature - m) : 0.0;
    std::discrete_distribution<int32_t> dist(prob.begin(), prob.end());
    const int32_t t = dist(rng_);
    logprob = lp[static_cast<size_t>(t)];
    return t;
  };
  const int steps = max_steps(p, o);
  const int rounds = batched ? 1 : n;
  for (int round = 0; round < rounds; ++round) {
    VRUN_ASSIGN_OR_RETURN(Primed pr, prime(p, batched));
    const int rows = batched ? n : 1;
    std::vector<WindowResult> cur(static_cast<size_t>(rows));
    std::vector<bool> done(static_cast<size_t>(rows), false);
    std::vector<float> logits = std::move(pr.logits);
    for (int i = 0; i < steps; ++i) {
      std::vector<int32_t> next(static_cast<size_t>(batched ? decode_batch_ : 1), eot_);
      bool all_done = true;
      for (int r = 0; r < rows; ++r) {
        auto& c = cur[static_cast<size_t>(r)];
        if (done[static_cast<size_t>(r)]) continue;
        double logprob = 0;
        const int32_t t = sample(logits.data() + r * V, c.tokens, logprob);
        c.sum_logprob += logprob;
        if (t == eot_) {
          done[static_cast<size_t>(r)] = true;
          continue;
        }
        c.tokens.push_back(t);
        next[static_cast<size_t>(r)] = t;
        all_done = false;
      }
      if (all_done || i + 1 == steps) break;
      if (batched) {
        VRUN_ASSIGN_OR_RETURN(logits, forward_batch(next, 1, pr.pos));
      } else {
        VRUN_ASSIGN_OR_RETURN(logits, forward(std::span<const int32_t>(next.data(), 1), pr.pos));
      }
      ++pr.pos;
    }
    for (auto& c : cur) {
      c.no_speech_prob = pr.no_speech_prob;
      cands.push_back(std::move(c));
    }
  }
  auto score = [&](const WindowResult& c) {
    return c.sum_logprob / std::pow(std::max<double>(1.0, static_cast<double>(c.tokens.size())), o.length_penalty);
  };
  size_t best = 0;
  for (size_t i = 1; i < cands.size(); ++i)
    if (score(cands[i]) > score(cands[best])) best = i;
  return std::move(cands[best]);
}

// CTranslate2's BeamSearch: 2 x beam candidates per step over all beams' cumulative
// log-probabilities; a candidate ending in the end token is a finished hypothesis and the next
// unfinished candidate takes its place; done after round(beam x patience) hypotheses (or at the
// step limit); the best by log-probability / length^length_penalty.
Result<WindowResult> WhisperRunner::decode_beam(const TranscribeOptions& o, const Prompt& p) {
  const int K = o.beam_size;
  if (K > decode_batch_)
    return err(ErrorCode::kInvalidArgument, "--beam-size ", K, ": this model was built with a batched decoder of ", decode_batch_,
               " rows (load it from the checkpoint, or export it with a larger decode batch)");
  const int64_t V = config_.n_vocab;
  VRUN_ASSIGN_OR_RETURN(Primed pr, prime(p, true));
  struct Hyp {
    std::vector<int32_t> tokens;
    double score = 0;
  };
  std::vector<Hyp> beams(1), finished;
  const auto max_candidates = static_cast<size_t>(std::lround(static_cast<double>(K) * o.patience));
  const int steps = max_steps(p, o);
  std::vector<float> logits = std::move(pr.logits);
  std::vector<double> lp;
  struct Cand {
    double score;
    int32_t beam, token;
  };
  std::vector<Cand> cands;
  for (int step = 0; step < steps; ++step) {
    cands.clear();
    for (size_t b = 0; b < beams.size(); ++b) {
      float* l = logits.data() + static_cast<int64_t>(b) * V;
      filter_logits(l, beams[b].tokens, o);
      log_softmax(l, static_cast<size_t>(V), lp);
      for (int64_t t = 0; t < V; ++t)
        if (std::isfinite(lp[static_cast<size_t>(t)]))
          cands.push_back({beams[b].score + lp[static_cast<size_t>(t)], static_cast<int32_t>(b), static_cast<int32_t>(t)});
    }
    const size_t nc = std::min(cands.size(), static_cast<size_t>(2 * K));
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(nc), cands.end(), [](const Cand& a, const Cand& b) {
      return a.score > b.score || (a.score == b.score && (a.beam < b.beam || (a.beam == b.beam && a.token < b.token)));
    });
    const bool last = step + 1 == steps;
    std::vector<Hyp> next;
    std::vector<int32_t> rows;
    size_t secondary = static_cast<size_t>(K);
    for (size_t k = 0; k < static_cast<size_t>(K) && k < nc; ++k) {
      size_t pick = k;
      if (cands[k].token == eot_ || last) {
        Hyp h = beams[static_cast<size_t>(cands[k].beam)];
        if (cands[k].token != eot_) h.tokens.push_back(cands[k].token);
        h.score = cands[k].score;
        finished.push_back(std::move(h));
        pick = nc;
        for (size_t j = secondary; j < nc; ++j)
          if (cands[j].token != eot_) {
            pick = j;
            secondary = j + 1;
            break;
          }
        if (pick == nc) continue;
      }
      Hyp h = beams[static_cast<size_t>(cands[pick].beam)];
      h.tokens.push_back(cands[pick].token);
      h.score = cands[pick].score;
      next.push_back(std::move(h));
      rows.push_back(cands[pick].beam);
    }
    if (last || finished.size() >= max_candidates || next.empty()) break;
    beams = std::move(next);
    // Cache rows follow their hypotheses; unused rows copy row 0.
    std::vector<int32_t> src(static_cast<size_t>(decode_batch_), 0), feed(static_cast<size_t>(decode_batch_), eot_);
    bool identity = true;
    for (size_t b = 0; b < rows.size(); ++b) {
      src[b] = rows[b];
      feed[b] = beams[b].tokens.back();
      identity = identity && rows[b] == static_cast<int32_t>(b);
    }
    if (!identity) VRUN_RETURN_IF_ERROR(reorder_batch(src, pr.pos));
    VRUN_ASSIGN_OR_RETURN(logits, forward_batch(feed, 1, pr.pos));
    ++pr.pos;
  }
  WindowResult w;
  w.no_speech_prob = pr.no_speech_prob;
  if (finished.empty()) return w;
  auto norm = [&](const Hyp& h) { return h.score / std::pow(std::max<double>(1.0, static_cast<double>(h.tokens.size())), o.length_penalty); };
  size_t best = 0;
  for (size_t i = 1; i < finished.size(); ++i)
    if (norm(finished[i]) > norm(finished[best])) best = i;
  w.tokens = std::move(finished[best].tokens);
  w.sum_logprob = finished[best].score;
  return w;
}

Result<WindowResult> WhisperRunner::decode_with_fallback(const TranscribeOptions& o, const Prompt& p, const WindowResult* first,
                                                         const std::function<Status()>& before_fallback) {
  std::vector<WindowResult> all;
  std::vector<size_t> below_cr;
  const std::vector<double> temps = o.temperatures.empty() ? std::vector<double>{0.0} : o.temperatures;
  bool prepared = false;
  for (double t : temps) {
    WindowResult w;
    if (first) {
      w = *first;
      first = nullptr;
    } else {
      if (before_fallback && !prepared) {  // once, before the first temperature decoded here
        prepared = true;
        VRUN_RETURN_IF_ERROR(before_fallback());
      }
      if (t > 0) {
        VRUN_ASSIGN_OR_RETURN(w, decode_sampling(o, p, t));
      } else if (o.beam_size > 1) {
        VRUN_ASSIGN_OR_RETURN(w, decode_beam(o, p));
      } else {
        VRUN_ASSIGN_OR_RETURN(w, decode_greedy(o, p));
      }
    }
    w.temperature = t;
    w.avg_logprob = w.sum_logprob / static_cast<double>(w.tokens.size() + 1);
    w.compression_ratio = compression_ratio(w.tokens);
    bool fallback = false;
    if (o.compression_ratio_threshold > 0 && w.compression_ratio > o.compression_ratio_threshold) fallback = true;
    else below_cr.push_back(all.size());
    if (w.avg_logprob < o.logprob_threshold) fallback = true;
    if (o.no_speech_threshold >= 0 && w.no_speech_prob > o.no_speech_threshold && w.avg_logprob < o.logprob_threshold)
      fallback = false;  // silence: the window will be skipped
    if (!fallback) return w;
    all.push_back(std::move(w));
  }
  // Every temperature failed: the most probable result, preferring those not too repetitive;
  // the last temperature is reported (it decides whether the prompt is reset).
  const std::vector<size_t>* pool = &below_cr;
  std::vector<size_t> every(all.size());
  std::iota(every.begin(), every.end(), 0);
  if (below_cr.empty()) pool = &every;
  size_t best = pool->front();
  for (size_t i : *pool)
    if (all[i].avg_logprob > all[best].avg_logprob) best = i;
  WindowResult w = std::move(all[best]);
  w.temperature = temps.back();
  return w;
}

Result<WindowResult> WhisperRunner::decode_window(const TranscribeOptions& o, const std::string& language,
                                                  std::span<const int32_t> previous) {
  VRUN_ASSIGN_OR_RETURN(Prompt p, make_prompt(o, language, previous));
  return decode_with_fallback(o, p);
}

}  // namespace vrun::whisper
