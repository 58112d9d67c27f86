#include "apps/llama/llama_runner.h"
#include "runtime/base/clock.h"
#include "runtime/base/strings.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "apps/common/tokenizer/loaders.h"
#include "apps/llama/stop_text.h"
#include "apps/common/tokenizer/program_metadata.h"
#include "models/llama/hf_llama.h"

namespace vrun::llama {

namespace {

// KV-cache rows that fit in a quarter of physical memory.
int64_t context_that_fits(const LlamaConfig& c) {
  const int64_t pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const int64_t budget = pages > 0 && page > 0 ? pages * page / 4 : int64_t{1} << 32;
  const int64_t per_row = 2 * c.layers * c.kv_heads * c.head_dim * 4;
  return std::max<int64_t>(256, budget / std::max<int64_t>(per_row, 1));
}

}  // namespace

int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<LlamaRunner> r(new LlamaRunner());
  if (ends_with(path, ".vrp")) {
    VRUN_ASSIGN_OR_RETURN(r->program_, load_program(path));
    VRUN_ASSIGN_OR_RETURN(r->config_, config_from_program(*r->program_));
    if (options.context > 0) {
      const MetaValue* ctx = r->program_->meta("vrun.context");
      if (ctx && ctx->i != options.context)
        std::fprintf(stderr, "vrun: %s was exported with a %lld-token context; --ctx %lld is ignored (re-export to change it)\n",
                     path.c_str(), static_cast<long long>(ctx->i), static_cast<long long>(options.context));
    }
  } else {
    // A folder is a Hugging Face checkpoint; any other file is read as GGUF.
    VRUN_ASSIGN_OR_RETURN(ImportedModel m, import_llama_checkpoint(path));
    for (const auto& note : m.notes) std::fprintf(stderr, "vrun: %s\n", note.c_str());
    BuildSettings s;
    s.context = options.context > 0 ? options.context : std::min(m.config.max_context, context_that_fits(m.config));
    if (options.context <= 0 && options.default_context_cap > 0) s.context = std::min(s.context, options.default_context_cap);
    s.chunk = options.chunk;
    s.batch_slots = options.batch_slots;
    s.batch_context = options.batch_context;
    VRUN_ASSIGN_OR_RETURN(r->program_, build_llama_program(m.config, m.weights, s, m.metadata));
    r->config_ = m.config;
  }
  const MetaValue* ctx = r->program_->meta("vrun.context");
  const MetaValue* chunk = r->program_->meta("vrun.chunk");
  if (!ctx || !chunk) return err(ErrorCode::kInvalidProgram, path, ": not a vrun text-generation program (no vrun.context)");
  r->context_ = ctx->i;
  r->chunk_ = chunk->i;
  tok::ProgramMetadataView meta(*r->program_);
  VRUN_ASSIGN_OR_RETURN(r->tokenizer_, tok::load_tokenizer(meta, path));
  if (auto add = meta.get_int("tokenizer.ggml.add_bos_token")) r->add_bos_ = *add != 0;
  ExecutorOptions eo;
  eo.backend = options.backend;
  eo.threads = options.threads;
  eo.device = options.device;
  VRUN_ASSIGN_OR_RETURN(r->executor_, Executor::create(r->program_, eo));
  // Programs exported before the decode method existed run their single tokens through forward.
  r->has_decode_ = r->program_->method("decode") != nullptr;
  const Program& p = *r->program_;
  r->has_next_ = llama::has_greedy_output(p, "forward") && (!r->has_decode_ || llama::has_greedy_output(p, "decode"));
  return r;
}

std::optional<std::string> LlamaRunner::chat_template() const {
  const MetaValue* t = program_->meta("tokenizer.chat_template");
  if (!t || t->type != MetaType::kString) return std::nullopt;
  return t->s;
}

uint64_t LlamaRunner::replayed_calls() const { return executor_->gpu_replayed_calls(); }

