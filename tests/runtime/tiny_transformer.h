// A small two-layer Llama-style transformer (GQA, RoPE, RMSNorm, SwiGLU, KV-cache state,
// symbolic sequence length and cache position) built with the graph builder from random
// weights, plus the weights themselves so a test can compute a naive reference.
#pragma once

#include <memory>
#include <vector>

#include "runtime/program.h"

namespace vrun::test {

struct TinyConfig {
  int vocab = 37, dim = 32, heads = 4, kv_heads = 2, ffn = 48, layers = 2, ctx = 24, max_seq = 16;
  double rope_theta = 10000.0, eps = 1e-5;
  int head_dim() const { return dim / heads; }
};

struct TinyLayer {
  std::vector<float> attn_norm, wq, wk, wv, wo, ffn_norm, wg, wu, wd;
};

struct TinyWeights {
  TinyConfig cfg;
  std::vector<float> embed, final_norm, out;
  std::vector<TinyLayer> layers;
};

TinyWeights make_tiny_weights(const TinyConfig& cfg, unsigned seed);
// Method "forward": input tokens i32 [1, seq]; symbol pos (cache position) given by the caller;
// output logits f32 [1, 1, vocab] for the last position.
Result<std::shared_ptr<Program>> build_tiny_transformer(const TinyWeights& w);

}  // namespace vrun::test
