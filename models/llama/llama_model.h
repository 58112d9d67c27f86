// Llama-family decoder-only transformers (Llama 2/3, TinyLlama, SmolLM/SmolLM2, Mistral, Qwen2):
// the hyper-parameters, where the weights come from, and the graph: one program whose methods
// `forward` (logits of the last position) and `score` (logits of every position) share the
// KV-cache state; both take a chunk of tokens at a symbolic cache position.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/program.h"

namespace vrun::llama {

enum class RopeMode { kInterleaved, kHalf };

struct LlamaConfig {
  std::string arch = "llama";  // llama, qwen2, mistral
  int64_t vocab = 0, dim = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, head_dim = 0;
  int64_t max_context = 2048;  // what the model was trained for
  double rope_theta = 10000.0, rms_eps = 1e-5;
  RopeMode rope_mode = RopeMode::kHalf;
  std::vector<float> rope_freq_factors;  // Llama-3 scaling (divides each frequency); empty: none
  bool tied_embeddings = false;
  Status validate() const;
};

// A weight: dtype, shape in torch order ([out, in] for projections), borrowed bytes.
struct Weight {
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
  std::shared_ptr<const void> keep;
};

// Canonical weight names (GGUF's): token_embd.weight, output_norm.weight, output.weight,
// blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,ffn_up,ffn_down}.weight
// and blk.N.attn_{q,k,v}.bias. Returns nullopt for a weight the checkpoint lacks.
using WeightSource = std::function<std::optional<Weight>(const std::string& name)>;

struct BuildSettings {
  int64_t context = 0;    // KV-cache rows; 0: the model's max_context
  int64_t chunk = 512;    // most tokens per call (prefill chunk)
  // KV-cache dtype; unset: f32 for f32 checkpoints, else f16 (as llama.cpp keeps it).
  std::optional<DType> cache_dtype;
  // Batched decoding (models/llama/llama_batch.h): sequence slots of the batched cache (0: no
  // batched methods) and the positions each holds (0: context).
  int64_t batch_slots = 0;
  int64_t batch_context = 0;
};

// Builds the program; metadata gets the config under llama.* keys so runners can read it back.
Result<std::shared_ptr<Program>> build_llama_program(const LlamaConfig& config, const WeightSource& weights,
                                                     const BuildSettings& settings,
                                                     const std::map<std::string, MetaValue>& extra_metadata);

// Reads llama.* keys back from a program (for .vrp files).
Result<LlamaConfig> config_from_program(const Program& p);

// The methods that end in logits of one position (forward, decode, prefill_slot, decode_batch_N)
// also output each row's greedy token, argmax(logits) ("next"), as output kGreedyOutput: a caller
// that samples greedily reads that id instead of the logits (Executor::run's fetch).
constexpr size_t kGreedyOutput = 1;
constexpr uint64_t kFetchGreedy = uint64_t{1} << kGreedyOutput;
// Whether `method` has that output (programs exported before it existed have the logits only).
bool has_greedy_output(const Program& p, const std::string& method);

}  // namespace vrun::llama
