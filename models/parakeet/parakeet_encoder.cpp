// The Parakeet encode methods: encode, encode_batch (several (stream, chunk) jobs at once,
// padded to the longest), encode_long (full attention over more frames) and encode_local.
// Subsampling, then the conformer layers (feed-forward, relative-position attention, convolution
// module, feed-forward), then the CTC logits or the joint's encoder projection.
#include <cmath>

#include "models/parakeet/parakeet_builder.h"

namespace vrun::parakeet::detail {

namespace {

Val C_(MethodBuilder& g, int id) { return id >= 0 ? g.constant(id) : Val::none(); }

Val linear(MethodBuilder& g, Val x, Lin w, std::vector<NamedAttr> attrs, const std::string& name) {
  return g.op(OpKind::linear, {x, g.constant(w.w), C_(g, w.b)}, attrs, name);
}

Val layer_norm(MethodBuilder& g, Val x, Norm n, const std::string& name) {
  return g.op(OpKind::layer_norm, {x, g.constant(n.g), g.constant(n.b)}, {{"eps", 1e-5}}, name);
}

}  // namespace

// Padding must not reach the valid frames: as NeMo does for a padded batch, every subsampling
// convolution sees zeros past its job's length (mask inputs), attention keys past it get -10000
// (key_mask) and the conformer convolution sees zeros there (time_mask).
// max_T: encoder frames per call.
void ParakeetBuilder::encoder(MethodBuilder& g, int64_t max_B, int64_t window, int64_t max_T, const std::string& prefix, bool long_positions) {
  const bool batched = max_B > 1;
  // Full attention: the jobs of a batched call get what encode gives each alone (the methods'
  // projections, position scores and attention chosen alike for any row count on a GPU).
  pin_ = window == 0;
  const int64_t max_frames = max_T * c.subsampling_factor + c.subsampling_factor;
  const SymExpr frames = g.symbol("frames", 1, max_frames);
  const SymExpr T = g.symbol("enc_len", 1, max_T);
  const SymExpr B = batched ? g.symbol("batch", 1, max_B) : SymExpr(1);
  Val feats = g.input("features", DType::f32, {B, c.feat_in, frames});
  EncodeGraph e{g, batched, window, prefix, T, max_T, long_positions, {}, {}, {}};
  // frame_mask: 1 on a job's valid feature frames, 0 on the padding. A stride-2 stage keeps
  // output frame i valid iff its input frame 2i is, so every stage's mask is the previous one
  // at step 2.
  if (batched) {
    e.stage_mask.push_back(g.input("frame_mask", DType::f32, {B, 1, frames, 1}));
    for (size_t s = 0; s < sub.size(); ++s)
      e.stage_mask.push_back(g.op(OpKind::slice, {e.stage_mask.back()}, {{"axis", 2}, {"start", 0}, {"step", 2}}));
    Val valid = g.op(OpKind::copy, {g.op(OpKind::slice, {e.stage_mask.back()}, {{"axis", 2}, {"start", 0}, {"end", T}})});
    e.time_mask = g.op(OpKind::reshape, {valid}, {{"shape", {0, -1, 1}}});
    e.key_mask = g.op(OpKind::reshape, {g.op(OpKind::scale, {valid}, {{"scale", 10000.0}, {"bias", -10000.0}})}, {{"shape", {0, 1, 1, -1}}});
  }
  Val x = subsampling(e, feats);
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (!conformer_layer(e, l, x)) break;  // the builder holds the error, which finish() returns
  g.output(x, "encoder_out");
  head_outputs(g, x);
}

// Subsampling: stride-2 convolutions (the first a full one, then depthwise + pointwise), each
// followed by relu, then [B, C, T', F'] flattened per frame and projected to d_model.
Val ParakeetBuilder::subsampling(EncodeGraph& e, Val feats) {
  MethodBuilder& g = e.g;
  Val x = g.op(OpKind::reshape, {g.op(OpKind::permute, {feats}, {{"perm", {0, 2, 1}}})}, {{"shape", {0, 1, -1, c.feat_in}}});
  for (size_t s = 0; s < sub.size(); ++s) {
    if (e.batched && s > 0) x = g.op(OpKind::mul, {x, e.stage_mask[s]});
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
  x = g.op(OpKind::linear, {x, g.constant(sub_out_w), g.constant(sub_out_b)}, pinned({}), "subsampling.out");
  x = g.op(OpKind::slice, {x}, {{"axis", 1}, {"start", 0}, {"end", e.T}});
  if (c.xscaling) x = g.op(OpKind::scale, {x}, {{"scale", std::sqrt(static_cast<double>(d))}}, "xscale");
  return x;
}

Val ParakeetBuilder::heads(MethodBuilder& g, Val t) const {
  return g.op(OpKind::permute, {g.op(OpKind::reshape, {t}, {{"shape", {0, -1, H, dk}}})}, {{"perm", {0, 2, 1, 3}}});
}

// A projection of layer_norm(x) (the norm as the linear's prologue: on tensor cores its rows
// are stored as the halves they multiply as).
Val ParakeetBuilder::norm_linear(MethodBuilder& g, Val x_in, Norm n, Lin w, std::vector<NamedAttr> attrs,
                                 const std::string& name) const {
  attrs.push_back({"norm", "layer"});
  attrs.push_back({"eps", 1e-5});
  return g.op(OpKind::linear, {x_in, g.constant(w.w), C_(g, w.b), Val::none(), g.constant(n.g), g.constant(n.b)}, pinned(attrs), name);
}

// x + 0.5 ffn(norm(x)): silu in the first projection's epilogue, the 0.5 in the second's
// weights and the residual added as it writes.
Val ParakeetBuilder::ffn(MethodBuilder& g, Val x_in, Norm n, Lin a, Lin b, const std::string& p) const {
  std::vector<NamedAttr> up = {{"act", "silu"}};
  if (half) up.push_back({"dtype", "f16"});
  Val hidden = norm_linear(g, x_in, n, a, up, p + ".linear1");
  std::vector<NamedAttr> down;
  if (half) down.push_back({"dtype", "f32"});
  return g.op(OpKind::linear, {hidden, g.constant(b.w), C_(g, b.b), x_in}, pinned(down), p + ".linear2");
}

// One conformer layer on the residual stream x: feed-forward, attention, convolution module,
// feed-forward, norm.
bool ParakeetBuilder::conformer_layer(EncodeGraph& e, int64_t l, Val& x) {
  MethodBuilder& g = e.g;
  const Layer& w = L[static_cast<size_t>(l)];
  const std::string p = e.prefix + "layer" + std::to_string(l) + ".";
  x = ffn(g, x, w.ff1_norm, w.ff1_a, w.ff1_b, p + "ff1");
  // Relative-position attention: softmax(((q + u) k^T + rel_shift((q + v) p^T)) / sqrt(dk)) v.
  // Fused: sdpa of (q + u, k, v) with the position term, already over sqrt(dk), as its
  // additive mask (the flash-style kernel never materialises the scores or their softmax).
  std::vector<NamedAttr> qkv_attrs;
  if (half_attention) qkv_attrs.push_back({"dtype", "f16"});
  Val qkv = norm_linear(g, x, w.att_norm, w.qkv, qkv_attrs, p + "qkv");
  std::vector<Val> parts = g.op_n(OpKind::split, {qkv}, {{"axis", -1}, {"sizes", {d, d, d}}});
  if (parts.size() != 3) return false;
  Val qu = heads(g, parts[0]), k = heads(g, parts[1]), v = heads(g, parts[2]);
  Val qv = g.op(OpKind::add, {qu, g.constant(w.v_minus_u)});
  Val att = attention(e, w, qu, k, v, qv, p, qkv_attrs);
  // [B, H, T, dk] -> [B, T, H * dk] (halves gathered as halves), projected back into the
  // f32 residual stream, which the projection adds as it writes.
  att = g.op(OpKind::reshape, {g.op(OpKind::permute, {att}, {{"perm", {0, 2, 1, 3}}})}, {{"shape", {0, -1, d}}});
  std::vector<NamedAttr> out_attrs;
  if (half_attention) out_attrs.push_back({"dtype", "f32"});
  x = g.op(OpKind::linear, {att, g.constant(w.o.w), C_(g, w.o.b), x}, pinned(out_attrs), p + "attn_out");
  // Convolution module.
  Val h = g.op(OpKind::glu, {norm_linear(g, x, w.conv_norm, w.pw1, {}, p + "pointwise1")}, {{"axis", -1}});
  if (e.batched) h = g.op(OpKind::mul, {h, e.time_mask});
  h = g.op(OpKind::permute, {h}, {{"perm", {0, 2, 1}}});
  h = g.op(OpKind::conv1d, {h, g.constant(w.dw_w), C_(g, w.dw_b)}, {{"padding", {(K - 1) / 2}}, {"groups", d}}, p + "depthwise");
  h = g.op(OpKind::batch_norm, {h, g.constant(w.bn_mean), g.constant(w.bn_var), g.constant(w.bn_w), g.constant(w.bn_b)},
           {{"eps", 1e-5}, {"axis", 1}}, p + "batch_norm");
  h = g.op(OpKind::permute, {g.op(OpKind::silu, {h})}, {{"perm", {0, 2, 1}}});
  x = g.op(OpKind::linear, {h, g.constant(w.pw2.w), C_(g, w.pw2.b), x}, pinned({}), p + "pointwise2");
  x = ffn(g, x, w.ff2_norm, w.ff2_a, w.ff2_b, p + "ff2");
  x = layer_norm(g, x, w.out_norm, p + "norm_out");
  return true;
}

// The attention of (q + u, k, v) with the position term, from (q + v) and the positions'
// projection: [B, H, T, dk].
Val ParakeetBuilder::attention(EncodeGraph& e, const Layer& w, Val qu, Val k, Val v, Val qv, const std::string& p,
                               const std::vector<NamedAttr>& qkv_attrs) {
  MethodBuilder& g = e.g;
  // The positions' projection (W_pos over sqrt(dk)) for relative positions T-1 .. -(T-1),
  // the middle 2T-1 rows of the projected table, and the position scores, shifted as they
  // are computed: [B, H, T, T], already over sqrt(dk).
  // Tables hold 2 N - 1 rows for relative positions N-1 .. -(N-1): N = max_encoder_frames, or
  // the method's own bound for encode_long's.
  auto middle_rows = [&](int table, int64_t N) {
    return g.op(OpKind::slice, {g.constant(table)}, {{"axis", 1}, {"start", SymExpr(N) - e.T}, {"end", SymExpr(N - 1) + e.T}});
  };
  Val att;
  if (e.window > 0) {
    // Local attention (NeMo's RelPositionMultiHeadAttentionLongformer): in band coordinates
    // (column c: key t - window + c, relative position window - c) the position term needs no
    // shift, [B, H, T, 2 window + 1]; keys outside the audio take no part.
    Val pband = heads(g, g.constant(w.pos_band));
    Val position = g.op(OpKind::bmm, {qv, g.op(OpKind::permute, {pband}, {{"perm", {0, 1, 3, 2}}})}, {{"dtype", "f32"}}, p + "bd");
    att = g.op(OpKind::sdpa, {qu, k, v, position}, {{"scale", inv_sqrt_dk}, {"window", {e.window, e.window}}}, p + "attn");
  } else {
    Val pp = heads(g, e.long_positions ? g.op(OpKind::linear, {middle_rows(pos_table_long, e.max_T), g.constant(w.pos_w)}, pinned(qkv_attrs), p + "pos")
                      : settings.projected_positions
                          ? middle_rows(w.pos_proj, M)
                          : g.op(OpKind::linear, {middle_rows(pos_table, M), g.constant(w.pos_w)}, pinned(qkv_attrs), p + "pos"));
    Val position = g.op(OpKind::bmm, {qv, g.op(OpKind::permute, {pp}, {{"perm", {0, 1, 3, 2}}})}, pinned({{"rel_shift", 1}, {"dtype", "f32"}}),
                        p + "bd");
    if (e.batched) position = g.op(OpKind::add, {position, e.key_mask});
    if (settings.fused_attention) {
      att = g.op(OpKind::sdpa, {qu, k, v, position}, pinned({{"scale", inv_sqrt_dk}}), p + "attn");
    } else {
      Val ac = g.op(OpKind::bmm, {qu, g.op(OpKind::permute, {k}, {{"perm", {0, 1, 3, 2}}})}, pinned({}), p + "ac");
      Val scores = g.op(OpKind::add, {g.op(OpKind::scale, {ac}, {{"scale", inv_sqrt_dk}}), position});
      att = g.op(OpKind::bmm, {g.op(OpKind::softmax, {scores}, {{"axis", -1}}), v}, pinned({}), p + "attn");
    }
  }
  return att;
}

// CTC: the logits. TDT: the joint's encoder projection, as an output and in the enc_proj state.
void ParakeetBuilder::head_outputs(MethodBuilder& g, Val x) {
  if (tdt) {
    // The decode methods gather their frames from the enc_proj state by index (job j's frame t
    // at row j * enc_len + t), so frames never go back and forth between host and device.
    Val proj = linear(g, x, enc_proj, pinned({}), "joint.enc");
    g.op(OpKind::slice_update, {g.state(enc_state), g.op(OpKind::reshape, {proj}, {{"shape", {-1, J}}})}, {{"axis", 0}, {"start", 0}},
         "enc_proj_state");
    g.output(proj, "enc_proj");
  } else {
    g.output(linear(g, x, ctc, pinned({}), "ctc"), "logits");
  }
}

}  // namespace vrun::parakeet::detail
