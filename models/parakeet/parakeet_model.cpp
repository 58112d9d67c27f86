#include "models/parakeet/parakeet_model.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "runtime/backend.h"
#include "runtime/graph/builder.h"
#include "runtime/base/thread_pool.h"

namespace vrun::parakeet {

namespace {

// NeMo's RelPositionalEncoding table for relative positions (n-1) .. -(n-1), in float32 as
// torch computes it: div = exp(arange(0, d, 2) * -(ln 10000 / d)); pe[:, 2i] = sin(pos * div),
// pe[:, 2i+1] = cos(pos * div).
std::vector<float> relative_positions(int64_t n, int64_t d) {
  std::vector<float> pe(static_cast<size_t>((2 * n - 1) * d));
  const float k = static_cast<float>(-(std::log(10000.0) / static_cast<double>(d)));
  for (int64_t r = 0; r < 2 * n - 1; ++r) {
    const float pos = static_cast<float>(n - 1 - r);
    for (int64_t i = 0; i < d; i += 2) {
      const float div = std::exp(static_cast<float>(i) * k);
      const float a = pos * div;
      pe[static_cast<size_t>(r * d + i)] = static_cast<float>(std::sin(static_cast<double>(a)));
      if (i + 1 < d) pe[static_cast<size_t>(r * d + i + 1)] = static_cast<float>(std::cos(static_cast<double>(a)));
    }
  }
  return pe;
}

std::string layer(int64_t l) { return "encoder.layers." + std::to_string(l) + "."; }

}  // namespace

Result<std::shared_ptr<Program>> build_parakeet_program(const ImportedParakeet& model, const BuildSettings& settings) {
  const ParakeetConfig& c = model.config;
  VRUN_RETURN_IF_ERROR(c.validate());
  const int64_t M = settings.max_encoder_frames;
  if (M < 1 || M > 100000) return err(ErrorCode::kInvalidArgument, "parakeet build: max_encoder_frames ", M);
  // The encode methods: encode's attention is the checkpoint's (full, or its own local window);
  // encode_local (full-attention checkpoints only) sees local_window frames on either side.
  const bool full_attention = c.local_window == 0;  // encode (and encode_batch) attend to every frame
  const bool local_method = full_attention && settings.local_window > 0;
  const int64_t W = c.local_window > 0 ? c.local_window : settings.local_window;  // the band's window
  if (settings.local_window < 0 || settings.local_window > 100000 ||
      (local_method && (settings.max_local_frames < 1 || settings.max_local_frames > 1000000)))
    return err(ErrorCode::kInvalidArgument, "parakeet build: local attention window ", settings.local_window, " over ",
               settings.max_local_frames, " frames");
  if (settings.max_batch < 1 || settings.max_batch > 64)
    return err(ErrorCode::kInvalidArgument, "parakeet build: max_batch ", settings.max_batch, " (1 to 64)");
  if (settings.weight_dtype && *settings.weight_dtype != DType::f32 && *settings.weight_dtype != DType::f16 &&
      *settings.weight_dtype != DType::bf16)
    return err(ErrorCode::kInvalidArgument, "parakeet build: weight dtype ", dtype_name(*settings.weight_dtype), " (f32, f16 or bf16)");
  const WeightSource weights = model.source();
  const int64_t d = c.d_model, H = c.n_heads, dk = d / H, C = c.subsampling_channels, K = c.conv_kernel;
  const bool tdt = c.head == HeadKind::kTdt;
  ProgramBuilder pb;
  Status bad;
  // Checks a weight's shape and dtype (nullopt, with `bad` set, when it is missing or wrong).
  auto fetch = [&](const std::string& name, const std::vector<int64_t>& shape) -> std::optional<models::Weight> {
    if (!bad.is_ok()) return std::nullopt;
    auto w = weights(name);
    if (!w) {
      bad = err(ErrorCode::kNotFound, "parakeet checkpoint has no tensor '", name, "'");
      return std::nullopt;
    }
    if (w->shape != shape) {
      bad = err(ErrorCode::kInvalidProgram, "parakeet tensor '", name, "' has shape ", Shape::of(w->shape).str(), "; the config needs ",
                Shape::of(shape).str());
      return std::nullopt;
    }
    if (w->dtype != DType::f32 && w->dtype != DType::f16 && w->dtype != DType::bf16 && w->dtype != DType::f64) {
      bad = err(ErrorCode::kUnsupported, "parakeet tensor '", name, "' has dtype ", dtype_name(w->dtype));
      return std::nullopt;
    }
    return w;
  };
  // The dtype a linear weight is stored in: settings.weight_dtype, or as the checkpoint stores it.
  auto linear_dtype = [&](DType stored) { return settings.weight_dtype.value_or(stored == DType::f64 ? DType::f32 : stored); };
  // A linear weight from f32 values (converted, or made at build time) in dtype `to`.
  auto linear_from_f32 = [&](const std::string& name, DType to, const Shape& s, const float* v) -> int {
    if (to == DType::f32) return pb.add_constant_copy(name, DType::f32, s, v);
    std::vector<uint16_t> half(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < half.size(); ++i) half[i] = to == DType::f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    return pb.add_constant_copy(name, to, s, half.data());
  };
  // A linear weight: elements [first, first + s.numel()) of w, borrowed from the checkpoint
  // when no conversion is needed.
  auto linear_constant = [&](const std::string& name, const models::Weight& w, const Shape& s, int64_t first) -> int {
    const DType to = linear_dtype(w.dtype);
    if (to == w.dtype)
      return pb.add_constant(name, to, s, static_cast<const uint8_t*>(w.data) + dtype_bytes(w.dtype, first), w.keep);
    const std::vector<float> all = models::weight_to_f32(w);
    return linear_from_f32(name, to, s, all.data() + first);
  };
  // f32 = convert to an owned f32 constant (what convolutions, norms, biases and the LSTM
  // need), else a linear weight; `as` gives the constant another shape of the same element count.
  auto weight = [&](const std::string& name, const std::vector<int64_t>& shape, bool f32 = false,
                    std::vector<int64_t> as = {}) -> int {
    auto w = fetch(name, shape);
    if (!w) return -1;
    const Shape s = Shape::of(as.empty() ? shape : as);
    if (f32) {
      std::vector<float> v = models::weight_to_f32(*w);
      return pb.add_constant_copy(name, DType::f32, s, v.data());
    }
    return linear_constant(name, *w, s, 0);
  };
  auto optional_bias = [&](const std::string& name, int64_t n) { return c.use_bias ? weight(name, {n}, true) : -1; };
  // A checkpoint tensor as f32 values (empty, with `bad` set, when it is missing or wrong).
  auto values = [&](const std::string& name, const std::vector<int64_t>& shape) -> std::vector<float> {
    auto w = fetch(name, shape);
    return w ? models::weight_to_f32(*w) : std::vector<float>{};
  };

  // ---- weights
  const int64_t stages = c.subsampling_stages();
  struct Conv2 {
    int w = -1, b = -1, groups = 1, stride = 1, pad = 0;
  };
  std::vector<std::vector<Conv2>> sub;  // per stage: one conv (first) or depthwise + pointwise
  sub.push_back({{weight("encoder.pre_encode.conv.0.weight", {C, 1, 3, 3}, true), weight("encoder.pre_encode.conv.0.bias", {C}, true), 1, 2, 1}});
  for (int64_t s = 1; s < stages; ++s) {
    const std::string dw = "encoder.pre_encode.conv." + std::to_string(3 * s - 1), pw = "encoder.pre_encode.conv." + std::to_string(3 * s);
    sub.push_back({{weight(dw + ".weight", {C, 1, 3, 3}, true), weight(dw + ".bias", {C}, true), static_cast<int>(C), 2, 1},
                   {weight(pw + ".weight", {C, C, 1, 1}, true), weight(pw + ".bias", {C}, true), 1, 1, 0}});
  }
  const int64_t sub_in = C * c.subsampled_features();
  const int sub_out_w = weight("encoder.pre_encode.out.weight", {d, sub_in}), sub_out_b = weight("encoder.pre_encode.out.bias", {d}, true);
  // The relative-position table. With projected_positions it is projected by each layer's W_pos
  // when the program is built: the projection is row-wise, so a call's 2T - 1 middle rows of the
  // projected table are the projection of the table's middle rows, which the encoder would
  // otherwise compute in every layer of every call (8% of its products at 2000 frames). f16
  // programs with the fused attention (whose operands are halves) keep them (or the table) as halves.
  const std::vector<float> pe = full_attention ? relative_positions(M, d) : std::vector<float>{};
  // The local attention's band: relative positions W .. -W, as NeMo's LocalAttRelPositionalEncoding.
  const std::vector<float> pe_band = W > 0 ? relative_positions(W + 1, d) : std::vector<float>{};
  const bool half_positions = settings.fused_attention && settings.weight_dtype == DType::f16;
  const int pos_table = settings.projected_positions || !full_attention
                            ? -1
                            : linear_from_f32("encoder.relative_positions", half_positions ? DType::f16 : DType::f32,
                                              Shape{1, 2 * M - 1, d}, pe.data());
  ThreadPool build_pool;
  struct Lin {
    int w = -1, b = -1;
  };
  struct Norm {
    int g = -1, b = -1;
  };
  auto lin = [&](const std::string& p, int64_t out, int64_t in, bool bias) {
    return Lin{weight(p + ".weight", {out, in}), bias ? optional_bias(p + ".bias", out) : -1};
  };
  auto norm = [&](const std::string& p) { return Norm{weight(p + ".weight", {d}, true), weight(p + ".bias", {d}, true)}; };
  // The feed-forward's second projection with NeMo's 0.5 residual weight folded in (a power of
  // two: the same products, rounded the same), so the residual is added as it is written.
  auto half_lin = [&](const std::string& p, int64_t out, int64_t in) {
    Lin l;
    auto w = fetch(p + ".weight", {out, in});
    if (!w) return l;
    std::vector<float> v = models::weight_to_f32(*w);
    for (float& e : v) e *= 0.5f;
    l.w = linear_from_f32(p + ".weight*0.5", linear_dtype(w->dtype), Shape{out, in}, v.data());
    if (c.use_bias) {
      std::vector<float> b = values(p + ".bias", {out});
      for (float& e : b) e *= 0.5f;
      if (bad.is_ok()) l.b = pb.add_constant_copy(p + ".bias*0.5", DType::f32, Shape{out}, b.data());
    }
    return l;
  };
  struct Layer {
    Norm ff1_norm, att_norm, conv_norm, ff2_norm, out_norm;
    Lin ff1_a, ff1_b, ff2_a, ff2_b, qkv, o, pw1, pw2;
    int v_minus_u = -1, pos_proj = -1, pos_band = -1, pos_w = -1, dw_w = -1, dw_b = -1, bn_mean = -1, bn_var = -1, bn_w = -1, bn_b = -1;
  };
  const double inv_sqrt_dk = 1.0 / std::sqrt(static_cast<double>(dk));
  // Self-attention's projections as one: rows [W_q; W_k; W_v] with the bias [b_q + u; b_k; b_v],
  // so q + u (the content term's query) comes out of the projection; the position term's
  // query q + v is that plus (v - u). W_pos is stored times 1 / sqrt(d_k), which makes the
  // position scores come out already scaled.
  auto attention_weights = [&](const std::string& p, Layer& y) {
    auto wq = fetch(p + "linear_q.weight", {d, d});
    if (!wq) return;
    const DType to = linear_dtype(wq->dtype);
    std::vector<float> w = models::weight_to_f32(*wq), b(static_cast<size_t>(3 * d), 0.0f);
    for (const char* n : {"linear_k.weight", "linear_v.weight"}) {
      std::vector<float> more = values(p + n, {d, d});
      w.insert(w.end(), more.begin(), more.end());
    }
    if (c.use_bias) {
      const char* names[3] = {"linear_q.bias", "linear_k.bias", "linear_v.bias"};
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<float> v = values(p + names[i], {d});
        if (!v.empty()) std::copy(v.begin(), v.end(), b.begin() + i * d);
      }
    }
    const std::vector<float> u = values(p + "pos_bias_u", {H, dk}), vb = values(p + "pos_bias_v", {H, dk});
    if (!bad.is_ok()) return;
    std::vector<float> vu(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) {
      b[static_cast<size_t>(i)] += u[static_cast<size_t>(i)];
      vu[static_cast<size_t>(i)] = vb[static_cast<size_t>(i)] - u[static_cast<size_t>(i)];
    }
    y.qkv.w = linear_from_f32(p + "linear_qkv.weight", to, Shape{3 * d, d}, w.data());
    y.qkv.b = pb.add_constant_copy(p + "linear_qkv.bias+u", DType::f32, Shape{3 * d}, b.data());
    // Added to q + u as it is stored: halves in an f16 program.
    const bool half_q = settings.fused_attention && settings.weight_dtype == DType::f16;
    y.v_minus_u = linear_from_f32(p + "pos_bias_v-u", half_q ? DType::f16 : DType::f32, Shape{1, H, 1, dk}, vu.data());
    std::vector<float> wp = values(p + "linear_pos.weight", {d, d});
    if (!bad.is_ok()) return;
    for (float& e : wp) e = static_cast<float>(e * inv_sqrt_dk);
    if (full_attention && !settings.projected_positions)
      y.pos_w = linear_from_f32(p + "linear_pos.weight/sqrt(dk)", to, Shape{d, d}, wp.data());
    // Rounded to W_pos's program dtype first, as the product at run time would take it.
    if (to == DType::f16 || to == DType::bf16)
      for (float& e : wp) e = to == DType::f16 ? f16_to_f32(f32_to_f16(e)) : bf16_to_f32(f32_to_bf16(e));
    auto project = [&](const std::vector<float>& table, int64_t rows, const std::string& name) {
      std::vector<float> proj(static_cast<size_t>(rows * d));
      // table @ W_pos^T: the linear op, on the host backend's kernels.
      const TensorView x = TensorView::dense(const_cast<float*>(table.data()), DType::f32, Shape{rows, d});
      const TensorView w = TensorView::dense(wp.data(), DType::f32, Shape{d, d});
      TensorView y = TensorView::dense(proj.data(), DType::f32, Shape{rows, d});
      const TensorView ins[] = {x, w};
      const Status s = run_host_op(OpKind::linear, ins, std::span<TensorView>(&y, 1), Attrs(OpKind::linear), &build_pool);
      if (!s.is_ok()) bad = s;
      return linear_from_f32(p + name, half_positions ? DType::f16 : DType::f32, Shape{1, rows, d}, proj.data());
    };
    if (full_attention && settings.projected_positions) y.pos_proj = project(pe, 2 * M - 1, "relative_positions@linear_pos/sqrt(dk)");
    if (W > 0) y.pos_band = project(pe_band, 2 * W + 1, "local_positions@linear_pos/sqrt(dk)");
  };
  std::vector<Layer> L;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = layer(l);
    Layer y;
    y.ff1_norm = norm(p + "norm_feed_forward1");
    y.att_norm = norm(p + "norm_self_att");
    y.conv_norm = norm(p + "norm_conv");
    y.ff2_norm = norm(p + "norm_feed_forward2");
    y.out_norm = norm(p + "norm_out");
    y.ff1_a = lin(p + "feed_forward1.linear1", c.ff_dim, d, true);
    y.ff1_b = half_lin(p + "feed_forward1.linear2", d, c.ff_dim);
    y.ff2_a = lin(p + "feed_forward2.linear1", c.ff_dim, d, true);
    y.ff2_b = half_lin(p + "feed_forward2.linear2", d, c.ff_dim);
    attention_weights(p + "self_attn.", y);
    y.o = lin(p + "self_attn.linear_out", d, d, true);
    y.pw1 = Lin{weight(p + "conv.pointwise_conv1.weight", {2 * d, d, 1}, false, {2 * d, d}), optional_bias(p + "conv.pointwise_conv1.bias", 2 * d)};
    y.dw_w = weight(p + "conv.depthwise_conv.weight", {d, 1, K}, true);
    y.dw_b = optional_bias(p + "conv.depthwise_conv.bias", d);
    y.bn_mean = weight(p + "conv.batch_norm.running_mean", {d}, true);
    y.bn_var = weight(p + "conv.batch_norm.running_var", {d}, true);
    y.bn_w = weight(p + "conv.batch_norm.weight", {d}, true);
    y.bn_b = weight(p + "conv.batch_norm.bias", {d}, true);
    y.pw2 = Lin{weight(p + "conv.pointwise_conv2.weight", {d, d, 1}, false, {d, d}), optional_bias(p + "conv.pointwise_conv2.bias", d)};
    L.push_back(y);
  }
  Lin ctc, enc_proj;
  // TDT: the prediction network and the joint's output layer packed for tdt_greedy (ops.def): one
  // weights tensor (the LSTM gate rows as [w_ih | w_hh], the projection, the output layer) in the
  // linear weights' dtype, and one f32 tensor of the embedding and the biases.
  int dec_weights = -1, dec_vectors = -1, dec_state = -1, enc_state = -1;
  const int64_t V1 = c.vocab_size + 1, P = c.pred_hidden, J = c.joint_hidden, O = c.joint_outputs(), PL = c.pred_layers;
  if (!tdt) {
    ctc = Lin{weight("decoder.decoder_layers.0.weight", {V1, d, 1}, false, {V1, d}), weight("decoder.decoder_layers.0.bias", {V1}, true)};
  } else {
    enc_proj = Lin{weight("joint.enc.weight", {J, d}), weight("joint.enc.bias", {J}, true)};
    std::vector<float> w(static_cast<size_t>(PL * 8 * P * P + J * P + O * J));
    std::vector<float> v(static_cast<size_t>(V1 * P + PL * 4 * P + J + O), 0.0f);
    std::optional<DType> pack_dtype = settings.weight_dtype;
    // Copies checkpoint tensor `name` ([rows, cols]) into `dst` with rows `stride` apart.
    auto put = [&](const std::string& name, const std::vector<int64_t>& shape, float* dst, int64_t stride, bool required = true) {
      std::optional<models::Weight> t;
      if (required || weights(name)) t = fetch(name, shape);
      if (!t) return;
      if (!pack_dtype) pack_dtype = t->dtype == DType::f64 ? DType::f32 : t->dtype;
      const std::vector<float> f = models::weight_to_f32(*t);
      const int64_t cols = shape.back(), rows = static_cast<int64_t>(f.size()) / cols;
      for (int64_t r = 0; r < rows; ++r) std::copy_n(f.data() + r * cols, cols, dst + r * stride);
    };
    // The blank row is NeMo's start-of-sequence input, which is zeros whatever the table holds.
    put("decoder.prediction.embed.weight", {V1, P}, v.data(), P);
    std::fill(v.begin() + (V1 - 1) * P, v.begin() + V1 * P, 0.0f);
    for (int64_t l = 0; l < PL; ++l) {
      const std::string p = "decoder.prediction.dec_rnn.lstm.", n = std::to_string(l);
      float* wl = w.data() + l * 8 * P * P;
      put(p + "weight_ih_l" + n, {4 * P, P}, wl, 2 * P);
      put(p + "weight_hh_l" + n, {4 * P, P}, wl + P, 2 * P);
      // b_ih + b_hh as one bias (f32 sums, as NeMo's LSTM adds them).
      std::vector<float> bh(static_cast<size_t>(4 * P), 0.0f);
      float* bl = v.data() + V1 * P + l * 4 * P;
      put(p + "bias_ih_l" + n, {4 * P}, bl, 4 * P, false);
      put(p + "bias_hh_l" + n, {4 * P}, bh.data(), 4 * P, false);
      for (int64_t i = 0; i < 4 * P; ++i) bl[i] += bh[static_cast<size_t>(i)];
    }
    put("joint.pred.weight", {J, P}, w.data() + PL * 8 * P * P, P);
    put("joint.pred.bias", {J}, v.data() + V1 * P + PL * 4 * P, J);
    put("joint.joint_net.2.weight", {O, J}, w.data() + PL * 8 * P * P + J * P, J);
    put("joint.joint_net.2.bias", {O}, v.data() + V1 * P + PL * 4 * P + J, O);
    if (bad.is_ok()) {
      const DType wt = pack_dtype.value_or(DType::f32);
      if (wt == DType::f32) {
        dec_weights = pb.add_constant_copy("decoder.packed_weights", DType::f32, Shape{static_cast<int64_t>(w.size())}, w.data());
      } else {
        std::vector<uint16_t> half(w.size());
        for (size_t i = 0; i < w.size(); ++i) half[i] = wt == DType::f16 ? f32_to_f16(w[i]) : f32_to_bf16(w[i]);
        dec_weights = pb.add_constant_copy("decoder.packed_weights", wt, Shape{static_cast<int64_t>(w.size())}, half.data());
      }
      dec_vectors = pb.add_constant_copy("decoder.packed_vectors", DType::f32, Shape{static_cast<int64_t>(v.size())}, v.data());
    }
    dec_state = pb.add_state("decoder_state", DType::f32, {2 * PL * P + J});
    enc_state = pb.add_state("enc_proj", DType::f32, {std::max(settings.max_batch * M, local_method ? settings.max_local_frames : 0), J});
  }
  VRUN_RETURN_IF_ERROR(bad);

  auto C_ = [](MethodBuilder& g, int id) { return id >= 0 ? g.constant(id) : Val::none(); };
  auto linear = [&](MethodBuilder& g, Val x, Lin w, const std::string& name) {
    return g.op(OpKind::linear, {x, g.constant(w.w), C_(g, w.b)}, {}, name);
  };
  auto layer_norm = [&](MethodBuilder& g, Val x, Norm n, const std::string& name) {
    return g.op(OpKind::layer_norm, {x, g.constant(n.g), g.constant(n.b)}, {{"eps", 1e-5}}, name);
  };

  // ---- encode, and encode_batch: several (stream, chunk) jobs at once, padded to the longest.
  // Padding must not reach the valid frames: as NeMo does for a padded batch, every subsampling
  // convolution sees zeros past its job's length (mask inputs), attention keys past it get
  // -10000 (key_mask) and the conformer convolution sees zeros there (time_mask).
  // window > 0: local attention over window frames on either side; max_T: encoder frames per call;
  // prefix: the method's node names (distinct per method: the batch-norm folding names its
  // constants after them).
  auto encoder = [&](MethodBuilder& g, bool batched, int64_t window, int64_t max_T, const std::string& prefix) {
    const int64_t max_frames = max_T * c.subsampling_factor + c.subsampling_factor;
    const SymExpr frames = g.symbol("frames", 1, max_frames);
    const SymExpr T = g.symbol("enc_len", 1, max_T);
    const SymExpr B = batched ? g.symbol("batch", 1, settings.max_batch) : SymExpr(1);
    Val feats = g.input("features", DType::f32, {B, c.feat_in, frames});
    // frame_mask: 1 on a job's valid feature frames, 0 on the padding. A stride-2 stage keeps
    // output frame i valid iff its input frame 2i is, so every stage's mask is the previous one
    // at step 2.
    std::vector<Val> stage_mask;
    Val key_mask, time_mask;
    if (batched) {
      stage_mask.push_back(g.input("frame_mask", DType::f32, {B, 1, frames, 1}));
      for (size_t s = 0; s < sub.size(); ++s)
        stage_mask.push_back(g.op(OpKind::slice, {stage_mask.back()}, {{"axis", 2}, {"start", 0}, {"step", 2}}));
      Val valid = g.op(OpKind::copy, {g.op(OpKind::slice, {stage_mask.back()}, {{"axis", 2}, {"start", 0}, {"end", T}})});
      time_mask = g.op(OpKind::reshape, {valid}, {{"shape", {0, -1, 1}}});
      key_mask = g.op(OpKind::reshape, {g.op(OpKind::scale, {valid}, {{"scale", 10000.0}, {"bias", -10000.0}})}, {{"shape", {0, 1, 1, -1}}});
    }
    Val x = g.op(OpKind::reshape, {g.op(OpKind::permute, {feats}, {{"perm", {0, 2, 1}}})}, {{"shape", {0, 1, -1, c.feat_in}}});
    for (size_t s = 0; s < sub.size(); ++s) {
      if (batched && s > 0) x = g.op(OpKind::mul, {x, stage_mask[s]});
      for (size_t k = 0; k < sub[s].size(); ++k) {
        const Conv2& cv = sub[s][k];
        x = g.op(OpKind::conv2d, {x, g.constant(cv.w), g.constant(cv.b)},
                 {{"stride", {cv.stride, cv.stride}}, {"padding", {cv.pad, cv.pad}}, {"groups", cv.groups}},
                 "subsampling." + std::to_string(s) + "." + std::to_string(k));
      }
      x = g.op(OpKind::relu, {x});
    }
    // [B, C, T', F'] -> [B, T', C * F'] as NeMo's transpose(1, 2).reshape(b, t, -1).
    x = g.op(OpKind::reshape, {g.op(OpKind::permute, {x}, {{"perm", {0, 2, 1, 3}}})}, {{"shape", {0, -1, sub_in}}});
    x = g.op(OpKind::linear, {x, g.constant(sub_out_w), g.constant(sub_out_b)}, {}, "subsampling.out");
    x = g.op(OpKind::slice, {x}, {{"axis", 1}, {"start", 0}, {"end", T}});
    if (c.xscaling) x = g.op(OpKind::scale, {x}, {{"scale", std::sqrt(static_cast<double>(d))}}, "xscale");
    // f16 programs: the projections whose outputs only feed other projections or the attention
    // (the feed-forward's hidden rows, q + u, k, v and the positions) store them as halves, which
    // the tensor cores round their operands to anyway; the residual stream stays f32.
    const bool half = settings.weight_dtype == DType::f16;
    const bool half_attention = settings.fused_attention && half;
    auto heads = [&](Val t) { return g.op(OpKind::permute, {g.op(OpKind::reshape, {t}, {{"shape", {0, -1, H, dk}}})}, {{"perm", {0, 2, 1, 3}}}); };
    // A projection of layer_norm(x) (the norm as the linear's prologue: on tensor cores its rows
    // are stored as the halves they multiply as).
    auto norm_linear = [&](Val x_in, Norm n, Lin w, std::vector<NamedAttr> attrs, const std::string& name) {
      attrs.push_back({"norm", "layer"});
      attrs.push_back({"eps", 1e-5});
      return g.op(OpKind::linear, {x_in, g.constant(w.w), C_(g, w.b), Val::none(), g.constant(n.g), g.constant(n.b)}, attrs, name);
    };
    // x + 0.5 ffn(norm(x)): silu in the first projection's epilogue, the 0.5 in the second's
    // weights and the residual added as it writes.
    auto ffn = [&](Val x_in, Norm n, Lin a, Lin b, const std::string& p) {
      std::vector<NamedAttr> up = {{"act", "silu"}};
      if (half) up.push_back({"dtype", "f16"});
      Val hidden = norm_linear(x_in, n, a, up, p + ".linear1");
      std::vector<NamedAttr> down;
      if (half) down.push_back({"dtype", "f32"});
      return g.op(OpKind::linear, {hidden, g.constant(b.w), C_(g, b.b), x_in}, down, p + ".linear2");
    };
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const Layer& w = L[static_cast<size_t>(l)];
      const std::string p = prefix + "layer" + std::to_string(l) + ".";
      x = ffn(x, w.ff1_norm, w.ff1_a, w.ff1_b, p + "ff1");
      // Relative-position attention: softmax(((q + u) k^T + rel_shift((q + v) p^T)) / sqrt(dk)) v.
      // Fused: sdpa of (q + u, k, v) with the position term, already over sqrt(dk), as its
      // additive mask (the flash-style kernel never materialises the scores or their softmax).
      std::vector<NamedAttr> qkv_attrs;
      if (half_attention) qkv_attrs.push_back({"dtype", "f16"});
      Val qkv = norm_linear(x, w.att_norm, w.qkv, qkv_attrs, p + "qkv");
      std::vector<Val> parts = g.op_n(OpKind::split, {qkv}, {{"axis", -1}, {"sizes", {d, d, d}}});
      if (parts.size() != 3) break;  // the builder holds the error, which finish() returns
      Val qu = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
      Val qv = g.op(OpKind::add, {qu, g.constant(w.v_minus_u)});
      // The positions' projection (W_pos over sqrt(dk)) for relative positions T-1 .. -(T-1),
      // the middle 2T-1 rows of the projected table, and the position scores, shifted as they
      // are computed: [B, H, T, T], already over sqrt(dk).
      auto middle_rows = [&](int table) {
        return g.op(OpKind::slice, {g.constant(table)}, {{"axis", 1}, {"start", SymExpr(M) - T}, {"end", SymExpr(M - 1) + T}});
      };
      Val att;
      if (window > 0) {
        // Local attention (NeMo's RelPositionMultiHeadAttentionLongformer): in band coordinates
        // (column c: key t - window + c, relative position window - c) the position term needs no
        // shift, [B, H, T, 2 window + 1]; keys outside the audio take no part.
        Val pband = heads(g.constant(w.pos_band));
        Val position = g.op(OpKind::bmm, {qv, g.op(OpKind::permute, {pband}, {{"perm", {0, 1, 3, 2}}})}, {{"dtype", "f32"}}, p + "bd");
        att = g.op(OpKind::sdpa, {qu, k, v, position}, {{"scale", inv_sqrt_dk}, {"window", {window, window}}}, p + "attn");
      } else {
        Val pp = heads(settings.projected_positions
                           ? middle_rows(w.pos_proj)
                           : g.op(OpKind::linear, {middle_rows(pos_table), g.constant(w.pos_w)}, qkv_attrs, p + "pos"));
        Val position = g.op(OpKind::bmm, {qv, g.op(OpKind::permute, {pp}, {{"perm", {0, 1, 3, 2}}})}, {{"rel_shift", 1}, {"dtype", "f32"}},
                            p + "bd");
        if (batched) position = g.op(OpKind::add, {position, key_mask});
        if (settings.fused_attention) {
          att = g.op(OpKind::sdpa, {qu, k, v, position}, {{"scale", inv_sqrt_dk}}, p + "attn");
        } else {
          Val ac = g.op(OpKind::bmm, {qu, g.op(OpKind::permute, {k}, {{"perm", {0, 1, 3, 2}}})}, {}, p + "ac");
          Val scores = g.op(OpKind::add, {g.op(OpKind::scale, {ac}, {{"scale", inv_sqrt_dk}}), position});
          att = g.op(OpKind::bmm, {g.op(OpKind::softmax, {scores}, {{"axis", -1}}), v}, {}, p + "attn");
        }
      }
      // [B, H, T, dk] -> [B, T, H * dk] (halves gathered as halves), projected back into the
      // f32 residual stream, which the projection adds as it writes.
      att = g.op(OpKind::reshape, {g.op(OpKind::permute, {att}, {{"perm", {0, 2, 1, 3}}})}, {{"shape", {0, -1, d}}});
      std::vector<NamedAttr> out_attrs;
      if (half_attention) out_attrs.push_back({"dtype", "f32"});
      x = g.op(OpKind::linear, {att, g.constant(w.o.w), C_(g, w.o.b), x}, out_attrs, p + "attn_out");
      // Convolution module.
      Val h = g.op(OpKind::glu, {norm_linear(x, w.conv_norm, w.pw1, {}, p + "pointwise1")}, {{"axis", -1}});
      if (batched) h = g.op(OpKind::mul, {h, time_mask});
      h = g.op(OpKind::permute, {h}, {{"perm", {0, 2, 1}}});
      h = g.op(OpKind::conv1d, {h, g.constant(w.dw_w), C_(g, w.dw_b)}, {{"padding", {(K - 1) / 2}}, {"groups", d}}, p + "depthwise");
      h = g.op(OpKind::batch_norm, {h, g.constant(w.bn_mean), g.constant(w.bn_var), g.constant(w.bn_w), g.constant(w.bn_b)},
               {{"eps", 1e-5}, {"axis", 1}}, p + "batch_norm");
      h = g.op(OpKind::permute, {g.op(OpKind::silu, {h})}, {{"perm", {0, 2, 1}}});
      x = g.op(OpKind::linear, {h, g.constant(w.pw2.w), C_(g, w.pw2.b), x}, {}, p + "pointwise2");
      x = ffn(x, w.ff2_norm, w.ff2_a, w.ff2_b, p + "ff2");
      x = layer_norm(g, x, w.out_norm, p + "norm_out");
    }
    g.output(x, "encoder_out");
    if (tdt) {
      // The decode methods gather their frames from the enc_proj state by index (job j's frame t
      // at row j * enc_len + t), so frames never go back and forth between host and device.
      Val proj = linear(g, x, enc_proj, "joint.enc");
      g.op(OpKind::slice_update, {g.state(enc_state), g.op(OpKind::reshape, {proj}, {{"shape", {-1, J}}})}, {{"axis", 0}, {"start", 0}},
           "enc_proj_state");
      g.output(proj, "enc_proj");
    } else {
      g.output(linear(g, x, ctc, "ctc"), "logits");
    }
  };
  {
    MethodBuilder g = pb.method("encode");
    encoder(g, false, c.local_window, M, "");
  }
  // Padded jobs would need the key padding in band coordinates: a checkpoint with local
  // attention runs its jobs one at a time.
  if (settings.max_batch > 1 && full_attention) {
    MethodBuilder g = pb.method("encode_batch");
    encoder(g, true, 0, M, "batch.");
  }
  if (local_method) {
    MethodBuilder g = pb.method("encode_local");
    encoder(g, false, settings.local_window, settings.max_local_frames, "local.");
  }
  if (tdt) {
    // The whole greedy loop over the frames of one chunk: control (t, symbols, end, row offset,
    // fresh) in, the emitted tokens out, the prediction network's state kept in decoder_state.
    MethodBuilder g = pb.method("greedy");
    Val control = g.input("control", DType::i32, {5});
    std::vector<Val> o = g.op_n(OpKind::tdt_greedy, {g.state(enc_state), control, g.state(dec_state), g.constant(dec_weights), g.constant(dec_vectors)},
                                {{"layers", PL}, {"pred_hidden", P}, {"joint_hidden", J}, {"vocab", V1}, {"max_symbols", c.max_symbols},
                                 {"durations", c.durations}, {"capacity", kGreedyCapacity}},
                                "tdt_greedy");
    if (o.size() == 2) {
      g.output(o[0], "emitted");
      g.op(OpKind::slice_update, {g.state(dec_state), o[1]}, {{"axis", 0}, {"start", 0}}, "decoder_state");
    }
  }

  pb.set_meta("general.architecture", MetaValue::str("parakeet"));
  pb.set_meta("vrun.runner", MetaValue::str("parakeet"));
  pb.set_meta("parakeet.head", MetaValue::str(tdt ? "tdt" : "ctc"));
  const std::pair<const char*, int64_t> ints[] = {
      {"parakeet.feat_in", c.feat_in},     {"parakeet.d_model", c.d_model},
      {"parakeet.n_layers", c.n_layers},   {"parakeet.n_heads", c.n_heads},
      {"parakeet.ff_dim", c.ff_dim},       {"parakeet.conv_kernel", c.conv_kernel},
      {"parakeet.subsampling_factor", c.subsampling_factor}, {"parakeet.subsampling_channels", c.subsampling_channels},
      {"parakeet.pos_emb_max_len", c.pos_emb_max_len}, {"parakeet.xscaling", c.xscaling},
      {"parakeet.use_bias", c.use_bias},   {"parakeet.vocab_size", c.vocab_size},
      {"parakeet.pred_hidden", c.pred_hidden}, {"parakeet.pred_layers", c.pred_layers},
      {"parakeet.joint_hidden", c.joint_hidden}, {"parakeet.max_symbols", c.max_symbols},
      {"parakeet.max_encoder_frames", M}, {"parakeet.max_batch", settings.max_batch}};
  for (const auto& [k, v] : ints) pb.set_meta(k, MetaValue::integer(v));
  if (c.local_window > 0) pb.set_meta("parakeet.local_window", MetaValue::integer(c.local_window));
  if (local_method) {
    pb.set_meta("parakeet.encode_local_window", MetaValue::integer(settings.local_window));
    pb.set_meta("parakeet.max_local_frames", MetaValue::integer(settings.max_local_frames));
  }
  pb.set_meta("parakeet.durations", MetaValue::int_list(c.durations));
  pb.set_meta("parakeet.window_stride", MetaValue::real(c.window_stride));
  pb.set_meta("parakeet.preprocessor", MetaValue::str(model.preprocessor_json));
  pb.set_meta("parakeet.pieces", MetaValue::string_list(model.vocab.pieces));
  std::vector<int64_t> kinds;
  for (PieceKind k : model.vocab.kinds) kinds.push_back(static_cast<int64_t>(k));
  pb.set_meta("parakeet.piece_kinds", MetaValue::int_list(kinds));
  if (!model.spm_model.empty()) {
    pb.set_meta("tokenizer.kind", MetaValue::str("sentencepiece"));
    pb.set_meta("tokenizer.spm_model", MetaValue::bytes(model.spm_model));
  }
  return pb.finish();
}

