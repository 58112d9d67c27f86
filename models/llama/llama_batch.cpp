#include "models/llama/llama_batch.h"

#include <string>

namespace vrun::llama {

namespace {

const char* rope_mode_name(RopeMode m) { return m == RopeMode::kHalf ? "half" : "interleaved"; }

}  // namespace

Status add_llama_batch_methods(ProgramBuilder& pb, const LlamaConfig& c, const BuildSettings& settings,
                               const BatchModelIds& ids) {
  const int64_t slots = settings.batch_slots;
  if (slots <= 0) return Status::ok();
  const int64_t ctx = settings.batch_context > 0 ? settings.batch_context
                                                 : (settings.context > 0 ? settings.context : c.max_context);
  const int64_t chunk = std::min(ids.chunk, ctx);
  if (ctx <= 0 || chunk <= 0 || static_cast<int64_t>(ids.layers.size()) != c.layers)
    return err(ErrorCode::kInvalidArgument, "batched methods: context ", ctx, ", chunk ", chunk, " and ", ids.layers.size(),
               " layers for ", c.layers);
  if (slots > 4096) return err(ErrorCode::kInvalidArgument, "batched methods: ", slots, " slots (at most 4096)");
  const int64_t hd = c.head_dim;
  const int64_t qk_heads = c.heads + c.kv_heads, all_heads = c.heads + 2 * c.kv_heads;
  std::vector<int> cache;
  for (int64_t l = 0; l < c.layers; ++l)
    cache.push_back(pb.add_state("cache.batch.kv." + std::to_string(l), ids.cache_dtype, {1, 2 * c.kv_heads, slots * ctx, hd}));
  const std::vector<NamedAttr> to_heads = {{"perm", {0, 2, 1, 3}}};
  const std::string mode = rope_mode_name(c.rope_mode);

  // One method body: `rows` tokens; prefill (rows == 0) is one sequence of seq tokens in slot
  // `slot` at pos, decode (rows > 0) is one token per row b at positions[b] in slot b.
  auto build = [&](const std::string& name, int64_t rows) {
    MethodBuilder g = pb.method(name);
    const bool prefill = rows == 0;
    const SymExpr seq = prefill ? g.symbol("seq", 1, chunk) : SymExpr(rows);
    const SymExpr pos = prefill ? g.symbol("pos", 0, ctx - 1) : SymExpr(0);
    const SymExpr slot = prefill ? g.symbol("slot", 0, slots - 1) : SymExpr(0);
    Val tokens = g.input("tokens", DType::i32, {1, seq});
    const Val positions = prefill ? Val::none() : g.input("positions", DType::i32, {rows});
    // Row b's cache row: b * ctx + positions[b] (slot b's base plus its position).
    const Val cache_rows = prefill ? Val::none() : g.input("cache_rows", DType::i32, {rows});
    Val inv = g.constant(ids.inv_freq);
    auto opt = [&](int id) { return id >= 0 ? g.constant(id) : Val::none(); };
    // Decode rows are separate sequences: each projected as it would be alone (linear's decode).
    const int64_t decode = prefill ? 0 : 1;
    auto normed = [&](Val x, int norm, int w, int b, const std::string& n) {
      return g.op(OpKind::linear, {x, g.constant(w), opt(b), Val::none(), g.constant(norm)},
                  {{"norm", "rms"}, {"eps", c.rms_eps}, {"decode", decode}}, n);
    };
    Val x = g.op(OpKind::embedding, {g.constant(ids.embed), tokens}, {}, "token_embd");
    for (int64_t l = 0; l < c.layers; ++l) {
      const BatchLayerIds& w = ids.layers[l];
      const std::string p = "blk." + std::to_string(l) + ".";
      if (rows == 1 && w.gate_up >= 0 && w.qkv >= 0 && w.qkv_b < 0) {
        // One row, slot 0 (whose rows start the cache): the single-stream decode step's node, so
        // a GPU runs the same one-dispatch kernel as `vrun generate`. It writes slot 0's cache rows
        // in place at positions[0].
        Val slot0 = g.op(OpKind::slice, {g.state(cache[l])}, {{"axis", 2}, {"start", 0}, {"end", ctx}});
        x = g.op_n(OpKind::decode_layer,
                   {slot0, x, g.constant(w.attn_norm), g.constant(w.qkv), positions, inv, g.constant(w.o), g.constant(w.ffn_norm),
                    g.constant(w.gate_up), g.constant(w.down)},
                   {{"heads", c.heads}, {"kv_heads", c.kv_heads}, {"eps", c.rms_eps}, {"rope_mode", mode}}, p + "layer")[1];
        continue;
      }
      // q, k and v heads side by side: [1, seq, heads + 2 kv_heads, hd].
      Val qkv;
      if (w.qkv >= 0) {
        qkv = g.op(OpKind::reshape, {normed(x, w.attn_norm, w.qkv, w.qkv_b, p + "attn_qkv")}, {{"shape", {1, -1, all_heads, hd}}});
      } else {
        auto heads = [&](int wid, int bid, int64_t n, const std::string& nm) {
          return g.op(OpKind::reshape, {normed(x, w.attn_norm, wid, bid, p + nm)}, {{"shape", {1, -1, n, hd}}});
        };
        qkv = g.op(OpKind::concat, {heads(w.q, w.qb, c.heads, "attn_q"), heads(w.k, w.kb, c.kv_heads, "attn_k"),
                                    heads(w.v, w.vb, c.kv_heads, "attn_v")},
                   {{"axis", 2}});
      }
      Val state = g.state(cache[l]);
      if (rows == 1 && w.gate_up >= 0) {
        // One row, slot 0 (whose rows start the cache): the nodes of the single-stream decode
        // step, so a GPU runs the same one-dispatch decode_block kernel as `vrun generate`. The
        // keys rotate as the cache write puts them at positions[0].
        Val kv = g.op(OpKind::slice, {qkv}, {{"axis", 2}, {"start", c.heads}, {"end", all_heads}});
        state = g.op(OpKind::slice_update, {state, g.op(OpKind::permute, {kv}, to_heads), positions, inv},
                     {{"axis", 2}, {"start", 0}, {"rope_mode", mode}, {"rope_heads", c.kv_heads}}, p + "cache_kv");
        Val q = g.op(OpKind::slice, {qkv}, {{"axis", 2}, {"start", 0}, {"end", c.heads}});
        Val slot0 = g.op(OpKind::slice, {state}, {{"axis", 2}, {"start", 0}, {"end", ctx}});
        x = g.op(OpKind::decode_block,
                 {x, q, slot0, positions, inv, g.constant(w.o), g.constant(w.ffn_norm), g.constant(w.gate_up), g.constant(w.down)},
                 {{"heads", c.heads}, {"kv_heads", c.kv_heads}, {"eps", c.rms_eps}, {"rope_mode", mode}}, p + "block");
        continue;
      }
      Val att;
      if (prefill) {
        // One sequence: rotate its queries and keys at its position (the cache write cannot rotate
        // them: its offset includes the slot's base row), write keys and values into its slot,
        // attend over the slot's rows up to the chunk's end.
        Val r = g.op(OpKind::rope, {qkv, inv}, {{"pos", pos}, {"mode", mode}, {"heads", qk_heads}}, p + "rope_qk");
        Val kv = g.op(OpKind::slice, {r}, {{"axis", 2}, {"start", c.heads}, {"end", all_heads}});
        state = g.op(OpKind::slice_update, {state, g.op(OpKind::permute, {kv}, to_heads)},
                     {{"axis", 2}, {"start", slot * ctx + pos}}, p + "cache_kv");
        Val q = g.op(OpKind::permute, {g.op(OpKind::slice, {r}, {{"axis", 2}, {"start", 0}, {"end", c.heads}})}, to_heads);
        Val cached = g.op(OpKind::slice, {state}, {{"axis", 2}, {"start", slot * ctx}, {"end", slot * ctx + pos + seq}});
        Val keys = g.op(OpKind::slice, {cached}, {{"axis", 1}, {"start", 0}, {"end", c.kv_heads}});
        Val vals = g.op(OpKind::slice, {cached}, {{"axis", 1}, {"start", c.kv_heads}, {"end", 2 * c.kv_heads}});
        // [1, heads, seq, hd] -> [1, seq, heads, hd] rows as the projection reads them.
        att = g.op(OpKind::permute, {g.op(OpKind::sdpa, {q, keys, vals}, {{"causal", 1}}, p + "attn")}, to_heads);
      } else {
        // Every row at once, each at its own position: rope with a position per row, the cache
        // write with a row of the cache per row (slot b's base plus its position), attention with
        // a position per batch entry over the slots' rows seen as [rows, kv heads, ctx, hd].
        Val r = g.op(OpKind::rope, {qkv, inv, positions}, {{"mode", mode}, {"heads", qk_heads}}, p + "rope_qk");
        Val kv = g.op(OpKind::slice, {r}, {{"axis", 2}, {"start", c.heads}, {"end", all_heads}});
        state = g.op(OpKind::slice_update, {state, g.op(OpKind::permute, {kv}, to_heads), cache_rows}, {{"axis", 2}, {"start", 0}},
                     p + "cache_kv");
        Val q = g.op(OpKind::reshape, {g.op(OpKind::slice, {r}, {{"axis", 2}, {"start", 0}, {"end", c.heads}})},
                     {{"shape", {rows, 1, c.heads, hd}}});
        q = g.op(OpKind::permute, {q}, to_heads);  // [rows, heads, 1, hd]
        auto slots_of = [&](int64_t first_head) {
          Val h = g.op(OpKind::slice, {state}, {{"axis", 1}, {"start", first_head}, {"end", first_head + c.kv_heads}});
          h = g.op(OpKind::slice, {h}, {{"axis", 2}, {"start", 0}, {"end", rows * ctx}});
          h = g.op(OpKind::reshape, {h}, {{"shape", {c.kv_heads, rows, ctx, hd}}});
          return g.op(OpKind::permute, {h}, {{"perm", {1, 0, 2, 3}}});
        };
        Val y = g.op(OpKind::sdpa, {q, slots_of(0), slots_of(c.kv_heads), Val::none(), positions}, {{"causal", 1}}, p + "attn");
        // [rows, heads, 1, hd] -> [1, rows, heads, hd] rows as the projection reads them.
        att = g.op(OpKind::permute, {y}, {{"perm", {2, 0, 1, 3}}});
      }
      x = g.op(OpKind::linear, {att, g.constant(w.o), Val::none(), x}, {{"x_dims", 2}, {"decode", decode}}, p + "attn_output");
      if (w.gate_up >= 0) {
        Val up_gate = normed(x, w.ffn_norm, w.gate_up, -1, p + "ffn_up_gate");
        x = g.op(OpKind::linear, {up_gate, g.constant(w.down), Val::none(), x}, {{"glu", "silu"}, {"decode", decode}}, p + "ffn_down");
      } else {
        Val act = g.op(OpKind::mul, {g.op(OpKind::silu, {normed(x, w.ffn_norm, w.gate, -1, p + "ffn_gate")}),
                                     normed(x, w.ffn_norm, w.up, -1, p + "ffn_up")});
        x = g.op(OpKind::linear, {act, g.constant(w.down), Val::none(), x}, {{"decode", decode}}, p + "ffn_down");
      }
    }
    if (prefill) x = g.op(OpKind::slice, {x}, {{"axis", 1}, {"start", seq - 1}, {"end", seq}});
    const Val logits = normed(x, ids.out_norm, ids.out_w, -1, "output");
    g.output(logits, "logits");
    g.output(g.op(OpKind::argmax, {logits}, {{"axis", -1}, {"nan_flag", 1}}), "next");  // each row's greedy token
  };
  build("prefill_slot", 0);
  const std::vector<int64_t> rows = models::batch_rows_for(slots);
  for (int64_t b : rows) build("decode_batch_" + std::to_string(b), b);
  pb.set_meta("vrun.batch_slots", MetaValue::integer(slots));
  pb.set_meta("vrun.batch_context", MetaValue::integer(ctx));
  pb.set_meta("vrun.batch_rows", MetaValue::int_list(rows));
  return Status::ok();
}

}  // namespace vrun::llama
