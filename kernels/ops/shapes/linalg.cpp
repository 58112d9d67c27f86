// Shape functions of the linalg (linear, bmm) and attention (sdpa, rope, decode_block, decode_layer) families.
#include <initializer_list>
#include <utility>

#include "kernels/ops/shape_infer.h"

namespace vrun {

namespace {

const TensorDesc* input_at(const std::vector<const TensorDesc*>& in, size_t k) {
  return k < in.size() ? in[k] : nullptr;
}

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Inputs 0, 1, ... of op, named in that order, each stored through its pointer; the first one
// missing is the error.
Status need(const std::vector<const TensorDesc*>& in, const char* op,
            std::initializer_list<std::pair<const char*, const TensorDesc**>> inputs) {
  size_t k = 0;
  for (const auto& [name, out] : inputs) {
    *out = input_at(in, k++);
    if (!*out) return err(ErrorCode::kInvalidArgument, op, ": missing input ", name);
  }
  return Status::ok();
}

Status need_activation(const char* op, const char* name, const TensorDesc& t) {
  if (!is_activation(t.dtype))
    return err(ErrorCode::kInvalidArgument, op, ": ", name, " must be f32, f16 or bf16, got ", dtype_name(t.dtype));
  return Status::ok();
}

// The dtype attribute of linear and bmm: y's dtype, `dflt` when empty.
Status output_dtype(const char* op, const Attrs& attrs, DType dflt, DType* out) {
  *out = dflt;
  const std::string& to = attrs.s("dtype");
  if (to.empty()) return Status::ok();
  const auto t = dtype_from_name(to);
  if (!t || !is_activation(*t))
    return err(ErrorCode::kInvalidArgument, op, ": dtype must be f32, f16 or bf16 (or empty for the input's), got '", to, "'");
  *out = *t;
  return Status::ok();
}

Status infer_linear(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const TensorDesc *x, *w;
  VRUN_RETURN_IF_ERROR(need(in, "linear", {{"x", &x}, {"weight", &w}}));
  VRUN_RETURN_IF_ERROR(need_activation("linear", "x", *x));
  if (x->shape.rank < 1) return err(ErrorCode::kInvalidArgument, "linear: x must have rank >= 1, got a scalar");
  if (w->shape.rank != 2)
    return err(ErrorCode::kInvalidArgument, "linear: weight must be [N, K], got ", w->shape.str());
  if (!is_activation(w->dtype) && !is_quantized(w->dtype))
    return err(ErrorCode::kInvalidArgument, "linear: weight dtype must be f32/f16/bf16/q8_0/q4_0/q4_1, got ",
               dtype_name(w->dtype));
  const std::string& glu = attrs.s("glu");
  if (glu != "none" && glu != "silu")
    return err(ErrorCode::kInvalidArgument, "linear: glu must be none or silu, got '", glu, "'");
  const std::string& act = attrs.s("act");
  if (act != "none" && act != "gelu" && act != "silu")
    return err(ErrorCode::kInvalidArgument, "linear: act must be none, gelu or silu, got '", act, "'");
  DType ydt;
  VRUN_RETURN_IF_ERROR(output_dtype("linear", attrs, x->dtype, &ydt));
  const int64_t x_dims = attrs.i("x_dims");
  if (x_dims < 1 || x_dims > x->shape.rank)
    return err(ErrorCode::kInvalidArgument, "linear: x_dims must be in 1..", x->shape.rank, " (x's rank), got ", x_dims);
  if (glu != "none" && x_dims != 1)
    return err(ErrorCode::kInvalidArgument, "linear: glu = ", glu, " needs x_dims = 1, got x_dims = ", x_dims);
  if (glu != "none" && attrs.s("norm") != "none")
    return err(ErrorCode::kInvalidArgument, "linear: glu = ", glu, " and norm = ", attrs.s("norm"),
               " cannot be combined (glu needs norm = none)");
  // K: the trailing x_dims dims of x, halved for glu (its two halves make one x row).
  int64_t xk = 1;
  for (int64_t d = x->shape.rank - x_dims; d < x->shape.rank; ++d) xk *= x->shape[static_cast<int>(d)];
  const int64_t n = w->shape[0];
  if (glu != "none" && xk != 2 * w->shape[1])
    return err(ErrorCode::kInvalidArgument, "linear: glu = ", glu, " needs x's last dim = 2 * K = ", 2 * w->shape[1],
               " for weight ", w->shape.str(), ", got x ", x->shape.str());
  const int64_t k = glu != "none" ? xk / 2 : xk;
  if (w->shape[1] != k)
    return err(ErrorCode::kInvalidArgument, "linear: x ", x->shape.str(), " and weight ", w->shape.str(),
               " disagree on K (", k, " vs ", w->shape[1], ")", x_dims > 1 ? " with x_dims > 1" : "");
  if (is_quantized(w->dtype) && k % kQuantBlock != 0)
    return err(ErrorCode::kInvalidArgument, "linear: ", dtype_name(w->dtype), " weight needs K % 32 == 0, got K = ", k);
  if (const TensorDesc* b = input_at(in, 2)) {
    VRUN_RETURN_IF_ERROR(need_activation("linear", "bias", *b));
    if (b->shape.rank != 1 || b->shape[0] != n)
      return err(ErrorCode::kInvalidArgument, "linear: bias must be [", n, "], got ", b->shape.str());
  }
  TensorDesc y{ydt, x->shape};
  y.shape.rank = x->shape.rank - static_cast<int>(x_dims) + 1;
  for (int d = y.shape.rank; d < x->shape.rank; ++d) y.shape[d] = 0;
  y.shape[y.shape.rank - 1] = n;
  if (const TensorDesc* r = input_at(in, 3)) {
    VRUN_RETURN_IF_ERROR(need_activation("linear", "residual", *r));
    if (r->shape != y.shape)
      return err(ErrorCode::kInvalidArgument, "linear: residual must have the output's shape ", y.shape.str(), ", got ",
                 r->shape.str());
  }
  const std::string& norm = attrs.s("norm");
  if (norm != "none" && norm != "layer" && norm != "rms")
    return err(ErrorCode::kInvalidArgument, "linear: norm must be none, layer or rms, got '", norm, "'");
  for (size_t slot : {size_t{4}, size_t{5}}) {
    const TensorDesc* p = input_at(in, slot);
    if (!p) continue;
    const char* name = slot == 4 ? "norm_weight" : "norm_bias";
    if (norm == "none" || (slot == 5 && norm != "layer"))
      return err(ErrorCode::kInvalidArgument, "linear: ", name, " given with norm = ", norm);
    VRUN_RETURN_IF_ERROR(need_activation("linear", name, *p));
    if (p->shape.rank != 1 || p->shape[0] != k)
      return err(ErrorCode::kInvalidArgument, "linear: ", name, " must be [", k, "], got ", p->shape.str());
  }
  out->push_back(y);
  return Status::ok();
}

Status infer_bmm(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const TensorDesc *a, *b;
  VRUN_RETURN_IF_ERROR(need(in, "bmm", {{"a", &a}, {"b", &b}}));
  VRUN_RETURN_IF_ERROR(need_activation("bmm", "a", *a));
  VRUN_RETURN_IF_ERROR(need_activation("bmm", "b", *b));
  if (a->dtype != b->dtype)
    return err(ErrorCode::kInvalidArgument, "bmm: a and b must share a dtype, got ", dtype_name(a->dtype), " and ",
               dtype_name(b->dtype));
  if (a->shape.rank < 2 || b->shape.rank < 2)
    return err(ErrorCode::kInvalidArgument, "bmm: a and b need rank >= 2, got ", a->shape.str(), " and ",
               b->shape.str());
  const int ra = a->shape.rank, rb = b->shape.rank;
  const int64_t m = a->shape[ra - 2], k = a->shape[ra - 1], n = b->shape[rb - 1];
  if (b->shape[rb - 2] != k)
    return err(ErrorCode::kInvalidArgument, "bmm: a ", a->shape.str(), " and b ", b->shape.str(),
               " disagree on K (", k, " vs ", b->shape[rb - 2], ")");
  Shape la, lb, lead;
  la.rank = ra - 2;
  lb.rank = rb - 2;
  for (int i = 0; i < la.rank; ++i) la[i] = a->shape[i];
  for (int i = 0; i < lb.rank; ++i) lb[i] = b->shape[i];
  if (!broadcast_shapes(la, lb, &lead))
    return err(ErrorCode::kInvalidArgument, "bmm: leading dims of a ", a->shape.str(), " and b ", b->shape.str(),
               " do not broadcast");
  if (lead.rank + 2 > kMaxRank) return err(ErrorCode::kInvalidArgument, "bmm: result rank exceeds ", kMaxRank);
  const int64_t rel = attrs.i("rel_shift");
  if (rel != 0 && rel != 1) return err(ErrorCode::kInvalidArgument, "bmm: rel_shift must be 0 or 1, got ", rel);
  if (rel && n != 2 * m - 1)
    return err(ErrorCode::kInvalidArgument, "bmm: rel_shift needs b's last dim = 2M - 1 = ", 2 * m - 1, " for a ", a->shape.str(),
               ", got b ", b->shape.str());
  DType ydt;
  VRUN_RETURN_IF_ERROR(output_dtype("bmm", attrs, a->dtype, &ydt));
  TensorDesc y{ydt, lead};
  y.shape.rank = lead.rank + 2;
  y.shape[lead.rank] = m;
  y.shape[lead.rank + 1] = rel ? m : n;
  out->push_back(y);
  return Status::ok();
}

Status infer_sdpa(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const TensorDesc *q, *k, *v;
  VRUN_RETURN_IF_ERROR(need(in, "sdpa", {{"q", &q}, {"k", &k}, {"v", &v}}));
  const char* names[3] = {"q", "k", "v"};
  const TensorDesc* qkv[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    VRUN_RETURN_IF_ERROR(need_activation("sdpa", names[i], *qkv[i]));
    if (qkv[i]->shape.rank != 4)
      return err(ErrorCode::kInvalidArgument, "sdpa: ", names[i], " must be rank 4 [B, H, L, D], got ",
                 qkv[i]->shape.str());
  }
  const int64_t b = q->shape[0], hq = q->shape[1], lq = q->shape[2], d = q->shape[3];
  const int64_t hkv = k->shape[1], lk = k->shape[2];
  if (k->shape[0] != b || v->shape[0] != b)
    return err(ErrorCode::kInvalidArgument, "sdpa: batch of q ", q->shape.str(), ", k ", k->shape.str(), ", v ",
               v->shape.str(), " differ");
  if (k->shape[3] != d)
    return err(ErrorCode::kInvalidArgument, "sdpa: q ", q->shape.str(), " and k ", k->shape.str(),
               " disagree on D (", d, " vs ", k->shape[3], ")");
  if (v->shape[1] != hkv || v->shape[2] != lk)
    return err(ErrorCode::kInvalidArgument, "sdpa: k ", k->shape.str(), " and v ", v->shape.str(),
               " disagree on heads or length");
  if (hkv <= 0 || hq % hkv != 0)
    return err(ErrorCode::kInvalidArgument, "sdpa: q heads (", hq, ") must be a multiple of kv heads (", hkv, ")");
  if (attrs.i("causal") != 0 && lq > lk)
    return err(ErrorCode::kInvalidArgument, "sdpa: causal needs Lq <= Lk, got Lq = ", lq, ", Lk = ", lk);
  const std::vector<int64_t>& window = attrs.ints("window");
  if (!window.empty()) {
    if (window.size() != 2 || window[0] < 0 || window[1] < 0)
      return err(ErrorCode::kInvalidArgument, "sdpa: window must be [left, right] with both >= 0, got ", window.size(),
                 " values");
    if (input_at(in, 4))
      return err(ErrorCode::kInvalidArgument, "sdpa: a window does not combine with the cache position input");
  }
  if (const TensorDesc* m = input_at(in, 3)) {
    if (!is_activation(m->dtype) && m->dtype != DType::bool_)
      return err(ErrorCode::kInvalidArgument, "sdpa: mask must be float or bool, got ", dtype_name(m->dtype));
    const Shape target{b, hq, lq, window.empty() ? lk : window[0] + window[1] + 1};
    Shape bc;
    if (m->shape.rank > 4 || !broadcast_shapes(m->shape, target, &bc) || bc != target)
      return err(ErrorCode::kInvalidArgument, "sdpa: mask ", m->shape.str(), " does not broadcast to ", target.str());
  }
  VRUN_RETURN_IF_ERROR(check_device_positions(input_at(in, 4), "sdpa", "pos", b, "batch entry"));
  out->push_back({q->dtype, Shape{b, hq, lq, v->shape[3]}});
  return Status::ok();
}

Status infer_rope(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const TensorDesc *x, *f;
  VRUN_RETURN_IF_ERROR(need(in, "rope", {{"x", &x}, {"inv_freq", &f}}));
  VRUN_RETURN_IF_ERROR(need_activation("rope", "x", *x));
  if (x->shape.rank < 2) return err(ErrorCode::kInvalidArgument, "rope: x needs rank >= 2, got ", x->shape.str());
  const int r = x->shape.rank;
  const int seq = normalize_axis(attrs.i("seq_axis"), r);
  if (seq < 0 || seq == r - 1)
    return err(ErrorCode::kInvalidArgument, "rope: seq_axis ", attrs.i("seq_axis"), " is not a non-last axis of x ",
               x->shape.str());
  const int64_t d = x->shape[r - 1];
  const int64_t rd = attrs.i("rotary_dim") == 0 ? d : attrs.i("rotary_dim");
  if (rd <= 0 || rd > d || rd % 2 != 0)
    return err(ErrorCode::kInvalidArgument, "rope: rotary_dim must be even and in (0, ", d, "], got ", rd);
  VRUN_RETURN_IF_ERROR(check_rope_frequencies("rope", "mode", attrs, *f, rd));
  const int64_t heads = attrs.i("heads");
  if (heads < 0 || heads > x->shape[r - 2] || (heads > 0 && seq == r - 2))
    return err(ErrorCode::kInvalidArgument, "rope: heads ", heads, " must be in [0, ", x->shape[r - 2],
               "] and the axis before the head dim must not be seq_axis, for x ", x->shape.str());
  VRUN_RETURN_IF_ERROR(check_device_positions(input_at(in, 2), "rope", "offset", x->shape[seq], "row along seq_axis"));
  out->push_back(*x);
  return Status::ok();
}

// decode_block (ops.def): every input's shape follows from x's D, the heads and the cache.
Status infer_decode_block(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out,
                          const char* op = "decode_block") {
  const TensorDesc *x, *q, *cache, *pos, *inv, *wo, *g, *wgu, *wd;
  VRUN_RETURN_IF_ERROR(need(in, op,
                            {{"x", &x}, {"q", &q}, {"cache", &cache}, {"pos", &pos}, {"inv_freq", &inv}, {"wo", &wo},
                             {"ffn_norm", &g}, {"w_gate_up", &wgu}, {"w_down", &wd}}));
  const int64_t H = attrs.i("heads"), KV = attrs.i("kv_heads");
  if (H < 1 || KV < 1 || H % KV != 0)
    return err(ErrorCode::kInvalidArgument, op, ": heads ", H, " must be a positive multiple of kv_heads ", KV);
  if (x->dtype != DType::f32 || x->shape.rank != 3 || x->shape[0] != 1 || x->shape[1] != 1)
    return err(ErrorCode::kInvalidArgument, op, ": x must be f32 [1, 1, D], got ", dtype_name(x->dtype), " ", x->shape.str());
  const int64_t D = x->shape[2];
  if (!is_activation(cache->dtype) || cache->shape.rank != 4 || cache->shape[0] != 1 || cache->shape[1] != 2 * KV)
    return err(ErrorCode::kInvalidArgument, op, ": cache must be float [1, ", 2 * KV, ", C, hd], got ", dtype_name(cache->dtype), " ",
               cache->shape.str());
  const int64_t hd = cache->shape[3];
  if (q->dtype != DType::f32 || q->shape != Shape{1, 1, H, hd})
    return err(ErrorCode::kInvalidArgument, op, ": q must be f32 [1, 1, ", H, ", ", hd, "], got ", dtype_name(q->dtype), " ", q->shape.str());
  if (!pos) return err(ErrorCode::kInvalidArgument, op, ": missing input pos");
  VRUN_RETURN_IF_ERROR(check_device_scalar(pos, op, "pos"));
  VRUN_RETURN_IF_ERROR(check_rope_frequencies(op, "rope_mode", attrs, *inv, hd));
  VRUN_RETURN_IF_ERROR(need_activation(op, "ffn_norm", *g));
  if (g->shape.rank != 1 || g->shape[0] != D)
    return err(ErrorCode::kInvalidArgument, op, ": ffn_norm must be [", D, "], got ", g->shape.str());
  const int64_t F = wd->shape.rank == 2 ? wd->shape[1] : -1;
  const struct {
    const char* name;
    const TensorDesc* w;
    int64_t n, k;
  } ws[3] = {{"wo", wo, D, H * hd}, {"w_gate_up", wgu, 2 * F, D}, {"w_down", wd, D, F}};
  for (const auto& w : ws) {
    if (!is_activation(w.w->dtype) && !is_quantized(w.w->dtype))
      return err(ErrorCode::kInvalidArgument, op, ": ", w.name, " dtype must be f32/f16/bf16/q8_0/q4_0/q4_1, got ",
                 dtype_name(w.w->dtype));
    if (w.w->shape.rank != 2 || w.w->shape[0] != w.n || w.w->shape[1] != w.k || w.k < 1)
      return err(ErrorCode::kInvalidArgument, op, ": ", w.name, " must be [", w.n, ", ", w.k, "], got ", w.w->shape.str());
    if (is_quantized(w.w->dtype) && w.k % kQuantBlock != 0)
      return err(ErrorCode::kInvalidArgument, op, ": ", dtype_name(w.w->dtype), " ", w.name, " needs K % 32 == 0, got ", w.k);
  }
  out->push_back(*x);
  return Status::ok();
}

// decode_layer (ops.def): decode_block's inputs after the cache written in place, with the
// normalised QKV projection's in place of q; outputs the cache and y.
Status infer_decode_layer(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const TensorDesc *cache, *x, *an, *wqkv;
  VRUN_RETURN_IF_ERROR(need(in, "decode_layer", {{"cache", &cache}, {"x", &x}, {"attn_norm", &an}, {"w_qkv", &wqkv}}));
  const int64_t H = attrs.i("heads"), KV = attrs.i("kv_heads");
  if (x->dtype != DType::f32 || x->shape.rank != 3 || x->shape[0] != 1 || x->shape[1] != 1)
    return err(ErrorCode::kInvalidArgument, "decode_layer: x must be f32 [1, 1, D], got ", dtype_name(x->dtype), " ", x->shape.str());
  const int64_t D = x->shape[2];
  if (!is_activation(cache->dtype) || cache->shape.rank != 4)
    return err(ErrorCode::kInvalidArgument, "decode_layer: cache must be float [1, 2 kv_heads, C, hd], got ", dtype_name(cache->dtype), " ",
               cache->shape.str());
  const int64_t hd = cache->shape[3];
  VRUN_RETURN_IF_ERROR(need_activation("decode_layer", "attn_norm", *an));
  if (an->shape.rank != 1 || an->shape[0] != D)
    return err(ErrorCode::kInvalidArgument, "decode_layer: attn_norm must be [", D, "], got ", an->shape.str());
  if (!is_activation(wqkv->dtype) && !is_quantized(wqkv->dtype))
    return err(ErrorCode::kInvalidArgument, "decode_layer: w_qkv dtype must be f32/f16/bf16/q8_0/q4_0/q4_1, got ", dtype_name(wqkv->dtype));
  if (H < 1 || KV < 1 || wqkv->shape.rank != 2 || wqkv->shape[0] != (H + 2 * KV) * hd || wqkv->shape[1] != D)
    return err(ErrorCode::kInvalidArgument, "decode_layer: w_qkv must be [", (H + 2 * KV) * hd, ", ", D, "], got ", wqkv->shape.str());
  if (is_quantized(wqkv->dtype) && D % kQuantBlock != 0)
    return err(ErrorCode::kInvalidArgument, "decode_layer: ", dtype_name(wqkv->dtype), " w_qkv needs K % 32 == 0, got ", D);
  const TensorDesc q{DType::f32, Shape{1, 1, H, hd}};
  const std::vector<const TensorDesc*> block = {x, &q, cache, input_at(in, 4), input_at(in, 5), input_at(in, 6), input_at(in, 7),
                                                input_at(in, 8), input_at(in, 9)};
  std::vector<TensorDesc> y;
  VRUN_RETURN_IF_ERROR(infer_decode_block(block, attrs, &y, "decode_layer"));
  out->push_back(*cache);
  out->push_back(y[0]);
  return Status::ok();
}

}  // namespace

Status infer_shapes_linalg(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                           std::vector<TensorDesc>* out) {
  switch (op) {
    case OpKind::linear: return infer_linear(in, attrs, out);
    case OpKind::bmm: return infer_bmm(in, attrs, out);
    case OpKind::sdpa: return infer_sdpa(in, attrs, out);
    case OpKind::rope: return infer_rope(in, attrs, out);
    case OpKind::decode_block: return infer_decode_block(in, attrs, out);
    case OpKind::decode_layer: return infer_decode_layer(in, attrs, out);
    default: return err(ErrorCode::kInternal, "infer_shapes_linalg: op ", op_name(op), " is not linalg/attention");
  }
}

}  // namespace vrun
