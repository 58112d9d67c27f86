// The Parakeet program's weights: each checkpoint tensor checked and added as a constant, in the
// order the program holds them (subsampling, relative positions, conformer layers, then the CTC
// head or the TDT decoder and joint).
#include <algorithm>
#include <cmath>

#include "models/parakeet/parakeet_builder.h"
#include "runtime/backend.h"

namespace vrun::parakeet::detail {

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

}  // namespace

std::optional<models::Weight> ParakeetBuilder::fetch(const std::string& name, const std::vector<int64_t>& shape) {
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
}

DType ParakeetBuilder::linear_dtype(DType stored) const {
  return settings.weight_dtype.value_or(stored == DType::f64 ? DType::f32 : stored);
}

int ParakeetBuilder::linear_from_f32(const std::string& name, DType to, const Shape& s, const float* v) {
  if (to == DType::f32) return pb.add_constant_copy(name, DType::f32, s, v);
  std::vector<uint16_t> halves(static_cast<size_t>(s.numel()));
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = to == DType::f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  return pb.add_constant_copy(name, to, s, halves.data());
}

int ParakeetBuilder::linear_constant(const std::string& name, const models::Weight& w, const Shape& s, int64_t first) {
  const DType to = linear_dtype(w.dtype);
  if (to == w.dtype)
    return pb.add_constant(name, to, s, static_cast<const uint8_t*>(w.data) + dtype_bytes(w.dtype, first), w.keep);
  const std::vector<float> all = models::weight_to_f32(w);
  return linear_from_f32(name, to, s, all.data() + first);
}

int ParakeetBuilder::weight(const std::string& name, const std::vector<int64_t>& shape, bool f32, std::vector<int64_t> as) {
  auto w = fetch(name, shape);
  if (!w) return -1;
  const Shape s = Shape::of(as.empty() ? shape : as);
  if (f32) {
    std::vector<float> v = models::weight_to_f32(*w);
    return pb.add_constant_copy(name, DType::f32, s, v.data());
  }
  return linear_constant(name, *w, s, 0);
}

int ParakeetBuilder::optional_bias(const std::string& name, int64_t n) { return c.use_bias ? weight(name, {n}, true) : -1; }

std::vector<float> ParakeetBuilder::values(const std::string& name, const std::vector<int64_t>& shape) {
  auto w = fetch(name, shape);
  return w ? models::weight_to_f32(*w) : std::vector<float>{};
}

Lin ParakeetBuilder::lin(const std::string& p, int64_t out, int64_t in, bool bias) {
  return Lin{weight(p + ".weight", {out, in}), bias ? optional_bias(p + ".bias", out) : -1};
}

Norm ParakeetBuilder::norm(const std::string& p) { return Norm{weight(p + ".weight", {d}, true), weight(p + ".bias", {d}, true)}; }

// The feed-forward's second projection with NeMo's 0.5 residual weight folded in (a power of
// two: the same products, rounded the same), so the residual is added as it is written.
Lin ParakeetBuilder::half_lin(const std::string& p, int64_t out, int64_t in) {
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
}

void ParakeetBuilder::subsampling_weights() {
  const int64_t stages = c.subsampling_stages();
  sub.push_back({{weight("encoder.pre_encode.conv.0.weight", {C, 1, 3, 3}, true), weight("encoder.pre_encode.conv.0.bias", {C}, true), 1, 2, 1}});
  for (int64_t s = 1; s < stages; ++s) {
    const std::string dw = "encoder.pre_encode.conv." + std::to_string(3 * s - 1), pw = "encoder.pre_encode.conv." + std::to_string(3 * s);
    sub.push_back({{weight(dw + ".weight", {C, 1, 3, 3}, true), weight(dw + ".bias", {C}, true), static_cast<int>(C), 2, 1},
                   {weight(pw + ".weight", {C, C, 1, 1}, true), weight(pw + ".bias", {C}, true), 1, 1, 0}});
  }
  sub_in = C * c.subsampled_features();
  sub_out_w = weight("encoder.pre_encode.out.weight", {d, sub_in});
  sub_out_b = weight("encoder.pre_encode.out.bias", {d}, true);
}

void ParakeetBuilder::position_tables() {
  // The relative-position table. With projected_positions it is projected by each layer's W_pos
  // when the program is built: the projection is row-wise, so a call's 2T - 1 middle rows of the
  // projected table are the projection of the table's middle rows, which the encoder would
  // otherwise compute in every layer of every call (8% of its products at 2000 frames). f16
  // programs with the fused attention (whose operands are halves) keep them (or the table) as halves.
  pe = full_attention ? relative_positions(M, d) : std::vector<float>{};
  // The local attention's band: relative positions W .. -W, as NeMo's LocalAttRelPositionalEncoding.
  pe_band = W > 0 ? relative_positions(W + 1, d) : std::vector<float>{};
  pos_table = settings.projected_positions || !full_attention
                  ? -1
                  : linear_from_f32("encoder.relative_positions", half_positions ? DType::f16 : DType::f32,
                                    Shape{1, 2 * M - 1, d}, pe.data());
  if (long_method) {
    const int64_t N = settings.max_long_frames;
    const std::vector<float> pe_long = relative_positions(N, d);
    pos_table_long = linear_from_f32("encoder.relative_positions_long", half_positions ? DType::f16 : DType::f32, Shape{1, 2 * N - 1, d},
                                     pe_long.data());
  }
}

// Self-attention's projections as one: rows [W_q; W_k; W_v] with the bias [b_q + u; b_k; b_v],
// so q + u (the content term's query) comes out of the projection; the position term's
// query q + v is that plus (v - u). W_pos is stored times 1 / sqrt(d_k), which makes the
// position scores come out already scaled.
void ParakeetBuilder::attention_weights(const std::string& p, Layer& y) {
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
  if ((full_attention && !settings.projected_positions) || long_method)
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
}

Layer ParakeetBuilder::layer_weights(int64_t l) {
  const std::string p = "encoder.layers." + std::to_string(l) + ".";
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
  return y;
}

void ParakeetBuilder::ctc_weights() {
  ctc = Lin{weight("decoder.decoder_layers.0.weight", {V1, d, 1}, false, {V1, d}), weight("decoder.decoder_layers.0.bias", {V1}, true)};
}

void ParakeetBuilder::decoder_joint_weights() {
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
      std::vector<uint16_t> halves(w.size());
      for (size_t i = 0; i < w.size(); ++i) halves[i] = wt == DType::f16 ? f32_to_f16(w[i]) : f32_to_bf16(w[i]);
      dec_weights = pb.add_constant_copy("decoder.packed_weights", wt, Shape{static_cast<int64_t>(w.size())}, halves.data());
    }
    dec_vectors = pb.add_constant_copy("decoder.packed_vectors", DType::f32, Shape{static_cast<int64_t>(v.size())}, v.data());
  }
  dec_state = pb.add_state("decoder_state", DType::f32, {2 * PL * P + J});
  enc_state = pb.add_state("enc_proj", DType::f32,
                           {std::max({settings.max_batch * M, local_method ? settings.max_local_frames : 0, long_method ? settings.max_long_frames : 0}), J});
}

}  // namespace vrun::parakeet::detail
