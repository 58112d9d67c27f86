#include "tests/runtime/tiny_transformer.h"

#include <cmath>
#include <random>

#include "runtime/graph/builder.h"

namespace vrun::test {

TinyWeights make_tiny_weights(const TinyConfig& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  auto rnd = [&](size_t count, float scale) {
    std::vector<float> v(count);
    for (auto& x : v) x = n(rng) * scale;
    return v;
  };
  auto norm = [&](size_t count) {
    std::vector<float> v(count);
    for (auto& x : v) x = 1.f + 0.1f * n(rng);
    return v;
  };
  TinyWeights w;
  w.cfg = c;
  const int hd = c.head_dim();
  const float s = 1.f / std::sqrt(static_cast<float>(c.dim));
  w.embed = rnd(static_cast<size_t>(c.vocab) * c.dim, 1.f);
  w.final_norm = norm(c.dim);
  w.out = rnd(static_cast<size_t>(c.vocab) * c.dim, s);
  for (int l = 0; l < c.layers; ++l) {
    TinyLayer L;
    L.attn_norm = norm(c.dim);
    L.wq = rnd(static_cast<size_t>(c.dim) * c.dim, s);
    L.wk = rnd(static_cast<size_t>(c.kv_heads) * hd * c.dim, s);
    L.wv = rnd(static_cast<size_t>(c.kv_heads) * hd * c.dim, s);
    L.wo = rnd(static_cast<size_t>(c.dim) * c.dim, s);
    L.ffn_norm = norm(c.dim);
    L.wg = rnd(static_cast<size_t>(c.ffn) * c.dim, s);
    L.wu = rnd(static_cast<size_t>(c.ffn) * c.dim, s);
    L.wd = rnd(static_cast<size_t>(c.dim) * c.ffn, 1.f / std::sqrt(static_cast<float>(c.ffn)));
    w.layers.push_back(std::move(L));
  }
  return w;
}

Result<std::shared_ptr<Program>> build_tiny_transformer(const TinyWeights& w) {
  const TinyConfig& c = w.cfg;
  const int hd = c.head_dim();
  ProgramBuilder pb;
  auto cst = [&](const std::string& name, const std::vector<float>& v, const Shape& shape) {
    return pb.add_constant_copy(name, DType::f32, shape, v.data());
  };
  std::vector<float> inv_freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(c.rope_theta, -2.0 * i / hd));
  const int c_embed = cst("embed", w.embed, {c.vocab, c.dim});
  const int c_final = cst("final_norm", w.final_norm, {c.dim});
  const int c_out = cst("output", w.out, {c.vocab, c.dim});
  const int c_freq = cst("rope.inv_freq", inv_freq, {hd / 2});
  std::vector<int> k_cache, v_cache;
  for (int l = 0; l < c.layers; ++l) {
    k_cache.push_back(pb.add_state("cache.k." + std::to_string(l), DType::f32, {1, c.kv_heads, c.ctx, hd}));
    v_cache.push_back(pb.add_state("cache.v." + std::to_string(l), DType::f32, {1, c.kv_heads, c.ctx, hd}));
  }
  pb.set_meta("general.architecture", MetaValue::str("tiny-llama"));
  pb.set_meta("llama.context_length", MetaValue::integer(c.ctx));

  MethodBuilder g = pb.method("forward");
  const SymExpr seq = g.symbol("seq", 1, c.max_seq);
  const SymExpr pos = g.symbol("pos", 0, c.ctx - 1);
  Val tokens = g.input("tokens", DType::i32, {1, seq});
  Val freq = g.constant(c_freq);
  Val x = g.op(OpKind::embedding, {g.constant(c_embed), tokens}, {}, "embed");
  for (int l = 0; l < c.layers; ++l) {
    const TinyLayer& L = w.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    auto lin = [&](Val in, const std::vector<float>& wt, int out_dim, int in_dim, const std::string& name) {
      return g.op(OpKind::linear, {in, g.constant(cst(p + name, wt, {out_dim, in_dim}))}, {}, p + name);
    };
    Val h = g.op(OpKind::rms_norm, {x, g.constant(cst(p + "attn_norm", L.attn_norm, {c.dim}))}, {{"eps", c.eps}});
    Val q = g.op(OpKind::reshape, {lin(h, L.wq, c.dim, c.dim, "wq")}, {{"shape", {1, -1, c.heads, hd}}});
    Val k = g.op(OpKind::reshape, {lin(h, L.wk, c.kv_heads * hd, c.dim, "wk")}, {{"shape", {1, -1, c.kv_heads, hd}}});
    Val v = g.op(OpKind::reshape, {lin(h, L.wv, c.kv_heads * hd, c.dim, "wv")}, {{"shape", {1, -1, c.kv_heads, hd}}});
    q = g.op(OpKind::rope, {q, freq}, {{"pos", pos}, {"mode", "half"}});
    k = g.op(OpKind::rope, {k, freq}, {{"pos", pos}, {"mode", "half"}});
    const std::vector<NamedAttr> to_heads = {{"perm", {0, 2, 1, 3}}};
    q = g.op(OpKind::permute, {q}, to_heads);
    Val kc = g.op(OpKind::slice_update, {g.state(k_cache[l]), g.op(OpKind::permute, {k}, to_heads)},
                  {{"axis", 2}, {"start", pos}});
    Val vc = g.op(OpKind::slice_update, {g.state(v_cache[l]), g.op(OpKind::permute, {v}, to_heads)},
                  {{"axis", 2}, {"start", pos}});
    Val kv = g.op(OpKind::slice, {kc}, {{"axis", 2}, {"start", 0}, {"end", pos + seq}});
    Val vv = g.op(OpKind::slice, {vc}, {{"axis", 2}, {"start", 0}, {"end", pos + seq}});
    Val att = g.op(OpKind::sdpa, {q, kv, vv}, {{"causal", 1}}, p + "attn");
    att = g.op(OpKind::reshape, {g.op(OpKind::permute, {att}, to_heads)}, {{"shape", {1, -1, c.dim}}});
    x = g.op(OpKind::add, {x, lin(att, L.wo, c.dim, c.dim, "wo")});
    Val h2 = g.op(OpKind::rms_norm, {x, g.constant(cst(p + "ffn_norm", L.ffn_norm, {c.dim}))}, {{"eps", c.eps}});
    Val gate = g.op(OpKind::silu, {lin(h2, L.wg, c.ffn, c.dim, "wg")});
    Val up = lin(h2, L.wu, c.ffn, c.dim, "wu");
    x = g.op(OpKind::add, {x, lin(g.op(OpKind::mul, {gate, up}), L.wd, c.dim, c.ffn, "wd")});
  }
  Val last = g.op(OpKind::slice, {x}, {{"axis", 1}, {"start", seq - 1}, {"end", seq}});
  last = g.op(OpKind::rms_norm, {last, g.constant(c_final)}, {{"eps", c.eps}});
  g.output(g.op(OpKind::linear, {last, g.constant(c_out)}, {}, "output"), "logits");
  return pb.finish();
}

}  // namespace vrun::test
