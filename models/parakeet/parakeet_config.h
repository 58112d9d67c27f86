// Parakeet (NeMo FastConformer encoder + TDT / RNN-T / CTC head): hyper-parameters, read from a
// .nemo archive's model_config.yaml or a Hugging Face ParakeetForTDT / ParakeetForCTC config.json.
// Nothing is assumed: a key the model needs and the config lacks is an error naming the key.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/common/weight.h"
#include "runtime/base/dtype.h"
#include "runtime/base/status.h"

namespace vrun::parakeet {

enum class HeadKind { kTdt, kCtc };  // TDT with no durations is plain RNN-T

struct ParakeetConfig {
  HeadKind head = HeadKind::kTdt;
  // Encoder (NeMo ConformerEncoder names).
  int64_t feat_in = 0, d_model = 0, n_layers = 0, n_heads = 0, ff_dim = 0, conv_kernel = 0;
  int64_t subsampling_factor = 8, subsampling_channels = 0, pos_emb_max_len = 5000;
  bool xscaling = true, use_bias = true;
  // NeMo's limited-context attention (self_attention_model rel_pos_local_attn, att_context_size
  // [w, w]): each frame attends to the w frames on either side; 0: full attention (rel_pos).
  int64_t local_window = 0;
  // Output vocabulary: tokens 0..vocab_size-1, blank = vocab_size.
  int64_t vocab_size = 0;
  // TDT / RNN-T prediction network and joint.
  int64_t pred_hidden = 0, pred_layers = 0, joint_hidden = 0;
  std::vector<int64_t> durations;  // empty: RNN-T
  int64_t max_symbols = 10;
  double window_stride = 0.01;  // seconds per feature frame

  int64_t blank_id() const { return vocab_size; }
  int64_t joint_outputs() const { return vocab_size + 1 + static_cast<int64_t>(durations.size()); }
  // Frequency bins after the subsampling convolutions (3x3, stride 2, padding 1 each).
  int64_t subsampled_features() const;
  int64_t subsampling_stages() const;
  // NeMo's encoded length of n valid feature frames: each stride-2 stage maps n to
  // floor((n + 2 - 3) / 2) + 1.
  int64_t encoded_length(int64_t feature_frames) const;
  Status validate() const;
  std::string describe() const;
};

// Weights are served under their NeMo state-dict names.
using models::Weight;
using models::WeightSource;

// From a NeMo model config (model_config.yaml as JSON). `source` names it in messages.
Result<ParakeetConfig> config_from_nemo(const nlohmann::json& cfg, const std::string& source);
// From a Hugging Face config.json (ParakeetForTDT / ParakeetForCTC). joint_hidden is not part of
// it; the caller sets it from the projection weights.
Result<ParakeetConfig> config_from_hf(const nlohmann::json& cfg, const std::string& source);

}  // namespace vrun::parakeet
