// The Parakeet program builder's state, shared by its parts: the weights (parakeet_weights.cpp:
// subsampling, conformer layers with their fused attention projections, the CTC head or the TDT
// decoder and joint), the encode methods (parakeet_encoder.cpp: subsampling, conformer layers,
// attention) and the rest (parakeet_model.cpp: the greedy method, metadata, the order of it all).
// Internal to models/parakeet.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/parakeet/parakeet_model.h"
#include "runtime/base/thread_pool.h"
#include "runtime/graph/builder.h"

namespace vrun::parakeet::detail {

// Constant ids (-1: none) of a convolution, a linear layer and a layer norm.
struct Conv2 {
  int w = -1, b = -1, groups = 1, stride = 1, pad = 0;
};
struct Lin {
  int w = -1, b = -1;
};
struct Norm {
  int g = -1, b = -1;
};
struct Layer {
  Norm ff1_norm, att_norm, conv_norm, ff2_norm, out_norm;
  Lin ff1_a, ff1_b, ff2_a, ff2_b, qkv, o, pw1, pw2;
  int v_minus_u = -1, pos_proj = -1, pos_band = -1, pos_w = -1, dw_w = -1, dw_b = -1, bn_mean = -1, bn_var = -1, bn_w = -1, bn_b = -1;
};

// One encode method being built: what its subsampling and layers share.
// window > 0: local attention over window frames on either side; prefix: the method's node names
// (distinct per method: the batch-norm folding names its constants after them).
struct EncodeGraph {
  MethodBuilder& g;
  bool batched = false;
  int64_t window = 0;
  std::string prefix;
  SymExpr T;  // encoder frames
  int64_t max_T = 0;
  // encode_long: the relative positions from their own table of 2 max_T - 1 rows, projected by
  // W_pos in each call (no table projected when built).
  bool long_positions = false;
  // Batched: each subsampling stage's frame mask, the attention's key mask and the conformer
  // convolution's time mask (zeros past each job's length).
  std::vector<Val> stage_mask;
  Val key_mask, time_mask;
};

// Builds a program from an imported checkpoint whose config is valid: every weight first (the
// constants in the order the program holds them), then the methods and the metadata.
struct ParakeetBuilder {
  ParakeetBuilder(const ImportedParakeet& m, const BuildSettings& s) : model(m), settings(s) {}

  Result<std::shared_ptr<Program>> build();
  Status check_settings() const;
  void set_metadata();

  // ---- weights (parakeet_weights.cpp); on a missing or malformed tensor they return -1 (or
  // nothing) and set `bad`.
  // Checks a weight's shape and dtype (nullopt, with `bad` set, when it is missing or wrong).
  std::optional<models::Weight> fetch(const std::string& name, const std::vector<int64_t>& shape);
  // The dtype a linear weight is stored in: settings.weight_dtype, or as the checkpoint stores it.
  DType linear_dtype(DType stored) const;
  // A linear weight from f32 values (converted, or made at build time) in dtype `to`.
  int linear_from_f32(const std::string& name, DType to, const Shape& s, const float* v);
  // A linear weight: elements [first, first + s.numel()) of w, borrowed from the checkpoint
  // when no conversion is needed.
  int linear_constant(const std::string& name, const models::Weight& w, const Shape& s, int64_t first);
  // f32 = convert to an owned f32 constant (what convolutions, norms, biases and the LSTM
  // need), else a linear weight; `as` gives the constant another shape of the same element count.
  int weight(const std::string& name, const std::vector<int64_t>& shape, bool f32 = false, std::vector<int64_t> as = {});
  int optional_bias(const std::string& name, int64_t n);
  // A checkpoint tensor as f32 values (empty, with `bad` set, when it is missing or wrong).
  std::vector<float> values(const std::string& name, const std::vector<int64_t>& shape);
  Lin lin(const std::string& p, int64_t out, int64_t in, bool bias);
  Norm norm(const std::string& p);
  Lin half_lin(const std::string& p, int64_t out, int64_t in);
  void subsampling_weights();
  void position_tables();
  void attention_weights(const std::string& p, Layer& y);
  Layer layer_weights(int64_t l);
  void ctc_weights();
  void decoder_joint_weights();

