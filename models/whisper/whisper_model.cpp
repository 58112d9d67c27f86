#include "models/whisper/whisper_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/common/batch_rows.h"
#include "runtime/graph/builder.h"

namespace vrun::whisper {

namespace {

// The matrices each decoder step multiplies by one row per token: self-attention, the
// cross-attention query and output, feed-forward, and the embedding that is also the vocabulary
// projection. (The cross-attention K/V projection runs in encode, over the whole window.)
bool decoder_step_matrix(const std::string& name) {
  const std::string suffix = "/weight";
  return name.rfind("decoder/", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         name.find("/attention/linear_1/") == std::string::npos;
}

// A linear layer's weight and bias (-1: none) and a layer norm's gamma and beta: constant ids.
struct Lin {
  int w = -1, b = -1;
  bool q_scaled = false;  // the query rows (and bias) carry the attention scale
};
struct Norm {
  int g = -1, b = -1;
};
struct EncLayer {
  Norm ln1, ln2;
  Lin qkv, out, fc1, fc2;
};
// Keys and values share one state per layer, keys in heads [0, H) and values in [H, 2H): the
// projection writes both with one slice_update.
struct DecLayer {
  Norm ln1, ln2, ln3;
  Lin qkv, out, cq, ckv, cout, fc1, fc2;
  int kv_cache, kv_cross;
  int kv_batch = -1;
  int kv_stream_cache = -1, kv_stream_cross = -1;
};
// The decoder methods: one block stack, several ways to run it.
// rows: batch rows; cache: the per-layer self-attention states (-1: none, attend within the
// input only); align: collect the alignment heads' raw cross-attention scores; one_token: seq
// is 1, not a symbol.
// streams: step_streams_B (rows = B, one token per stream at its own position) or
// prefill_stream (rows = 1, in stream `slot`).
struct DecodeVariant {
  const char* name;
  int64_t rows;
  bool batched_cache, align, one_token = false, streams = false;
};

// Builds a Whisper program from a valid config: the weights (every constant and state, in the
// order the program holds them), then encode, the decoder methods, reorder_batch and the metadata.
struct WhisperBuilder {
  WhisperBuilder(const WhisperConfig& config, const WeightSource& w, const WhisperExtras& e, const BuildSettings& s)
      : c(config), weights(w), extras(e), settings(s) {}

  Result<std::shared_ptr<Program>> build();
  // Adds a weight after checking its shape; small = convert to f32.
  int weight(const std::string& name, const std::vector<int64_t>& shape, bool small = false);
  Lin lin(const std::string& p, int64_t out, int64_t in, bool bias = true);
  Lin qkv_lin(const std::string& p);
  int conv_matrix(const std::string& name, int64_t out, int64_t in);
  Norm norm(const std::string& p, int64_t n);
  Status add_weights();
  Status collect_alignment_heads();
  // The methods; false when the builder holds an error (which finish() reports).
  // streams: encode_streams (n windows into the streams' cross K/V, no output).
  bool encode_method(MethodBuilder& g, bool streams);
  bool decode_method(MethodBuilder& g, const DecodeVariant& var);
  void reorder_batch_method(MethodBuilder& g);
  void select_stream_method(MethodBuilder& g);
  void set_metadata();

  const WhisperConfig& c;
  const WeightSource& weights;
  const WhisperExtras& extras;
  const BuildSettings& settings;
  const bool widen = settings.widen_f16_weights;
  const int64_t d = c.n_text_state, hd_a = c.n_audio_state / c.n_audio_head, hd_t = c.n_text_state / c.n_text_head;
  const int64_t frames = 2 * c.n_audio_ctx;
  // The encoder's fused q/k/v projection with the query rows multiplied by the attention scale
  // when that is a power of two (1/8 for every Whisper size: head width 64) and the weight is
  // built as f32: scaling by a power of two is exact, so the scores equal q k^T * scale bit for
  // bit and the [heads, 1500, 1500] scale pass goes away.
  const double att_scale = 1.0 / std::sqrt(static_cast<double>(hd_a));
  const std::vector<NamedAttr> to_heads = {{"perm", {0, 2, 1, 3}}};
  ProgramBuilder pb;
  Status bad;
  int conv1_w = -1, conv1_b = -1, conv2_w = -1, conv2_b = -1, enc_pos = -1, embed = -1, dec_pos = -1;
  bool conv_matmul = false;  // conv1_w/conv2_w are conv_matrix's matrices
  std::vector<EncLayer> E;
  Norm enc_ln;
  std::vector<DecLayer> D;
  Norm dec_ln;
  std::vector<std::vector<int64_t>> heads_of_layer;  // the alignment heads of each decoder layer
};

int WhisperBuilder::weight(const std::string& name, const std::vector<int64_t>& shape, bool small) {
  if (!bad.is_ok()) return -1;
  auto w = weights(name);
  if (!w) {
    bad = err(ErrorCode::kNotFound, "whisper checkpoint has no tensor '", name, "'");
    return -1;
  }
  if (w->shape != shape) {
    bad = err(ErrorCode::kInvalidProgram, "whisper tensor '", name, "' has shape ", Shape::of(w->shape).str(),
              "; the config needs ", Shape::of(shape).str());
    return -1;
  }
  if (!is_float(w->dtype) && !is_quantized(w->dtype)) {
    bad = err(ErrorCode::kUnsupported, "whisper tensor '", name, "' has dtype ", dtype_name(w->dtype));
    return -1;
  }
  const bool half = w->dtype == DType::f16 || w->dtype == DType::bf16;
  if (small || w->dtype == DType::f64 || (widen && half && !decoder_step_matrix(name))) {
    if (is_quantized(w->dtype) || w->dtype == DType::f64) {
      bad = err(ErrorCode::kUnsupported, "whisper tensor '", name, "' must be f32/f16/bf16, is ", dtype_name(w->dtype));
      return -1;
    }
    std::vector<float> f = models::weight_to_f32(*w);
    return pb.add_constant_copy(name, DType::f32, Shape::of(w->shape), f.data());
  }
  return pb.add_constant(name, w->dtype, Shape::of(shape), w->data, w->keep);
}

Lin WhisperBuilder::lin(const std::string& p, int64_t out, int64_t in, bool bias) {
  return Lin{weight(p + "/weight", {out, in}), bias ? weight(p + "/bias", {out}, true) : -1};
}

Lin WhisperBuilder::qkv_lin(const std::string& p) {
  const std::string wn = p + "/weight", bn = p + "/bias";
  auto w = bad.is_ok() ? weights(wn) : std::nullopt;
  auto b = bad.is_ok() ? weights(bn) : std::nullopt;
  int exp = 0;
  const bool pow2 = std::frexp(att_scale, &exp) == 0.5;
  const bool f32 = w && b && (w->dtype == DType::f32 || (widen && (w->dtype == DType::f16 || w->dtype == DType::bf16)));
  if (!pow2 || !f32 || w->shape != std::vector<int64_t>{3 * d, d} || b->shape != std::vector<int64_t>{3 * d} ||
      !is_float(b->dtype) || b->dtype == DType::f64)
    return lin(p, 3 * d, d);
  std::vector<float> wf = models::weight_to_f32(*w), bf = models::weight_to_f32(*b);
  const auto s = static_cast<float>(att_scale);
  for (size_t i = 0; i < static_cast<size_t>(d * d); ++i) wf[i] *= s;
  for (size_t i = 0; i < static_cast<size_t>(d); ++i) bf[i] *= s;
  return Lin{pb.add_constant_copy(wn, DType::f32, Shape::of(w->shape), wf.data()),
             pb.add_constant_copy(bn, DType::f32, Shape::of(b->shape), bf.data()), true};
}

// A convolution's weight [out, in, 3] as the matrix [out, 3 in] of its product with the input's
// three shifted rows side by side (column k in + c: tap k of channel c), in the weight's dtype;
// -1 where that is not f32/f16/bf16 (the conv1d op takes the weight then).
int WhisperBuilder::conv_matrix(const std::string& name, int64_t out, int64_t in) {
  auto w = weights(name);
  if (!w || w->shape != std::vector<int64_t>{out, in, 3} ||
      (w->dtype != DType::f32 && w->dtype != DType::f16 && w->dtype != DType::bf16))
    return -1;
  const size_t es = static_cast<size_t>(dtype_bytes(w->dtype, 1));
  std::vector<uint8_t> m(static_cast<size_t>(out * in * 3) * es);
  const auto* src = static_cast<const uint8_t*>(w->data);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t ch = 0; ch < in; ++ch)
      for (int64_t k = 0; k < 3; ++k)
        std::memcpy(&m[static_cast<size_t>((o * 3 + k) * in + ch) * es], src + static_cast<size_t>((o * in + ch) * 3 + k) * es, es);
  return pb.add_constant_copy(name, w->dtype, Shape::of({out, 3 * in}), m.data());
}

Norm WhisperBuilder::norm(const std::string& p, int64_t n) { return Norm{weight(p + "/gamma", {n}, true), weight(p + "/beta", {n}, true)}; }

Status WhisperBuilder::add_weights() {
  if (settings.fused_encoder) {
    conv1_w = conv_matrix("encoder/conv1/weight", d, c.n_mels);
    conv2_w = conv_matrix("encoder/conv2/weight", d, d);
    conv_matmul = conv1_w >= 0 && conv2_w >= 0;
  }
  if (!conv_matmul) {
    conv1_w = weight("encoder/conv1/weight", {d, c.n_mels, 3});
    conv2_w = weight("encoder/conv2/weight", {d, d, 3});
  }
  conv1_b = weight("encoder/conv1/bias", {d}, true);
  conv2_b = weight("encoder/conv2/bias", {d}, true);
  enc_pos = weight("encoder/position_encodings/encodings", {c.n_audio_ctx, d}, true);
  for (int64_t l = 0; l < c.n_audio_layer; ++l) {
    const std::string p = "encoder/layer_" + std::to_string(l);
    E.push_back({norm(p + "/self_attention/layer_norm", d), norm(p + "/ffn/layer_norm", d),
                 qkv_lin(p + "/self_attention/linear_0"), lin(p + "/self_attention/linear_1", d, d),
                 lin(p + "/ffn/linear_0", 4 * d, d), lin(p + "/ffn/linear_1", d, 4 * d)});
  }
  enc_ln = norm("encoder/layer_norm", d);
  embed = weight("decoder/embeddings/weight", {c.n_vocab, d});
  dec_pos = weight("decoder/position_encodings/encodings", {c.n_text_ctx, d}, true);
  for (int64_t l = 0; l < c.n_text_layer; ++l) {
    const std::string p = "decoder/layer_" + std::to_string(l), n = std::to_string(l);
    D.push_back({norm(p + "/self_attention/layer_norm", d), norm(p + "/attention/layer_norm", d),
                 norm(p + "/ffn/layer_norm", d), lin(p + "/self_attention/linear_0", 3 * d, d),
                 lin(p + "/self_attention/linear_1", d, d), lin(p + "/attention/linear_0", d, d),
                 lin(p + "/attention/linear_1", 2 * d, d), lin(p + "/attention/linear_2", d, d),
                 lin(p + "/ffn/linear_0", 4 * d, d), lin(p + "/ffn/linear_1", d, 4 * d),
                 pb.add_state("cache.kv." + n, DType::f32, {1, 2 * c.n_text_head, c.n_text_ctx, hd_t}),
                 pb.add_state("cross.kv." + n, DType::f32, {1, 2 * c.n_text_head, c.n_audio_ctx, hd_t})});
    if (settings.decode_batch > 1)
      D.back().kv_batch = pb.add_state("batch.kv." + n, DType::f32, {settings.decode_batch, 2 * c.n_text_head, c.n_text_ctx, hd_t});
    if (settings.streams > 1) {
      D.back().kv_stream_cache =
          pb.add_state("streams.cache.kv." + n, DType::f32, {1, 2 * c.n_text_head, settings.streams * c.n_text_ctx, hd_t});
      D.back().kv_stream_cross =
          pb.add_state("streams.cross.kv." + n, DType::f32, {settings.streams, 2 * c.n_text_head, c.n_audio_ctx, hd_t});
    }
  }
  dec_ln = norm("decoder/layer_norm", d);
  return bad;
}

bool WhisperBuilder::encode_method(MethodBuilder& g, bool streams) {
  // residual: the skip connection, added by the projection itself (no pass of its own).
  auto L = [&](Val x, Lin w, const std::string& name, Val residual = Val::none()) {
    return g.op(OpKind::linear, {x, g.constant(w.w), w.b >= 0 ? g.constant(w.b) : Val::none(), residual}, {}, name);
  };
  auto LN = [&](Val x, Norm n, const std::string& name) {
    return g.op(OpKind::layer_norm, {x, g.constant(n.g), g.constant(n.b)}, {{"eps", 1e-5}}, name);
  };
  // A projection of layer_norm(x): the linear normalises x's rows itself (its norm prologue).
  auto NLin = [&](Val x, Norm n, Lin w, const std::string& name, std::vector<NamedAttr> more = {}) {
    std::vector<NamedAttr> attrs = {{"norm", "layer"}, {"eps", 1e-5}};
    attrs.insert(attrs.end(), more.begin(), more.end());
    return g.op(OpKind::linear, {x, g.constant(w.w), w.b >= 0 ? g.constant(w.b) : Val::none(), Val::none(), g.constant(n.g), g.constant(n.b)},
                attrs, name);
  };
  const bool fused = settings.fused_encoder;
  const SymExpr n = streams ? g.symbol("n", 1, settings.streams) : SymExpr(1);
  const SymExpr first = streams ? g.symbol("first", 0, settings.streams - 1) : SymExpr(0);  // the first stream written
  Val mel = g.input("mel", DType::f32, {n, c.n_mels, frames});
  Val x;
  if (conv_matmul) {
    // Time-major [n, frames, channels]; each convolution one matrix product (gelu its epilogue)
    // over the three taps' rows side by side: the padded input's rows t s, t s + 1, t s + 2.
    auto taps = [&](Val t, int64_t rows, int64_t stride) {
      Val p = g.op(OpKind::pad, {t}, {{"pads", {0, 0, 1, 1}}});
      std::vector<Val> cols;
      for (int64_t k = 0; k < 3; ++k)
        cols.push_back(g.op(OpKind::slice, {p}, {{"axis", 1}, {"start", k}, {"end", k + (rows - 1) * stride + 1}, {"step", stride}}));
      return g.op(OpKind::concat, cols, {{"axis", -1}});
    };
    auto conv = [&](Val t, int w, int b, const std::string& name) {
      return g.op(OpKind::linear, {t, g.constant(w), g.constant(b)}, {{"act", "gelu"}}, name);
    };
    x = conv(taps(g.op(OpKind::permute, {mel}, {{"perm", {0, 2, 1}}}), frames, 1), conv1_w, conv1_b, "conv1");
    x = conv(taps(x, c.n_audio_ctx, 2), conv2_w, conv2_b, "conv2");
  } else {
    x = g.op(OpKind::conv1d, {mel, g.constant(conv1_w), g.constant(conv1_b)}, {{"padding", {1}}}, "conv1");
    x = g.op(OpKind::gelu, {x});
    x = g.op(OpKind::conv1d, {x, g.constant(conv2_w), g.constant(conv2_b)}, {{"stride", 2}, {"padding", {1}}}, "conv2");
    x = g.op(OpKind::gelu, {x});
    x = g.op(OpKind::permute, {x}, {{"perm", {0, 2, 1}}});
  }
  x = g.op(OpKind::add, {x, g.constant(enc_pos)}, {}, "enc_pos");
  auto heads = [&](Val t, int64_t h, int64_t hd) {
    return g.op(OpKind::permute, {g.op(OpKind::reshape, {t}, {{"shape", std::vector<SymExpr>{n, -1, h, hd}}})}, to_heads);
  };
  auto merge = [&](Val t) {
    return g.op(OpKind::reshape, {g.op(OpKind::permute, {t}, to_heads)}, {{"shape", std::vector<SymExpr>{n, -1, d}}});
  };
  for (int64_t l = 0; l < c.n_audio_layer; ++l) {
    const EncLayer& w = E[l];
    const std::string p = "enc." + std::to_string(l) + ".";
    // Fused: q, k and v in f16, as the attention kernel's tensor cores take them.
    std::vector<Val> qkv = g.op_n(OpKind::split, {NLin(x, w.ln1, w.qkv, p + "qkv", fused ? std::vector<NamedAttr>{{"dtype", "f16"}} : std::vector<NamedAttr>{})},
                                  {{"axis", -1}, {"sizes", {d, d, d}}});
    if (qkv.size() != 3) return false;  // the builder holds the error, which finish() reports
    // One fixed 1500 x 1500 product a head: sdpa, or two batched matmuls (scores: heads x 9 MB).
    Val q = heads(qkv[0], c.n_audio_head, hd_a), k = heads(qkv[1], c.n_audio_head, hd_a), v = heads(qkv[2], c.n_audio_head, hd_a);
    Val att;
    if (fused) att = g.op(OpKind::sdpa, {q, k, v}, {{"scale", w.qkv.q_scaled ? 1.0 : att_scale}}, p + "attn");
    else {
      Val sc = g.op(OpKind::bmm, {q, g.op(OpKind::permute, {k}, {{"perm", {0, 1, 3, 2}}})}, {}, p + "scores");
      if (!w.qkv.q_scaled) sc = g.op(OpKind::scale, {sc}, {{"scale", att_scale}});
      att = g.op(OpKind::bmm, {g.op(OpKind::softmax, {sc}), v}, {}, p + "attn");
    }
    x = g.op(OpKind::linear, {merge(att), g.constant(w.out.w), w.out.b >= 0 ? g.constant(w.out.b) : Val::none(), x}, {{"dtype", "f32"}},
             p + "attn_out");
    Val h = fused ? NLin(x, w.ln2, w.fc1, p + "fc1", {{"act", "gelu"}}) : g.op(OpKind::gelu, {NLin(x, w.ln2, w.fc1, p + "fc1")});
    x = L(h, w.fc2, p + "fc2", x);
  }
  Val enc = LN(x, enc_ln, "enc_ln");
  for (int64_t l = 0; l < c.n_text_layer; ++l) {
    const DecLayer& w = D[l];
    const std::string p = "dec." + std::to_string(l) + ".";
    // [k | v] rows as 2H heads: the keys' heads, then the values'.
    Val kv = heads(L(enc, w.ckv, p + "cross_kv"), 2 * c.n_text_head, hd_t);
    if (streams)
      g.op(OpKind::slice_update, {g.state(w.kv_stream_cross), kv}, {{"axis", 0}, {"start", first}}, p + "cross_kv_store");
    else
      g.op(OpKind::slice_update, {g.state(w.kv_cross), kv}, {{"axis", 2}, {"start", 0}}, p + "cross_kv_store");
  }
  if (!streams) g.output(enc, "encoder_out");
  return true;
}

// prefill: decode for prompts (many tokens at once), cross-attention as two batched matmuls
// (GEMM kernels) instead of the streaming sdpa kernel, which takes one query row at a time.
// step: decode of one token, the runner's per-token call. With seq fixed at 1 the attention
// output's [1, H, 1, hd] -> [1, 1, d] head merge is a view; with a symbolic seq it is a copy.
bool WhisperBuilder::decode_method(MethodBuilder& g, const DecodeVariant& var) {
  // residual: the skip connection, added by the projection itself (no pass of its own). Rows of
  // several streams or beams: each projected as it would be alone (linear's decode).
  const int64_t decode = var.rows > 1 ? 1 : 0;
  auto L = [&](Val x, Lin w, const std::string& name, Val residual = Val::none()) {
    return g.op(OpKind::linear, {x, g.constant(w.w), w.b >= 0 ? g.constant(w.b) : Val::none(), residual}, {{"decode", decode}}, name);
  };
  // A projection of layer_norm(x): the linear normalises x's rows itself (its norm prologue);
  // with gelu, fc1's activation is part of it too (linear's act: no kernel of its own in a
  // decode step).
  auto NL = [&](Val x, Norm n, Val w, Val b, const std::string& name, bool gelu = false) {
    const std::vector<NamedAttr> attrs = {{"norm", "layer"}, {"eps", 1e-5}, {"decode", decode}, {"act", gelu ? "gelu" : "none"}};
    return g.op(OpKind::linear, {x, w, b, Val::none(), g.constant(n.g), g.constant(n.b)}, attrs, name);
  };
  auto NLin = [&](Val x, Norm n, Lin w, const std::string& name, bool gelu = false) {
    return NL(x, n, g.constant(w.w), w.b >= 0 ? g.constant(w.b) : Val::none(), name, gelu);
  };
  const int64_t B = var.rows;
  // align sees the start-of-transcript sequence, <|notimestamps|>, at most half the context
  // of text and the end token: its arena (logits of every position) is sized for that.
  const SymExpr seq = var.one_token ? SymExpr(1)
                                    : g.symbol("seq", 1, var.align ? std::min(c.n_text_ctx, c.n_text_ctx / 2 + 8) : c.n_text_ctx);
  const bool stream_step = var.streams && var.one_token;
  const SymExpr pos = var.align || stream_step ? SymExpr(0) : g.symbol("pos", 0, c.n_text_ctx - 1);
  const SymExpr slot = var.streams && !stream_step ? g.symbol("slot", 0, settings.streams - 1) : SymExpr(0);
  Val tokens = g.input("tokens", DType::i32, {B, seq});
  auto heads = [&](Val t) {
    return g.op(OpKind::permute, {g.op(OpKind::reshape, {t}, {{"shape", {B, -1, c.n_text_head, hd_t}}})}, to_heads);
  };
  auto merge = [&](Val t) {
    return g.op(OpKind::reshape, {g.op(OpKind::permute, {t}, to_heads)}, {{"shape", {B, -1, d}}});
  };
  auto heads2 = [&](Val t) {  // [k | v] rows as 2H heads
    return g.op(OpKind::permute, {g.op(OpKind::reshape, {t}, {{"shape", {B, -1, 2 * c.n_text_head, hd_t}}})}, to_heads);
  };
  auto key_heads = [&](Val kv) { return g.op(OpKind::slice, {kv}, {{"axis", 1}, {"start", 0}, {"end", c.n_text_head}}); };
  auto value_heads = [&](Val kv) {
    return g.op(OpKind::slice, {kv}, {{"axis", 1}, {"start", c.n_text_head}, {"end", 2 * c.n_text_head}});
  };
  Val x = g.op(OpKind::embedding, {g.constant(embed), tokens}, {}, "tok_embed");
  // Position rows are looked up by index: a slice [pos, pos + seq) of the table would make the
  // builder's shape samples disagree at the symbols' bounds.
  Val positions = g.input("positions", DType::i32, {stream_step ? SymExpr(B) : SymExpr(1), seq});
  // step_streams: row b's row of the streams' cache (b * n_text_ctx + positions[b]), and its
  // position as attention reads it.
  const Val cache_rows = stream_step ? g.input("cache_rows", DType::i32, {B}) : Val::none();
  const Val row_pos = stream_step ? g.op(OpKind::reshape, {positions}, {{"shape", {B}}}) : Val::none();
  const int64_t ctx = c.n_text_ctx;
  x = g.op(OpKind::add, {x, g.op(OpKind::embedding, {g.constant(dec_pos), positions}, {}, "pos_embed")}, {}, "dec_pos");
  std::vector<Val> scores;
  for (int64_t l = 0; l < c.n_text_layer; ++l) {
    const DecLayer& w = D[l];
    const std::string p = "dec." + std::to_string(l) + ".";
    std::vector<Val> qkv = g.op_n(OpKind::split, {NLin(x, w.ln1, w.qkv, p + "qkv")}, {{"axis", -1}, {"sizes", {d, 2 * d}}});
    if (qkv.size() != 2) return false;
    Val att;
    if (stream_step) {
      // Every stream at once, each at its own position: the cache write takes a row of the
      // streams' cache per row, attention a position per batch entry over the first B streams'
      // rows seen as [B, H, n_text_ctx, hd] (each row's keys cut at its position).
      Val rows_kv = g.op(OpKind::permute, {g.op(OpKind::reshape, {qkv[1]}, {{"shape", {1, B, 2 * c.n_text_head, hd_t}}})}, to_heads);
      Val st = g.op(OpKind::slice_update, {g.state(w.kv_stream_cache), rows_kv, cache_rows}, {{"axis", 2}, {"start", 0}},
                    p + "cache_kv");
      auto streams_of = [&](int64_t first_head) {
        Val h = g.op(OpKind::slice, {st}, {{"axis", 1}, {"start", first_head}, {"end", first_head + c.n_text_head}});
        h = g.op(OpKind::slice, {h}, {{"axis", 2}, {"start", 0}, {"end", B * ctx}});
        h = g.op(OpKind::reshape, {h}, {{"shape", {c.n_text_head, B, ctx, hd_t}}});
        return g.op(OpKind::permute, {h}, {{"perm", {1, 0, 2, 3}}});
      };
      att = g.op(OpKind::sdpa, {heads(qkv[0]), streams_of(0), streams_of(c.n_text_head), Val::none(), row_pos}, {{"causal", 1}},
                 p + "attn");
    } else {
      Val kv = heads2(qkv[1]);
      if (var.streams) {  // prefill_stream: the rows of stream `slot`
        kv = g.op(OpKind::slice_update, {g.state(w.kv_stream_cache), kv}, {{"axis", 2}, {"start", slot * ctx + pos}}, p + "cache_kv");
        kv = g.op(OpKind::slice, {kv}, {{"axis", 2}, {"start", slot * ctx}, {"end", slot * ctx + pos + seq}});
      } else if (!var.align) {
        const int st = var.batched_cache ? w.kv_batch : w.kv_cache;
        kv = g.op(OpKind::slice_update, {g.state(st), kv}, {{"axis", 2}, {"start", pos}}, p + "cache_kv");
        kv = g.op(OpKind::slice, {kv}, {{"axis", 2}, {"start", 0}, {"end", pos + seq}});
      }
      att = g.op(OpKind::sdpa, {heads(qkv[0]), key_heads(kv), value_heads(kv)}, {{"causal", 1}}, p + "attn");
    }
    x = L(merge(att), w.out, p + "attn_out", x);
    Val cq = NLin(x, w.ln2, w.cq, p + "cross_q");
    // The window's K/V: the one window's, or each stream's own.
    Val ckv = !var.streams ? g.state(w.kv_cross)
                           : g.op(OpKind::slice, {g.state(w.kv_stream_cross)},
                                  {{"axis", 0}, {"start", stream_step ? SymExpr(0) : slot}, {"end", stream_step ? SymExpr(B) : slot + 1}});
    Val ck = key_heads(ckv), cv = value_heads(ckv);
    Val cross;
    const auto& ah = heads_of_layer[static_cast<size_t>(l)];
    const bool prefill = std::string(var.name).rfind("prefill", 0) == 0;
    // Prefill and the alignment scores: scores as GEMMs, over [B, H, seq, hd] queries.
    const bool gemm_scores = prefill || (var.align && !ah.empty());
    Val q;
    if (gemm_scores) {
      q = heads(cq);
      if (B > 1 && !var.streams) {  // one encoder window serves every row: a broadcast view, no copy
        ck = g.op(OpKind::expand, {ck}, {{"shape", {B, -1, -1, -1}}});
        cv = g.op(OpKind::expand, {cv}, {{"shape", {B, -1, -1, -1}}});
      }
    }
    if (prefill) {
      Val sc = g.op(OpKind::bmm, {q, g.op(OpKind::permute, {ck}, {{"perm", {0, 1, 3, 2}}})}, {}, p + "cross_scores");
      sc = g.op(OpKind::softmax, {g.op(OpKind::scale, {sc}, {{"scale", 1.0 / std::sqrt(static_cast<double>(hd_t))}})});
      cross = g.op(OpKind::bmm, {sc, cv}, {}, p + "cross");
    } else if (var.align && !ah.empty()) {
      // Explicit softmax(q k^T / sqrt(d)) v so the alignment heads' scores can be returned.
      Val sc = g.op(OpKind::bmm, {q, g.op(OpKind::permute, {ck}, {{"perm", {0, 1, 3, 2}}})}, {}, p + "cross_scores");
      sc = g.op(OpKind::scale, {sc}, {{"scale", 1.0 / std::sqrt(static_cast<double>(hd_t))}});
      for (int64_t head : ah) scores.push_back(g.op(OpKind::slice, {sc}, {{"axis", 1}, {"start", head}, {"end", head + 1}}));
      cross = g.op(OpKind::bmm, {g.op(OpKind::softmax, {sc}), cv}, {}, p + "cross");
    } else {
      // Every query row on its own (cross-attention has no mask): rows are the batch of a
      // [rows, H, 1, hd] query, so that the result is [B, seq, d] as it stands, where the
      // [B, H, seq, hd] layout would take a copy to merge the heads. The window's K/V serve
      // every row through a broadcast view.
      const SymExpr rows = seq * B;
      q = g.op(OpKind::reshape, {cq}, {{"shape", {-1, c.n_text_head, 1, hd_t}}});
      if (!stream_step) {  // streams: a window per row already
        ck = g.op(OpKind::expand, {ck}, {{"shape", std::vector<SymExpr>{rows, -1, -1, -1}}});
        cv = g.op(OpKind::expand, {cv}, {{"shape", std::vector<SymExpr>{rows, -1, -1, -1}}});
      }
      cross = g.op(OpKind::sdpa, {q, ck, cv}, {}, p + "cross");
      cross = g.op(OpKind::reshape, {cross}, {{"shape", {B, -1, d}}});
    }
    if (gemm_scores) cross = merge(cross);
    x = L(cross, w.cout, p + "cross_out", x);
    x = L(NLin(x, w.ln3, w.fc1, p + "fc1", true), w.fc2, p + "fc2", x);
  }
  // align: logits of every position (token probabilities); decoding: of the last one only.
  if (!var.align) x = g.op(OpKind::slice, {x}, {{"axis", 1}, {"start", seq - 1}, {"end", seq}});
  g.output(NL(x, dec_ln, g.constant(embed), Val::none(), "logits"), "logits");
  if (var.align && !scores.empty())
    g.output(scores.size() == 1 ? scores[0] : g.op(OpKind::concat, scores, {{"axis", 1}}), "alignment_scores");
  return true;
}

Status WhisperBuilder::collect_alignment_heads() {
  heads_of_layer.assign(static_cast<size_t>(c.n_text_layer), {});
  for (size_t i = 0; i + 1 < extras.alignment_heads.size(); i += 2) {
    const int64_t l = extras.alignment_heads[i], h = extras.alignment_heads[i + 1];
    if (l < 0 || l >= c.n_text_layer || h < 0 || h >= c.n_text_head)
      return err(ErrorCode::kInvalidProgram, "whisper alignment head (", l, ", ", h, ") outside ", c.n_text_layer, " layers x ",
                 c.n_text_head, " heads");
    heads_of_layer[static_cast<size_t>(l)].push_back(h);
  }
  return Status::ok();
}

// reorder_batch(rows [B]): batch cache row r takes the first `len` positions of row rows[r]
// (beam search keeping the hypotheses it selected).
void WhisperBuilder::reorder_batch_method(MethodBuilder& g) {
  const int64_t B = settings.decode_batch;
  const SymExpr len = g.symbol("len", 1, c.n_text_ctx);
  Val rows = g.input("rows", DType::i32, {B});
  for (int64_t l = 0; l < c.n_text_layer; ++l) {
    const int s = D[l].kv_batch;
    Val filled = g.op(OpKind::copy, {g.op(OpKind::slice, {g.state(s)}, {{"axis", 2}, {"start", 0}, {"end", len}})});
    Val flat = g.op(OpKind::reshape, {filled}, {{"shape", {B, -1}}});
    Val picked = g.op(OpKind::embedding, {flat, rows});
    picked = g.op(OpKind::reshape, {picked}, {{"shape", {B, 2 * c.n_text_head, -1, hd_t}}});
    g.op(OpKind::slice_update, {g.state(s), picked}, {{"axis", 2}, {"start", 0}}, "reorder." + std::to_string(l));
  }
}

// select_stream(slot): stream slot's cross K/V become the one window's (cross.kv.N).
void WhisperBuilder::select_stream_method(MethodBuilder& g) {
  const SymExpr slot = g.symbol("slot", 0, settings.streams - 1);
  for (int64_t l = 0; l < c.n_text_layer; ++l) {
    Val row = g.op(OpKind::slice, {g.state(D[l].kv_stream_cross)}, {{"axis", 0}, {"start", slot}, {"end", slot + 1}});
    g.op(OpKind::slice_update, {g.state(D[l].kv_cross), row}, {{"axis", 0}, {"start", 0}}, "select." + std::to_string(l));
  }
}

void WhisperBuilder::set_metadata() {
  pb.set_meta("general.architecture", MetaValue::str("whisper"));
  pb.set_meta("vrun.runner", MetaValue::str("whisper"));
  const std::pair<const char*, int64_t> ints[] = {
      {"whisper.n_mels", c.n_mels},           {"whisper.n_audio_ctx", c.n_audio_ctx},
      {"whisper.n_audio_state", c.n_audio_state}, {"whisper.n_audio_head", c.n_audio_head},
      {"whisper.n_audio_layer", c.n_audio_layer}, {"whisper.n_vocab", c.n_vocab},
      {"whisper.n_text_ctx", c.n_text_ctx},   {"whisper.n_text_state", c.n_text_state},
      {"whisper.n_text_head", c.n_text_head}, {"whisper.n_text_layer", c.n_text_layer}};
  for (const auto& [k, v] : ints) pb.set_meta(k, MetaValue::integer(v));
  pb.set_meta("whisper.decode_batch", MetaValue::integer(std::max<int64_t>(1, settings.decode_batch)));
  if (settings.streams > 1) {
    pb.set_meta("whisper.streams", MetaValue::integer(settings.streams));
    pb.set_meta("whisper.stream_rows", MetaValue::int_list(models::batch_rows_for(settings.streams)));
  }
  pb.set_meta("whisper.suppress_tokens", MetaValue::int_list(extras.suppress_tokens));
  pb.set_meta("whisper.suppress_begin", MetaValue::int_list(extras.suppress_begin));
  pb.set_meta("whisper.alignment_heads", MetaValue::int_list(extras.alignment_heads));
  if (!extras.tokenizer_json.empty()) {
    pb.set_meta("tokenizer.kind", MetaValue::str("hf_json"));
    pb.set_meta("tokenizer.json", MetaValue::bytes(extras.tokenizer_json));
  }
}

Result<std::shared_ptr<Program>> WhisperBuilder::build() {
  VRUN_RETURN_IF_ERROR(add_weights());
  {
    MethodBuilder g = pb.method("encode");
    if (!encode_method(g, false)) return pb.finish();
  }
  if (settings.streams > 1) {
    MethodBuilder g = pb.method("encode_streams");
    if (!encode_method(g, true)) return pb.finish();
  }
  std::vector<DecodeVariant> variants = {{"decode", 1, false, false},
                                         {"align", 1, false, true},
                                         {"prefill", 1, false, false},
                                         {"step", 1, false, false, true}};
  if (settings.decode_batch > 1) variants.push_back({"decode_batch", settings.decode_batch, true, false});
  // step_streams_B: the variants keep char pointers into step_names, filled before they are taken.
  const std::vector<int64_t> step_rows = settings.streams > 1 ? models::batch_rows_for(settings.streams) : std::vector<int64_t>{};
  std::vector<std::string> step_names;
  for (int64_t b : step_rows) step_names.push_back("step_streams_" + std::to_string(b));
  if (settings.streams > 1) variants.push_back({"prefill_stream", 1, false, false, false, true});
  for (size_t i = 0; i < step_rows.size(); ++i) variants.push_back({step_names[i].c_str(), step_rows[i], false, false, true, true});
  VRUN_RETURN_IF_ERROR(collect_alignment_heads());
  for (const DecodeVariant& var : variants) {
    MethodBuilder g = pb.method(var.name);
    if (!decode_method(g, var)) return pb.finish();
  }
  if (settings.decode_batch > 1) {
    MethodBuilder g = pb.method("reorder_batch");
    reorder_batch_method(g);
  }
  if (settings.streams > 1) {
    MethodBuilder g = pb.method("select_stream");
    select_stream_method(g);
  }
  set_metadata();
  return pb.finish();
}

}  // namespace


Status WhisperConfig::validate() const {
  for (int64_t v : {n_mels, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_vocab, n_text_ctx, n_text_state,
                    n_text_head, n_text_layer})
    if (v <= 0)
      return err(ErrorCode::kInvalidArgument, "whisper config: sizes must be positive (mels ", n_mels, ", audio ctx ",
                 n_audio_ctx, ", audio state ", n_audio_state, ", audio heads ", n_audio_head, ", audio layers ",
                 n_audio_layer, ", vocab ", n_vocab, ", text ctx ", n_text_ctx, ", text state ", n_text_state,
                 ", text heads ", n_text_head, ", text layers ", n_text_layer, ")");
  if (n_audio_state % n_audio_head || n_text_state % n_text_head)
    return err(ErrorCode::kInvalidArgument, "whisper config: state ", n_audio_state, "/", n_text_state,
               " does not divide into ", n_audio_head, "/", n_text_head, " heads");
  if (n_audio_state != n_text_state)
    return err(ErrorCode::kInvalidArgument, "whisper config: encoder width ", n_audio_state, " differs from decoder width ", n_text_state);
  return Status::ok();
}

Result<std::shared_ptr<Program>> build_whisper_program(const WhisperConfig& c, const WeightSource& weights,
                                                       const WhisperExtras& extras, const BuildSettings& settings) {
  VRUN_RETURN_IF_ERROR(c.validate());
  WhisperBuilder b(c, weights, extras, settings);
  return b.build();
}

Result<WhisperConfig> config_from_program(const Program& p) {
  WhisperConfig c;
  const std::pair<const char*, int64_t*> ints[] = {
      {"whisper.n_mels", &c.n_mels},           {"whisper.n_audio_ctx", &c.n_audio_ctx},
      {"whisper.n_audio_state", &c.n_audio_state}, {"whisper.n_audio_head", &c.n_audio_head},
      {"whisper.n_audio_layer", &c.n_audio_layer}, {"whisper.n_vocab", &c.n_vocab},
      {"whisper.n_text_ctx", &c.n_text_ctx},   {"whisper.n_text_state", &c.n_text_state},
      {"whisper.n_text_head", &c.n_text_head}, {"whisper.n_text_layer", &c.n_text_layer}};
  for (const auto& [k, out] : ints) {
    const MetaValue* v = p.meta(k);
    if (!v || v->type != MetaType::kInt) return err(ErrorCode::kInvalidProgram, p.source, ": metadata ", k, " is missing");
    *out = v->i;
  }
  VRUN_RETURN_IF_ERROR(c.validate());
  return c;
}

WhisperExtras extras_from_program(const Program& p) {
  WhisperExtras e;
  auto ints = [&](const char* key) {
    const MetaValue* v = p.meta(key);
    return v && v->type == MetaType::kInts ? v->ints : std::vector<int64_t>{};
  };
  e.suppress_tokens = ints("whisper.suppress_tokens");
  e.suppress_begin = ints("whisper.suppress_begin");
  e.alignment_heads = ints("whisper.alignment_heads");
  return e;
}

}  // namespace vrun::whisper
