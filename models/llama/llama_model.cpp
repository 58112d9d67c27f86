#include "models/llama/llama_model.h"

#include <cmath>

#include "models/common/weight.h"
#include "models/llama/llama_batch.h"
#include "runtime/graph/builder.h"

namespace vrun::llama {

Status LlamaConfig::validate() const {
  if (vocab <= 0 || dim <= 0 || layers <= 0 || heads <= 0 || kv_heads <= 0 || ffn <= 0 || head_dim <= 0)
    return err(ErrorCode::kInvalidArgument, "llama config: sizes must be positive (vocab ", vocab, ", dim ", dim,
               ", layers ", layers, ", heads ", heads, ", kv_heads ", kv_heads, ", ffn ", ffn, ", head_dim ", head_dim, ")");
  if (heads % kv_heads) return err(ErrorCode::kInvalidArgument, "llama config: ", heads, " heads do not divide into ", kv_heads, " kv heads");
  if (head_dim % 2) return err(ErrorCode::kInvalidArgument, "llama config: head dim ", head_dim, " is odd");
  if (!rope_freq_factors.empty() && static_cast<int64_t>(rope_freq_factors.size()) != head_dim / 2)
    return err(ErrorCode::kInvalidArgument, "llama config: ", rope_freq_factors.size(), " rope frequency factors for head dim ", head_dim);
  return Status::ok();
}

namespace {

const char* rope_mode_name(RopeMode m) { return m == RopeMode::kHalf ? "half" : "interleaved"; }

struct LayerW {
  int attn_norm, q, k, v, o, qb, kb, vb, ffn_norm, gate, up, down;
  int qkv = -1, qkv_b = -1, gate_up = -1;
};

// Builds one Llama program: the constants and caches first (add_weights), then each method.
class LlamaBuilder {
 public:
  LlamaBuilder(const LlamaConfig& c, const WeightSource& weights, int64_t ctx, int64_t chunk)
      : c_(c), weights_(weights), ctx_(ctx), chunk_(chunk), hd_(c.head_dim) {}

  Status add_weights(const BuildSettings& settings);
  void add_method(const std::string& method);
  void set_meta(const std::map<std::string, MetaValue>& extra);
  // The batched decoding methods (models/llama/llama_batch.h), when settings ask for slots.
  Status add_batch_methods(const BuildSettings& settings) {
    return add_llama_batch_methods(pb_, c_, settings,
                                   {embed_, out_norm_, out_w_, freq_, chunk_, cache_dtype_, batch_layer_ids(layers_)});
  }
  Result<std::shared_ptr<Program>> finish() { return pb_.finish(); }

 private:
  int weight(const std::string& name, bool required);
  int stacked(const std::string& name, std::initializer_list<std::string> parts);
  int stacked_bias(const std::string& name, std::initializer_list<std::pair<std::string, int64_t>> parts);
  LayerW add_layer_weights(int64_t l);
  // Where a method's tokens sit: seq and pos (symbols), the device position at (decode) and the
  // rope frequencies.
  struct Positions {
    SymExpr seq, pos;
    Val at, inv;
    bool device_pos;
  };
  Val opt(MethodBuilder& g, int id);
  Val linear(MethodBuilder& g, Val x, int w, int b, const std::string& name, Val residual = Val::none(),
             std::vector<NamedAttr> attrs = {});
  Val normed(MethodBuilder& g, Val x, int norm, int w, int b, const std::string& name);
  std::pair<Val, Val> project_qkv(MethodBuilder& g, Val x, const LayerW& w, const std::string& p);
  Val attention(MethodBuilder& g, Val x, int64_t l, const Positions& at_pos);
  Val decode_layer(MethodBuilder& g, Val x, int64_t l, const Positions& at_pos);
  Val feed_forward(MethodBuilder& g, Val x, int64_t l);