  // ---- the encode methods (parakeet_encoder.cpp)
  // max_B: jobs per call of a batched method (1 builds encode, encode_long or encode_local: no
  // masks); long_positions: encode_long's position table (EncodeGraph).
  void encoder(MethodBuilder& g, int64_t max_B, int64_t window, int64_t max_T, const std::string& prefix, bool long_positions = false);
  Val subsampling(EncodeGraph& e, Val feats);
  // false when the builder holds an error (which finish() returns): the layers stop there.
  bool conformer_layer(EncodeGraph& e, int64_t l, Val& x);
  Val attention(EncodeGraph& e, const Layer& w, Val qu, Val k, Val v, Val qv, const std::string& p,
                const std::vector<NamedAttr>& qkv_attrs);
  Val heads(MethodBuilder& g, Val t) const;
  Val norm_linear(MethodBuilder& g, Val x_in, Norm n, Lin w, std::vector<NamedAttr> attrs, const std::string& name) const;
  Val ffn(MethodBuilder& g, Val x_in, Norm n, Lin a, Lin b, const std::string& p) const;
  void head_outputs(MethodBuilder& g, Val x);
  // attrs with batch_invariant = 1 when the method being built pins its kernels (pin_).
  std::vector<NamedAttr> pinned(std::vector<NamedAttr> attrs) const {
    if (pin_) attrs.push_back({"batch_invariant", int64_t{1}});
    return attrs;
  }
  bool pin_ = false;
  // tdt_greedy over the enc_proj state and the packed decoder: emitted, state_out.
  std::vector<Val> greedy_op(MethodBuilder& g, Val control, Val state, int64_t capacity);
  void greedy_method(MethodBuilder& g);
  void greedy_batch_method(MethodBuilder& g);

  const ImportedParakeet& model;
  const BuildSettings& settings;
  const ParakeetConfig& c = model.config;
  const int64_t M = settings.max_encoder_frames;
  // The encode methods: encode's attention is the checkpoint's (full, or its own local window);
  // encode_local (full-attention checkpoints only) sees local_window frames on either side.
  const bool full_attention = c.local_window == 0;  // encode (and encode_batch) attend to every frame
  const bool local_method = full_attention && settings.local_window > 0;
  // encode_long: full attention over up to settings.max_long_frames in one call.
  const bool long_method = full_attention && settings.max_long_frames > settings.max_encoder_frames;
  const int64_t W = c.local_window > 0 ? c.local_window : settings.local_window;  // the band's window
  const models::WeightSource weights = model.source();
  const int64_t d = c.d_model, H = c.n_heads, dk = d / H, C = c.subsampling_channels, K = c.conv_kernel;
  const bool tdt = c.head == HeadKind::kTdt;
  const double inv_sqrt_dk = 1.0 / std::sqrt(static_cast<double>(dk));
  // f16 programs with the fused attention (whose operands are halves) keep the positions as halves.
  const bool half_positions = settings.fused_attention && settings.weight_dtype == DType::f16;
  // f16 programs: the projections whose outputs only feed other projections or the attention
  // (the feed-forward's hidden rows, q + u, k, v and the positions) store them as halves, which
  // the tensor cores round their operands to anyway; the residual stream stays f32.
  const bool half = settings.weight_dtype == DType::f16;
  const bool half_attention = settings.fused_attention && half;
  const int64_t V1 = c.vocab_size + 1, P = c.pred_hidden, J = c.joint_hidden, O = c.joint_outputs(), PL = c.pred_layers;
  ProgramBuilder pb;
  Status bad;
  ThreadPool build_pool;

  std::vector<std::vector<Conv2>> sub;  // per stage: one conv (first) or depthwise + pointwise
  int64_t sub_in = 0;
  int sub_out_w = -1, sub_out_b = -1;
  std::vector<float> pe, pe_band;  // relative-position tables: encode's and the local band's
  int pos_table = -1, pos_table_long = -1;
  std::vector<Layer> L;
  Lin ctc, enc_proj;
  // TDT: the prediction network and the joint's output layer packed for tdt_greedy (ops.def): one
  // weights tensor (the LSTM gate rows as [w_ih | w_hh], the projection, the output layer) in the
  // linear weights' dtype, and one f32 tensor of the embedding and the biases.
  int dec_weights = -1, dec_vectors = -1, dec_state = -1, enc_state = -1;
};

}  // namespace vrun::parakeet::detail
