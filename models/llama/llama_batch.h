// Batched decoding for Llama programs: methods over several sequences at once, each in a slot of
// its own KV cache (continuous batching).
//
// The batched cache of layer l is the state `cache.batch.kv.<l>`, [1, 2 kv_heads, S * C, hd]
// (keys in heads [0, kv_heads), values after them, as the single-sequence cache): slot s holds
// rows [s * C, (s + 1) * C) for S slots of C positions each (metadata vrun.batch_slots and
// vrun.batch_context). The single-sequence methods and their cache are untouched.
//
//   prefill_slot   tokens [1, seq] at symbols pos (cache position) and slot: writes the chunk into
//                  that slot's cache, logits [1, 1, vocab] of its last token.
//   decode_batch_B for each B of vrun.batch_rows (powers of two up to S, and S): tokens [1, B] i32,
//                  positions [B] i32 and cache_rows [B] i32 (b * C + positions[b]), all read on
//                  the device, so every step replays one recording on a GPU; row b is slot b.
//                  Logits [1, B, vocab].
//
// In decode_batch_B every node covers the B rows: the projections and the MLP (the weights are
// read once per step), rope with a position per row, the cache write with a cache row per row,
// and attention with a position per batch entry over the first B slots seen as
// [B, kv_heads, C, hd] (each row's keys cut at its position). A layer is the same few dispatches
// for 1 row or 32. A row without a sequence is given its slot's next free position, which the
// slot's next write overwrites anyway.
//
// On the CPU, rows up to 15 keep linear's integer dot products per row, as the single-sequence
// decode does (the greedy tokens match it; tests/llama/batch_*test.cpp); from 16 rows linear
// dequantises block-quantised weights for sgemm, slower per step for decode and with other
// rounding (bench/llm/README.md).
#pragma once

#include <vector>

#include "models/common/batch_rows.h"
#include "models/llama/llama_model.h"
#include "runtime/graph/builder.h"

namespace vrun::llama {

// Constant ids of one layer's weights; -1 where absent. qkv and gate_up are the stacked
// projections when they exist (q/k/v and gate/up are then -1).
struct BatchLayerIds {
  int attn_norm = -1, q = -1, k = -1, v = -1, o = -1, qb = -1, kb = -1, vb = -1;
  int ffn_norm = -1, gate = -1, up = -1, down = -1, qkv = -1, qkv_b = -1, gate_up = -1;
};

struct BatchModelIds {
  int embed = -1, out_norm = -1, out_w = -1, inv_freq = -1;
  int64_t chunk = 0;
  DType cache_dtype = DType::f16;
  std::vector<BatchLayerIds> layers;
};

// Copies the ids of any struct with the members of BatchLayerIds.
template <typename Layer>
std::vector<BatchLayerIds> batch_layer_ids(const std::vector<Layer>& layers) {
  std::vector<BatchLayerIds> out;
  for (const Layer& w : layers)
    out.push_back({w.attn_norm, w.q, w.k, w.v, w.o, w.qb, w.kb, w.vb, w.ffn_norm, w.gate, w.up, w.down, w.qkv, w.qkv_b,
                   w.gate_up});
  return out;
}

// Adds the batched state, prefill_slot and decode_batch_B methods and their metadata when
// settings.batch_slots > 0; nothing otherwise.
Status add_llama_batch_methods(ProgramBuilder& pb, const LlamaConfig& c, const BuildSettings& settings,
                               const BatchModelIds& ids);

}  // namespace vrun::llama