  const LlamaConfig& c_;
  const WeightSource& weights_;
  const int64_t ctx_, chunk_, hd_;
  ProgramBuilder pb_;
  Status missing_;
  int embed_ = -1, out_norm_ = -1, out_w_ = -1, freq_ = -1;
  DType cache_dtype_ = DType::f16;
  std::vector<LayerW> layers_;
  // One cache per layer, keys in heads [0, kv_heads) and values in [kv_heads, 2 kv_heads): a step
  // writes both with one slice_update.
  std::vector<int> kv_cache_;
};

int LlamaBuilder::weight(const std::string& name, bool required) {
  auto w = weights_(name);
  if (!w) {
    if (required && missing_.is_ok()) missing_ = err(ErrorCode::kNotFound, "checkpoint has no tensor '", name, "'");
    return -1;
  }
  return pb_.add_constant(name, w->dtype, w->shape, w->data, w->keep);
}

// Projections that read the same input (q/k/v; gate/up) become one matrix with their rows
// stacked, so a decode step runs one matvec where it ran three or two: the GPU pays a launch and
// a barrier per kernel. -1 when they cannot be stacked (a part missing, or parts of different
// types or widths, as some GGUF quantisation mixes have).
int LlamaBuilder::stacked(const std::string& name, std::initializer_list<std::string> parts) {
  std::vector<Weight> ws;
  for (const auto& part : parts) {
    auto w = weights_(part);
    if (!w || w->shape.rank != 2 || (!ws.empty() && (w->dtype != ws[0].dtype || w->shape[1] != ws[0].shape[1])))
      return -1;
    ws.push_back(*w);
  }
  // The parts stay where they are (a mapped checkpoint): no host copy of the stack is made
  // unless the CPU reads it, and a GPU uploads the parts straight into one matrix.
  int64_t rows = 0;
  std::vector<ConstantPiece> pieces;
  for (auto& w : ws) {
    rows += w.shape[0];
    pieces.push_back({static_cast<const uint8_t*>(w.data),
                      static_cast<uint64_t>(dtype_bytes(w.dtype, w.shape[0] * w.shape[1])), std::move(w.keep)});
  }
  return pb_.add_constant_pieces(name, ws[0].dtype, Shape{rows, ws[0].shape[1]}, std::move(pieces));
}

// Biases of stacked projections: f32, zeros for a part without one; -1 when no part has one.
int LlamaBuilder::stacked_bias(const std::string& name, std::initializer_list<std::pair<std::string, int64_t>> parts) {
  std::vector<float> b;
  bool any = false;
  for (const auto& [part, rows] : parts) {
    auto w = weights_(part);
    if (w && w->shape.rank == 1 && w->shape[0] == rows && is_float(w->dtype)) {
      const std::vector<float> f = models::weight_to_f32({w->dtype, w->shape.vec(), w->data, nullptr});
      b.insert(b.end(), f.begin(), f.end());
      any = true;
    } else {
      b.insert(b.end(), static_cast<size_t>(rows), 0.0f);
    }
  }
  return any ? pb_.add_constant_copy(name, DType::f32, Shape{static_cast<int64_t>(b.size())}, b.data()) : -1;
}

LayerW LlamaBuilder::add_layer_weights(int64_t l) {
  const int64_t nq = c_.heads * hd_, nkv = c_.kv_heads * hd_;
  const std::string p = "blk." + std::to_string(l) + ".";
  LayerW w{};
  w.attn_norm = weight(p + "attn_norm.weight", true);
  w.o = weight(p + "attn_output.weight", true);
  w.ffn_norm = weight(p + "ffn_norm.weight", true);
  w.down = weight(p + "ffn_down.weight", true);
  w.q = w.k = w.v = w.qb = w.kb = w.vb = w.gate = w.up = -1;
  w.qkv = stacked(p + "attn_qkv.weight", {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"});
  if (w.qkv >= 0) {
    w.qkv_b = stacked_bias(p + "attn_qkv.bias", {{p + "attn_q.bias", nq}, {p + "attn_k.bias", nkv}, {p + "attn_v.bias", nkv}});
  } else {
    w.q = weight(p + "attn_q.weight", true);
    w.k = weight(p + "attn_k.weight", true);
    w.v = weight(p + "attn_v.weight", true);
    w.qb = weight(p + "attn_q.bias", false);
    w.kb = weight(p + "attn_k.bias", false);
    w.vb = weight(p + "attn_v.bias", false);
  }
  // Up first, gate second: glu with act silu computes first half * silu(second half).
  w.gate_up = stacked(p + "ffn_up_gate.weight", {p + "ffn_up.weight", p + "ffn_gate.weight"});
  if (w.gate_up < 0) {
    w.gate = weight(p + "ffn_gate.weight", true);
    w.up = weight(p + "ffn_up.weight", true);
  }
  return w;
}

Status LlamaBuilder::add_weights(const BuildSettings& settings) {
  embed_ = weight("token_embd.weight", true);
  const std::optional<Weight> embed_w = weights_("token_embd.weight");
  cache_dtype_ = settings.cache_dtype.value_or(embed_w && embed_w->dtype == DType::f32 ? DType::f32 : DType::f16);
  out_norm_ = weight("output_norm.weight", true);
  out_w_ = weight("output.weight", false);
  if (out_w_ < 0) out_w_ = embed_;  // tied embeddings
  std::vector<float> inv_freq(static_cast<size_t>(hd_ / 2));
  for (int64_t i = 0; i < hd_ / 2; ++i) {
    double f = std::pow(c_.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd_));
    if (!c_.rope_freq_factors.empty()) f /= c_.rope_freq_factors[i];
    inv_freq[i] = static_cast<float>(f);
  }
  freq_ = pb_.add_constant_copy("rope.inv_freq", DType::f32, {hd_ / 2}, inv_freq.data());
  for (int64_t l = 0; l < c_.layers; ++l) {
    layers_.push_back(add_layer_weights(l));
    kv_cache_.push_back(pb_.add_state("cache.kv." + std::to_string(l), cache_dtype_, {1, 2 * c_.kv_heads, ctx_, hd_}));
  }
  return missing_;
}

Val LlamaBuilder::opt(MethodBuilder& g, int id) { return id >= 0 ? g.constant(id) : Val::none(); }

Val LlamaBuilder::linear(MethodBuilder& g, Val x, int w, int b, const std::string& name, Val residual,
                         std::vector<NamedAttr> attrs) {
  return g.op(OpKind::linear, {x, g.constant(w), opt(g, b), residual}, attrs, name);
}

// A projection of rms_norm(x, norm): the linear normalises x's rows itself (its norm prologue).
Val LlamaBuilder::normed(MethodBuilder& g, Val x, int norm, int w, int b, const std::string& name) {
  return g.op(OpKind::linear, {x, g.constant(w), opt(g, b), Val::none(), g.constant(norm)}, {{"norm", "rms"}, {"eps", c_.rms_eps}}, name);
}

// The queries [1, seq, heads, hd] and the keys beside the values [1, seq, 2 kv_heads, hd].
std::pair<Val, Val> LlamaBuilder::project_qkv(MethodBuilder& g, Val x, const LayerW& w, const std::string& p) {
  const LlamaConfig& c = c_;
  const int64_t hd = hd_;
  if (w.qkv >= 0) {
    Val qkv = g.op(OpKind::reshape, {normed(g, x, w.attn_norm, w.qkv, w.qkv_b, p + "attn_qkv")},
                   {{"shape", {1, -1, c.heads + 2 * c.kv_heads, hd}}});
    Val q = g.op(OpKind::slice, {qkv}, {{"axis", 2}, {"start", 0}, {"end", c.heads}});
    Val kv = g.op(OpKind::slice, {qkv}, {{"axis", 2}, {"start", c.heads}, {"end", c.heads + 2 * c.kv_heads}});
    return {q, kv};
  }
  Val q = g.op(OpKind::reshape, {normed(g, x, w.attn_norm, w.q, w.qb, p + "attn_q")}, {{"shape", {1, -1, c.heads, hd}}});
  Val k = g.op(OpKind::reshape, {normed(g, x, w.attn_norm, w.k, w.kb, p + "attn_k")}, {{"shape", {1, -1, c.kv_heads, hd}}});
  Val v = g.op(OpKind::reshape, {normed(g, x, w.attn_norm, w.v, w.vb, p + "attn_v")}, {{"shape", {1, -1, c.kv_heads, hd}}});
  return {q, g.op(OpKind::concat, {k, v}, {{"axis", 2}})};
}

// Attention of layer l with its cache, the residual x added by the output projection.
Val LlamaBuilder::attention(MethodBuilder& g, Val x, int64_t l, const Positions& at_pos) {
  const LlamaConfig& c = c_;
  const SymExpr& seq = at_pos.seq;
  const SymExpr& pos = at_pos.pos;
  const Val& at = at_pos.at;
  const Val& inv = at_pos.inv;
  const std::vector<NamedAttr> to_heads = {{"perm", {0, 2, 1, 3}}};
  const LayerW& w = layers_[l];
  const std::string p = "blk." + std::to_string(l) + ".";
  const std::string mode = rope_mode_name(c.rope_mode);
  const std::vector<NamedAttr> rope_attrs = {{"pos", pos}, {"mode", mode}};
  // q, k and v heads side by side: [1, seq, heads + 2 kv_heads, hd]. The queries rotate in
  // rope; the keys rotate as slice_update writes them into the cache beside the values, so
  // the two kernels wait only on the projection, not one on the other.
  auto [q, kv] = project_qkv(g, x, w, p);
  q = g.op(OpKind::rope, {q, inv, at}, rope_attrs, p + "rope_q");
  // slice_update converts to the cache's type as it writes.
  Val kvc = g.op(OpKind::slice_update, {g.state(kv_cache_[l]), g.op(OpKind::permute, {kv}, to_heads), at, inv},
                 {{"axis", 2}, {"start", pos}, {"rope_mode", mode}, {"rope_heads", c.kv_heads}},
                 p + "cache_kv");
  // The keys so far; with the position on the device, the whole cache (sdpa cuts it at pos).
  Val cached = kvc;
  if (!at_pos.device_pos) cached = g.op(OpKind::slice, {kvc}, {{"axis", 2}, {"start", 0}, {"end", pos + seq}});
  Val keys = g.op(OpKind::slice, {cached}, {{"axis", 1}, {"start", 0}, {"end", c.kv_heads}});
  Val vals = g.op(OpKind::slice, {cached}, {{"axis", 1}, {"start", c.kv_heads}, {"end", 2 * c.kv_heads}});
  Val att = g.op(OpKind::sdpa, {g.op(OpKind::permute, {q}, to_heads), keys, vals, Val::none(), at}, {{"causal", 1}},
                 p + "attn");
  // The heads' outputs [1, seq, heads, hd] feed the projection as they lie (x_dims 2): a
  // reshape of the permuted view would copy them first.
  x = linear(g, g.op(OpKind::permute, {att}, to_heads), w.o, -1, p + "attn_output", x, {{"x_dims", 2}});
  return x;
}

// Layer l of a decode step (one token, the position on the device) with a stacked gate-up
// projection: one decode_layer node (the QKV projection, the cache write, attention, the output
// projection and the feed-forward: a GPU runs it as one dispatch) where the QKV projection is
// stacked without biases; else the QKV projection, the cache write and one decode_block node.
Val LlamaBuilder::decode_layer(MethodBuilder& g, Val x, int64_t l, const Positions& at_pos) {
  const LlamaConfig& c = c_;
  const LayerW& w = layers_[l];
  const std::string p = "blk." + std::to_string(l) + ".";
  const std::string mode = rope_mode_name(c.rope_mode);
  if (w.qkv >= 0 && w.qkv_b < 0) {
    // The whole layer: its cache written in place (output 0), y the block's output.
    return g.op_n(OpKind::decode_layer,
                  {g.state(kv_cache_[l]), x, g.constant(w.attn_norm), g.constant(w.qkv), at_pos.at, at_pos.inv, g.constant(w.o),
                   g.constant(w.ffn_norm), g.constant(w.gate_up), g.constant(w.down)},
                  {{"heads", c.heads}, {"kv_heads", c.kv_heads}, {"eps", c.rms_eps}, {"rope_mode", mode}}, p + "layer")[1];
  }
  auto [q, kv] = project_qkv(g, x, w, p);
  Val kvc = g.op(OpKind::slice_update, {g.state(kv_cache_[l]), g.op(OpKind::permute, {kv}, {{"perm", {0, 2, 1, 3}}}), at_pos.at, at_pos.inv},
                 {{"axis", 2}, {"start", 0}, {"rope_mode", mode}, {"rope_heads", c.kv_heads}}, p + "cache_kv");
  return g.op(OpKind::decode_block,
              {x, q, kvc, at_pos.at, at_pos.inv, g.constant(w.o), g.constant(w.ffn_norm), g.constant(w.gate_up), g.constant(w.down)},
              {{"heads", c.heads}, {"kv_heads", c.kv_heads}, {"eps", c.rms_eps}, {"rope_mode", mode}}, p + "block");
}

// The feed-forward of layer l, the residual x added by the down projection.
Val LlamaBuilder::feed_forward(MethodBuilder& g, Val x, int64_t l) {
  const LayerW& w = layers_[l];
  const std::string p = "blk." + std::to_string(l) + ".";
  if (w.gate_up >= 0) {
    // SwiGLU in the down projection's reads of x (up * silu(gate)): no kernel of its own.
    Val up_gate = normed(g, x, w.ffn_norm, w.gate_up, -1, p + "ffn_up_gate");
    return linear(g, up_gate, w.down, -1, p + "ffn_down", x, {{"glu", "silu"}});
  }
  Val act = g.op(OpKind::mul, {g.op(OpKind::silu, {normed(g, x, w.ffn_norm, w.gate, -1, p + "ffn_gate")}), normed(g, x, w.ffn_norm, w.up, -1, p + "ffn_up")});
  return linear(g, act, w.down, -1, p + "ffn_down", x);
}

// forward: a chunk of seq tokens at cache position pos (symbols), logits of the last; score:
// the same with logits of every position; decode: one token at the position given by the i32
// input "pos", read on the device, so every decode step is the same recording (a GPU replays it
// instead of recording each step), and attention reads the cache's full capacity with the
// length cut at pos (sdpa's pos input).
void LlamaBuilder::add_method(const std::string& method) {
  const bool all_positions = method == "score";
  const bool device_pos = method == "decode";
  MethodBuilder g = pb_.method(method);
  const SymExpr seq = device_pos ? SymExpr(1) : g.symbol("seq", 1, chunk_);
  const SymExpr pos = device_pos ? SymExpr(0) : g.symbol("pos", 0, ctx_ - 1);
  Val tokens = g.input("tokens", DType::i32, {1, seq});
  const Val at = device_pos ? g.input("pos", DType::i32, {1}) : Val::none();
  Val inv = g.constant(freq_);
  Val x = g.op(OpKind::embedding, {g.constant(embed_), tokens}, {}, "token_embd");
  const Positions at_pos{seq, pos, at, inv, device_pos};
  for (int64_t l = 0; l < c_.layers; ++l)
    x = device_pos && layers_[l].gate_up >= 0 ? decode_layer(g, x, l, at_pos) : feed_forward(g, attention(g, x, l, at_pos), l);
  if (!all_positions && !device_pos) x = g.op(OpKind::slice, {x}, {{"axis", 1}, {"start", seq - 1}, {"end", seq}});
  const Val logits = normed(g, x, out_norm_, out_w_, -1, "output");
  g.output(logits, "logits");
  // The greedy token (the first largest logit), so a caller that needs only it reads one id
  // instead of the vocabulary's logits back from a device (Executor::run's fetch).
  if (!all_positions) g.output(g.op(OpKind::argmax, {logits}, {{"axis", -1}, {"nan_flag", 1}}), "next");
}

void LlamaBuilder::set_meta(const std::map<std::string, MetaValue>& extra) {
  const LlamaConfig& c = c_;
  pb_.set_meta("general.architecture", MetaValue::str(c.arch));
  pb_.set_meta("vrun.runner", MetaValue::str("llama"));
  pb_.set_meta("llama.vocab_size", MetaValue::integer(c.vocab));
  pb_.set_meta("llama.embedding_length", MetaValue::integer(c.dim));
  pb_.set_meta("llama.block_count", MetaValue::integer(c.layers));
  pb_.set_meta("llama.attention.head_count", MetaValue::integer(c.heads));
  pb_.set_meta("llama.attention.head_count_kv", MetaValue::integer(c.kv_heads));
  pb_.set_meta("llama.feed_forward_length", MetaValue::integer(c.ffn));
  pb_.set_meta("llama.head_dim", MetaValue::integer(c.head_dim));
  pb_.set_meta("llama.context_length", MetaValue::integer(c.max_context));
  pb_.set_meta("llama.rope.freq_base", MetaValue::real(c.rope_theta));
  pb_.set_meta("llama.rope.mode", MetaValue::str(rope_mode_name(c.rope_mode)));
  pb_.set_meta("llama.attention.layer_norm_rms_epsilon", MetaValue::real(c.rms_eps));
  pb_.set_meta("vrun.context", MetaValue::integer(ctx_));
  pb_.set_meta("vrun.chunk", MetaValue::integer(chunk_));
  pb_.set_meta("vrun.kv_cache_dtype", MetaValue::str(dtype_name(cache_dtype_)));
  for (const auto& [k, v] : extra) pb_.set_meta(k, v);
}

}  // namespace

Result<std::shared_ptr<Program>> build_llama_program(const LlamaConfig& c, const WeightSource& weights,
                                                     const BuildSettings& settings,
                                                     const std::map<std::string, MetaValue>& extra) {
  VRUN_RETURN_IF_ERROR(c.validate());
  const int64_t ctx = settings.context > 0 ? settings.context : c.max_context;
  const int64_t chunk = std::min(settings.chunk, ctx);
  if (ctx <= 0 || chunk <= 0) return err(ErrorCode::kInvalidArgument, "context ", ctx, " and chunk ", chunk, " must be positive");
  LlamaBuilder b(c, weights, ctx, chunk);
  VRUN_RETURN_IF_ERROR(b.add_weights(settings));
  for (const std::string method : {"forward", "score", "decode"}) b.add_method(method);
  VRUN_RETURN_IF_ERROR(b.add_batch_methods(settings));
  b.set_meta(extra);
  return b.finish();
}

bool has_greedy_output(const Program& p, const std::string& method) {
  const MethodDef* m = p.method(method);
  return m && m->outputs.size() > kGreedyOutput && m->values[m->outputs[kGreedyOutput]].name == "next";
}

Result<LlamaConfig> config_from_program(const Program& p) {
  LlamaConfig c;
  auto i = [&](const char* key, int64_t* out) -> Status {
    const MetaValue* v = p.meta(key);
    if (!v || v->type != MetaType::kInt) return err(ErrorCode::kInvalidProgram, p.source, ": metadata ", key, " is missing");
    *out = v->i;
    return Status::ok();
  };
  VRUN_RETURN_IF_ERROR(i("llama.vocab_size", &c.vocab));
  VRUN_RETURN_IF_ERROR(i("llama.embedding_length", &c.dim));
  VRUN_RETURN_IF_ERROR(i("llama.block_count", &c.layers));
  VRUN_RETURN_IF_ERROR(i("llama.attention.head_count", &c.heads));
  VRUN_RETURN_IF_ERROR(i("llama.attention.head_count_kv", &c.kv_heads));
  VRUN_RETURN_IF_ERROR(i("llama.feed_forward_length", &c.ffn));
  VRUN_RETURN_IF_ERROR(i("llama.head_dim", &c.head_dim));
  VRUN_RETURN_IF_ERROR(i("llama.context_length", &c.max_context));
  if (const MetaValue* a = p.meta("general.architecture")) c.arch = a->s;
  if (const MetaValue* t = p.meta("llama.rope.freq_base")) c.rope_theta = t->f;
  if (const MetaValue* e = p.meta("llama.attention.layer_norm_rms_epsilon")) c.rms_eps = e->f;
  if (const MetaValue* m = p.meta("llama.rope.mode")) c.rope_mode = m->s == "half" ? RopeMode::kHalf : RopeMode::kInterleaved;
  return c;
}

}  // namespace vrun::llama
