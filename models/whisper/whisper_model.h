// Whisper encoder-decoder: hyper-parameters, where the weights come from, and the graph. One
// program whose methods share state:
//   encode(mel [1, n_mels, 3000]) -> encoder output [1, 1500, d]; also writes every decoder
//     layer's cross-attention K/V into the state cross.kv.N (once per 30-s window);
//   decode(tokens [1, seq], positions [1, seq] = pos .. pos + seq - 1, symbol pos) -> logits [1, 1, vocab] of the last token; the
//     self-attention KV cache (cache.kv.N, n_text_ctx rows) is updated in place;
//   prefill(tokens [1, seq], positions [1, seq], symbol pos): decode for prompts (the same
//     result, cross-attention through GEMMs);
//   step(tokens [1, 1], positions [1, 1], symbol pos): decode of one token (the same result, no
//     head-merge copies);
//   decode_batch(tokens [B, seq], positions [1, seq], symbol pos) -> logits [B, 1, vocab]: the same for B
//     rows (beam search, best-of sampling) with its own caches batch.kv.N (B = the
//     whisper.decode_batch metadata; absent when it is 1);
//   reorder_batch(rows [B], symbol len): batch cache row r takes row rows[r]'s first len positions;
//   streams (S = the whisper.streams metadata; absent when it is <= 1): windows of up to S files
//     decoded together, each stream with its own cross K/V (streams.cross.kv.N, [S, 2H, ctx, hd])
//     and its own self-attention region (streams.cache.kv.N, [1, 2H, S * n_text_ctx, hd], stream
//     s at rows [s * n_text_ctx, (s + 1) * n_text_ctx)):
//     encode_streams(mel [n, n_mels, 3000], symbol first, first + n <= S): the encoder over n
//       windows, writing streams first .. first + n - 1's cross K/V;
//     prefill_stream(tokens [1, seq], positions [1, seq], symbols pos and slot): prefill in
//       stream `slot`;
//     step_streams_B(tokens [B, 1], positions [B, 1], cache_rows [B] = b * n_text_ctx +
//       positions[b]) for B in whisper.stream_rows: one token for each of streams 0 .. B-1 at its
//       own position, logits [B, 1, vocab];
//     select_stream(symbol slot): copies stream slot's cross K/V into cross.kv.N, where decode,
//       step, align and decode_batch read it (fallback temperatures, beam search, word timestamps);
//   align(tokens [1, seq <= n_text_ctx / 2 + 8], positions [1, seq]) -> logits [1, seq, vocab] of every position and
//     alignment_scores [1, heads, seq, n_audio_ctx]: the scaled cross-attention scores (before the
//     softmax) of the alignment heads in whisper.alignment_heads order (word timestamps).
// Each K/V state holds a layer's keys and values as 2H heads, the keys' first: [rows, 2H, len, hd].
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/common/weight.h"
#include "runtime/program.h"

namespace vrun::whisper {

struct WhisperConfig {
  int64_t n_mels = 80, n_audio_ctx = 1500, n_audio_state = 0, n_audio_head = 0, n_audio_layer = 0;
  int64_t n_vocab = 0, n_text_ctx = 448, n_text_state = 0, n_text_head = 0, n_text_layer = 0;
  bool multilingual() const { return n_vocab >= 51865; }
  Status validate() const;
};

using models::Weight;

// Canonical names are CTranslate2's WhisperSpec names, e.g. encoder/conv1/weight,
// encoder/position_encodings/encodings, encoder/layer_N/self_attention/linear_0/weight (q, k, v
// fused along rows), decoder/layer_N/attention/linear_1/weight (cross-attention k, v fused),
// decoder/embeddings/weight, decoder/layer_norm/gamma. nullopt: absent.
using models::WeightSource;

// Everything a runner needs besides the graph, stored as program metadata.
struct WhisperExtras {
  std::vector<int64_t> suppress_tokens;        // always suppressed
  std::vector<int64_t> suppress_begin;         // suppressed at the first sampled position
  std::vector<int64_t> alignment_heads;        // flat (layer, head) pairs
  std::string tokenizer_json;                  // Hugging Face tokenizer.json bytes
};

struct BuildSettings {
  // f16/bf16 matrices of the encoder (and the cross-attention K/V projection it runs) become f32
  // constants: twice the memory, faster CPU GEMMs over the window's 1500 rows (what the runner
  // picks for models up to whisper-small). The decoder's matrices stay f16/bf16: a decode step
  // multiplies them by one row, reading every byte once, so half the bytes is the faster choice,
  // and the products are the same (the widening is exact and the dot products sum alike).
  bool widen_f16_weights = false;
  // Rows of decode_batch (beam size / best-of candidates it can run); <= 1: no batch methods.
  int64_t decode_batch = 5;
  // Streams of the stream methods (windows of several files decoded together); <= 1: none.
  int64_t streams = 0;
  // The encoder's convolutions as matrix products over their three taps' rows (gelu their
  // epilogue), q/k/v in f16 and the self-attention through the sdpa op (on the GPU a
  // flash-attention kernel: the [heads, 1500, 1500] scores never reach memory, the scale is part
  // of it), fc1's gelu its linear's epilogue. false: conv1d ops, f32 q/k/v and two batched
  // matmuls around a softmax pass (the form before; whisper_bench --encoder matmuls compares
  // them). On an H200 the fused form took the turbo encoder from 39 to 17.5 ms a window; on the
  // CPU (tiny.en) it is as fast and gives the same transcripts.
  bool fused_encoder = true;
};

Result<std::shared_ptr<Program>> build_whisper_program(const WhisperConfig& config, const WeightSource& weights,
                                                       const WhisperExtras& extras, const BuildSettings& settings = {});

// Reads the config and extras back from a program's metadata.
Result<WhisperConfig> config_from_program(const Program& p);
WhisperExtras extras_from_program(const Program& p);

}  // namespace vrun::whisper