Result<ProgramInfo> info_from_program(const Program& p) {
  ProgramInfo info;
  ParakeetConfig& c = info.config;
  const MetaValue* head = p.meta("parakeet.head");
  if (!head || (head->s != "tdt" && head->s != "ctc")) return err(ErrorCode::kInvalidProgram, p.source, ": metadata parakeet.head is missing");
  c.head = head->s == "tdt" ? HeadKind::kTdt : HeadKind::kCtc;
  int64_t xscaling = 1, use_bias = 1;
  const std::pair<const char*, int64_t*> ints[] = {
      {"parakeet.feat_in", &c.feat_in},     {"parakeet.d_model", &c.d_model},
      {"parakeet.n_layers", &c.n_layers},   {"parakeet.n_heads", &c.n_heads},
      {"parakeet.ff_dim", &c.ff_dim},       {"parakeet.conv_kernel", &c.conv_kernel},
      {"parakeet.subsampling_factor", &c.subsampling_factor}, {"parakeet.subsampling_channels", &c.subsampling_channels},
      {"parakeet.pos_emb_max_len", &c.pos_emb_max_len}, {"parakeet.xscaling", &xscaling},
      {"parakeet.use_bias", &use_bias},     {"parakeet.vocab_size", &c.vocab_size},
      {"parakeet.pred_hidden", &c.pred_hidden}, {"parakeet.pred_layers", &c.pred_layers},
      {"parakeet.joint_hidden", &c.joint_hidden}, {"parakeet.max_symbols", &c.max_symbols},
      {"parakeet.max_encoder_frames", &info.max_encoder_frames}};
  for (const auto& [k, out] : ints) {
    const MetaValue* v = p.meta(k);
    if (!v || v->type != MetaType::kInt) return err(ErrorCode::kInvalidProgram, p.source, ": metadata ", k, " is missing");
    *out = v->i;
  }
  c.xscaling = xscaling != 0;
  c.use_bias = use_bias != 0;
  // Programs from before encode_batch hold no max_batch.
  const MetaValue* batch = p.meta("parakeet.max_batch");
  info.max_batch = batch && batch->type == MetaType::kInt && p.method("encode_batch") ? batch->i : 1;
  // Optional (programs from before local attention hold none): the checkpoint's own window, and encode_local's.
  auto optional_int = [&](const char* key) {
    const MetaValue* v = p.meta(key);
    return v && v->type == MetaType::kInt ? v->i : 0;
  };
  c.local_window = optional_int("parakeet.local_window");
  if (p.method("encode_local")) {
    info.local_window = optional_int("parakeet.encode_local_window");
    info.max_local_frames = optional_int("parakeet.max_local_frames");
    if (info.local_window < 1 || info.max_local_frames < 1)
      return err(ErrorCode::kInvalidProgram, p.source, ": encode_local without its window and frame bound in the metadata");
  }
  const MetaValue* durations = p.meta("parakeet.durations");
  const MetaValue* stride = p.meta("parakeet.window_stride");
  const MetaValue* pre = p.meta("parakeet.preprocessor");
  const MetaValue* pieces = p.meta("parakeet.pieces");
  const MetaValue* kinds = p.meta("parakeet.piece_kinds");
  if (!durations || !stride || !pre || !pieces || !kinds || pieces->type != MetaType::kStrings || kinds->type != MetaType::kInts ||
      pieces->strings.size() != kinds->ints.size())
    return err(ErrorCode::kInvalidProgram, p.source, ": parakeet metadata (durations, window stride, preprocessor, vocabulary) is incomplete");
  c.durations = durations->ints;
  c.window_stride = stride->f;
  info.preprocessor_json = pre->s;
  info.vocab.pieces = pieces->strings;
  for (int64_t k : kinds->ints) {
    if (k < 0 || k > 3) return err(ErrorCode::kInvalidProgram, p.source, ": piece kind ", k);
    info.vocab.kinds.push_back(static_cast<PieceKind>(k));
  }
  VRUN_RETURN_IF_ERROR(c.validate().with_context(p.source));
  if (static_cast<int64_t>(info.vocab.size()) != c.vocab_size)
    return err(ErrorCode::kInvalidProgram, p.source, ": ", info.vocab.size(), " vocabulary pieces for a ", c.vocab_size, "-token model");
  return info;
}

}  // namespace vrun::parakeet