void LlamaRunner::reset() {
  n_past_ = 0;
  executor_->reset_state();
}

Result<std::vector<float>> LlamaRunner::feed(std::span<const int32_t> tokens) {
  VRUN_ASSIGN_OR_RETURN(Fed fed, feed_tokens(tokens, true));
  return std::move(fed.logits);
}

Result<LlamaRunner::Fed> LlamaRunner::feed_tokens(std::span<const int32_t> tokens, bool want_logits) {
  if (tokens.empty()) return err(ErrorCode::kInvalidArgument, "nothing to feed");
  if (n_past_ + static_cast<int64_t>(tokens.size()) > context_)
    return err(ErrorCode::kInvalidArgument, n_past_, " tokens in the cache + ", tokens.size(), " new exceed the ",
               context_, "-token context");
  for (int32_t t : tokens)
    if (t < 0 || t >= config_.vocab) return err(ErrorCode::kInvalidArgument, "token id ", t, " outside the vocabulary of ", config_.vocab);
  want_logits = want_logits || !has_next_;
  Fed fed;
  for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(chunk_)) {
    const size_t n = std::min(tokens.size() - at, static_cast<size_t>(chunk_));
    const bool last = at + n == tokens.size();
    // Only the last chunk's outputs are read; on a GPU the others stay there.
    const uint64_t fetch = !last ? 0 : want_logits ? Executor::kFetchAll : kFetchGreedy;
    std::vector<int32_t> piece(tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.begin() + static_cast<std::ptrdiff_t>(at + n));
    std::vector<TensorView> outs;
    if (n == 1 && has_decode_) {
      // One token: the method whose position is an input, replayed on a GPU without recording.
      int32_t pos = static_cast<int32_t>(n_past_);
      VRUN_ASSIGN_OR_RETURN(outs, executor_->run("decode", {TensorView::dense(piece.data(), DType::i32, {1, 1}),
                                                            TensorView::dense(&pos, DType::i32, {1})}, {}, fetch));
    } else {
      VRUN_ASSIGN_OR_RETURN(outs, executor_->run("forward", {TensorView::dense(piece.data(), DType::i32, {1, static_cast<int64_t>(n)})},
                                                 {{"pos", n_past_}}, fetch));
    }
    n_past_ += static_cast<int64_t>(n);
    if (!last) continue;
    if (want_logits) fed.logits.assign(outs[0].ptr<float>(), outs[0].ptr<float>() + config_.vocab);
    if (has_next_) fed.greedy = *outs[kGreedyOutput].ptr<int32_t>();
  }
  // NaN logits would sample token 0 for ever: say so instead. The greedy token is -1 where its
  // row holds a NaN (argmax's nan_flag); the logits are checked at their first value.
  if ((has_next_ && fed.greedy < 0) || (want_logits && std::isnan(fed.logits[0]))) return nan_logits(n_past_ - 1);
  return fed;
}

Status nan_logits(int64_t position) {
  // On a GPU the one-dispatch decode kernel (VRUN_DECODE_BLOCK) writes NaN when its workgroups
  // could not all run at once (a GPU busy with other work).
  return err(ErrorCode::kInternal, "the model's logits at position ", position,
             " are NaN (with VRUN_DECODE_BLOCK set on a GPU shared with other work, unset it: its kernel needs every "
             "multiprocessor at once)");
}

