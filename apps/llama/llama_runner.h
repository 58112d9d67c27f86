// Text generation with a Llama-family model: loads a .gguf or .vrp, keeps the KV cache across
// calls (so a chat keeps its history), prefills in chunks, samples, streams text.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "apps/common/sampling/sampler.h"
#include "apps/common/tokenizer/tokenizer.h"
#include "models/llama/llama_model.h"
#include "runtime/executor.h"

namespace vrun::llama {

struct LoadOptions {
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;
  int device = -1;  // Vulkan device index; -1: VRUN_DEVICE or the best one
  int64_t context = 0;  // 0: the model's maximum, bounded by memory
  int64_t default_context_cap = 0;  // with context 0: at most this many positions (0: no cap)
  int64_t chunk = 512;
  // Batched decoding (apps/llama/batch_session.h): KV-cache slots for concurrent sequences
  // (0: none) and the positions each holds (0: the context). Checkpoints only: a .vrp has what
  // it was exported with.
  int64_t batch_slots = 0;
  int64_t batch_context = 0;
};

struct GenerateOptions {
  int max_tokens = 256;  // < 0: until EOS or the context is full
  SamplingOptions sampling;
  std::vector<std::string> stop;  // generation ends before any of these strings
  bool ignore_eos = false;
  // A batched session may start the prompt past whole chunks an earlier sequence in the slot
  // prefilled (the same keys and values; BatchSession::add); false computes them all again.
  bool cache_prompt = true;
};

struct GenerateStats {
  int prompt_tokens = 0;
  // Of prompt_tokens, those whose keys and values an earlier sequence in the same batch slot had
  // prefilled, in the same chunks, and that were not computed again (BatchSession).
  int cached_prompt_tokens = 0;
  int generated_tokens = 0;
  double time_to_first_token_s = 0, prefill_s = 0, decode_s = 0;
  std::string stop_reason;  // "eos", "stop", "length", "context", "callback"
  std::vector<int32_t> tokens;  // generated ids
  double prefill_tok_s() const { return prefill_s > 0 ? prompt_tokens / prefill_s : 0; }
  double decode_tok_s() const { return decode_s > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_s : 0; }
};

struct PerplexityResult {
  double perplexity = 0;
  int chunks = 0;
  int64_t scored_tokens = 0;
  int64_t top1_matches = 0;  // argmax == next token
};

class LlamaRunner {
 public:
  static Result<std::unique_ptr<LlamaRunner>> load(const std::string& path, const LoadOptions& options);

  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  const LlamaConfig& config() const { return config_; }
  const Program& program() const { return *program_; }
  int64_t context() const { return context_; }
  int64_t n_past() const { return n_past_; }
  // Whether some of the program runs on a GPU.
  bool uses_gpu() const { return executor_->uses_gpu(); }
  // Method calls a GPU replayed from an earlier recording (decode steps).
  uint64_t replayed_calls() const;
  // Whether the model's metadata asks for BOS before a prompt.
  bool add_bos() const { return add_bos_; }
  std::optional<std::string> chat_template() const;

  // Forgets the conversation (cache position back to 0).
  void reset();
  // Appends tokens to the cache; returns the logits after the last one (vocab floats).
  Result<std::vector<float>> feed(std::span<const int32_t> tokens);
  // What feeding leaves: the logits after the last token (when asked for, or when the program
  // has no greedy output) and the model's greedy token (-1 where the program has none).
  struct Fed {
    std::vector<float> logits;
    int32_t greedy = -1;
  };
  Result<Fed> feed_tokens(std::span<const int32_t> tokens, bool want_logits);
  // Whether the program's forward and decode methods output the greedy token ("next").
  bool has_greedy_output() const { return has_next_; }
  // Feeds the prompt, then samples up to max_tokens. on_text receives text as it completes
  // (never a split UTF-8 character); returning false stops generation.
  Result<GenerateStats> generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                 const std::function<bool(const std::string&)>& on_text);
  // Perplexity over full chunks of `ctx` tokens (see `vrun perplexity --help`); progress gets
  // (chunk index, chunks, running perplexity).
  Result<PerplexityResult> perplexity(std::span<const int32_t> tokens, int64_t ctx,
                                      const std::function<void(int, int, double)>& progress);

 private:
  friend class BatchSession;
  LlamaRunner() = default;
  std::shared_ptr<Program> program_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  LlamaConfig config_;
  int64_t context_ = 0, chunk_ = 0, n_past_ = 0;
  bool has_decode_ = false;
  bool has_next_ = false;
  bool add_bos_ = false;
};

// Peak resident memory of this process in bytes.
int64_t peak_rss_bytes();

// The error for NaN logits at a position (a broken model or kernel; greedy decoding would repeat
// one token for ever).
Status nan_logits(int64_t position);

}  // namespace vrun::llama