Result<GenerateStats> LlamaRunner::generate(std::span<const int32_t> prompt, const GenerateOptions& o,
                                            const std::function<bool(const std::string&)>& on_text) {
  GenerateStats st;
  st.prompt_tokens = static_cast<int>(prompt.size());
  if (prompt.empty()) return err(ErrorCode::kInvalidArgument, "the prompt is empty (nothing to continue from)");
  const auto t0 = Clock::now();
  Sampler sampler(o.sampling);
  // Greedy decoding reads the model's greedy token only: one id instead of the logits (a GPU's
  // download and the host's pass over them, about a tenth of a small model's step).
  const bool want_logits = !sampler.greedy();
  VRUN_ASSIGN_OR_RETURN(Fed fed, feed_tokens(prompt, want_logits));
  st.prefill_s = seconds_since(t0);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  tok::StreamingDecoder decoder(*tokenizer_, /*skip_special=*/true);
  const auto& sp = tokenizer_->special_ids();
  StopText text(o.stop, &on_text);
  const auto t1 = Clock::now();
  while (true) {
    if (o.max_tokens >= 0 && st.generated_tokens >= o.max_tokens) {
      st.stop_reason = "length";
      break;
    }
    const int32_t next = fed.logits.empty() ? fed.greedy : sampler.sample(fed.logits, history);
    if (st.generated_tokens == 0) st.time_to_first_token_s = seconds_since(t0);
    ++st.generated_tokens;
    if (!o.ignore_eos && (next == sp.eos || next == sp.eot)) {
      st.stop_reason = "eos";
      break;
    }
    st.tokens.push_back(next);
    history.push_back(next);
    text.push(decoder.push(next));
    if (!text.flush(false, &st.stop_reason)) break;
    if (n_past_ >= context_) {
      st.stop_reason = "context";
      break;
    }
    // Every emitted token enters the cache, so a chat can continue from exactly this text.
    VRUN_ASSIGN_OR_RETURN(fed, feed_tokens(std::span<const int32_t>(&next, 1), want_logits));
  }
  if (st.stop_reason != "stop" && st.stop_reason != "callback") {
    text.push(decoder.finish());
    text.flush(true, &st.stop_reason);
  }
  st.decode_s = seconds_since(t1);
  return st;
}

Result<PerplexityResult> LlamaRunner::perplexity(std::span<const int32_t> tokens, int64_t ctx,
                                                 const std::function<void(int, int, double)>& progress) {
  if (ctx < 2) return err(ErrorCode::kInvalidArgument, "--ctx must be at least 2, got ", ctx);
  if (ctx > context_) return err(ErrorCode::kInvalidArgument, "--ctx ", ctx, " exceeds the model's loaded context of ", context_);
  const int chunks = static_cast<int>(static_cast<int64_t>(tokens.size()) / ctx);
  if (chunks == 0)
    return err(ErrorCode::kInvalidArgument, "the text has ", tokens.size(), " tokens, fewer than one ", ctx, "-token chunk");
  PerplexityResult r;
  double nll = 0;
  for (int c = 0; c < chunks; ++c) {
    reset();
    const int32_t* chunk = tokens.data() + static_cast<int64_t>(c) * ctx;
    for (int64_t at = 0; at < ctx; at += chunk_) {
      const int64_t n = std::min(chunk_, ctx - at);
      std::vector<int32_t> piece(chunk + at, chunk + at + n);
      VRUN_ASSIGN_OR_RETURN(auto outs, executor_->run("score", {TensorView::dense(piece.data(), DType::i32, {1, n})},
                                                      {{"pos", n_past_}}));
      n_past_ += n;
      const float* lg = outs[0].ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = at + i;  // position in the chunk; it predicts p + 1
        if (p + 1 >= ctx) break;
        const float* row = lg + i * config_.vocab;
        const float mx = *std::max_element(row, row + config_.vocab);
        double sum = 0;
        for (int64_t v = 0; v < config_.vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
        const int32_t target = chunk[p + 1];
        nll += -(static_cast<double>(row[target]) - mx - std::log(sum));
        r.top1_matches += argmax(std::span<const float>(row, static_cast<size_t>(config_.vocab))) == target;
        ++r.scored_tokens;
      }
    }
    r.chunks = c + 1;
    r.perplexity = std::exp(nll / static_cast<double>(r.scored_tokens));
    if (progress) progress(c + 1, chunks, r.perplexity);
  }
  reset();
  return r;
}

}  // namespace vrun::llama
