// decode_block and decode_layer (ops.def) on the CPU: the rope, sdpa, linear and slice_update
// kernels in the order the unfused graph runs them (decode_layer's normalised QKV projection and
// cache write, then rope of the queries, attention over the cache, the output projection with
// its residual, the normalised gate-up projection, the gated down projection with its residual),
// so a program built with the node computes exactly what one built without it does.
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

namespace {

// A view of data with `shape` and `strides` given as lists of equal length.
TensorView view_of(void* data, DType dtype, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.shape = Shape(shape);
  int i = 0;
  for (int64_t s : strides) v.strides[i++] = s;
  return v;
}

Status run(OpKind op, std::vector<TensorView> in, TensorView out, const Attrs& attrs, ThreadPool* pool) {
  KernelCall c;
  c.op = op;
  c.in = in.data();
  c.n_in = static_cast<int>(in.size());
  c.out = &out;
  c.n_out = 1;
  c.attrs = &attrs;
  c.pool = pool;
  return cpu_kernels().get(op)(c);
}

Status decode_block_kernel(const KernelCall& call) {
  const Attrs& a = call.attr();
  const TensorView &x = call.in[0], &qin = call.in[1], &cache = call.in[2], &pos = call.in[3], &inv = call.in[4];
  const TensorView &wo = call.in[5], &g = call.in[6], &wgu = call.in[7], &wd = call.in[8];
  const int64_t H = a.i("heads"), KV = a.i("kv_heads"), D = x.shape[2], hd = cache.shape[3], C = cache.shape[2];
  const int64_t F = wd.shape[1];
  std::vector<float> q(static_cast<size_t>(H * hd)), att(static_cast<size_t>(H * hd)), x1(static_cast<size_t>(D)),
      u(static_cast<size_t>(2 * F));

  // The queries (f32, dense), rotated at pos.
  Attrs ra(OpKind::rope);
  ra.set_s("mode", a.s("rope_mode"));
  const Shape qs{1, 1, H, hd};
  VRUN_RETURN_IF_ERROR(run(OpKind::rope, {qin, inv, pos}, TensorView::dense(q.data(), DType::f32, qs), ra,
                           call.pool));

  // Attention of the queries [1, H, 1, hd] over the cache's keys and values (cut at pos); the
  // cache may be a view (one slot's rows of a larger cache: heads further apart).
  const int64_t hs = cache.strides[1], ps = cache.strides[2], es = cache.strides[3];
  const size_t esz = static_cast<size_t>(dtype_elem_size(cache.dtype));
  TensorView qh = view_of(q.data(), DType::f32, {1, H, 1, hd}, {H * hd, hd, hd, 1});
  TensorView keys = view_of(cache.data, cache.dtype, {1, KV, C, hd}, {2 * KV * hs, hs, ps, es});
  TensorView vals = view_of(static_cast<uint8_t*>(cache.data) + static_cast<size_t>(KV * hs) * esz, cache.dtype, {1, KV, C, hd},
                            {2 * KV * hs, hs, ps, es});
  Attrs sa(OpKind::sdpa);
  sa.set_i("causal", 1);
  VRUN_RETURN_IF_ERROR(run(OpKind::sdpa, {qh, keys, vals, TensorView{}, pos}, TensorView::dense(att.data(), DType::f32, Shape{1, H, 1, hd}), sa,
                           call.pool));

  // x1 = x + att wo^T, then u = rms_norm(x1) w_gate_up^T, then y = x1 + glu(u) w_down^T.
  Attrs lo(OpKind::linear);
  lo.set_i("x_dims", 2);
  VRUN_RETURN_IF_ERROR(run(OpKind::linear, {view_of(att.data(), DType::f32, {1, 1, H, hd}, {H * hd, H * hd, hd, 1}), wo, TensorView{}, x},
                           TensorView::dense(x1.data(), DType::f32, Shape{1, 1, D}), lo, call.pool));
  Attrs ln(OpKind::linear);
  ln.set_s("norm", "rms");
  ln.set_f("eps", a.f("eps"));
  TensorView x1v = TensorView::dense(x1.data(), DType::f32, Shape{1, 1, D});
  VRUN_RETURN_IF_ERROR(run(OpKind::linear, {x1v, wgu, TensorView{}, TensorView{}, g}, TensorView::dense(u.data(), DType::f32, Shape{1, 1, 2 * F}),
                           ln, call.pool));
  Attrs lg(OpKind::linear);
  lg.set_s("glu", "silu");
  return run(OpKind::linear, {TensorView::dense(u.data(), DType::f32, Shape{1, 1, 2 * F}), wd, TensorView{}, x1v}, call.out[0], lg, call.pool);
}

// decode_layer: the normalised QKV projection and the cache write (linear and slice_update, as
// the graph without the node runs them), then decode_block over the written cache.
Status decode_layer_kernel(const KernelCall& call) {
  const Attrs& a = call.attr();
  const TensorView &cache = call.out[0], &x = call.in[1], &pos = call.in[4], &inv = call.in[5];
  const int64_t H = a.i("heads"), KV = a.i("kv_heads"), hd = cache.shape[3], N = (H + 2 * KV) * hd;
  if (cache.data != call.in[0].data) return err(ErrorCode::kInternal, "decode_layer: the cache is not written in place");
  std::vector<float> qkv(static_cast<size_t>(N));
  Attrs ln(OpKind::linear);
  ln.set_s("norm", "rms");
  ln.set_f("eps", a.f("eps"));
  VRUN_RETURN_IF_ERROR(run(OpKind::linear, {x, call.in[3], TensorView{}, TensorView{}, call.in[2]},
                           TensorView::dense(qkv.data(), DType::f32, Shape{1, 1, N}), ln, call.pool));
  // Keys and values [1, 2 kv_heads, 1, hd] (a permuted view of the projection's rows).
  TensorView kv = view_of(qkv.data() + H * hd, DType::f32, {1, 2 * KV, 1, hd}, {N, hd, N, 1});
  Attrs su(OpKind::slice_update);
  su.set_i("axis", 2);
  su.set_i("start", 0);
  su.set_s("rope_mode", a.s("rope_mode"));
  su.set_i("rope_heads", KV);
  VRUN_RETURN_IF_ERROR(run(OpKind::slice_update, {cache, kv, pos, inv}, cache, su, call.pool));
  KernelCall block = call;
  const TensorView q = view_of(qkv.data(), DType::f32, {1, 1, H, hd}, {N, N, hd, 1});
  const TensorView in[9] = {x, q, cache, pos, inv, call.in[6], call.in[7], call.in[8], call.in[9]};
  block.op = OpKind::decode_block;
  block.in = in;
  block.n_in = 9;
  block.out = &call.out[1];
  block.n_out = 1;
  return decode_block_kernel(block);
}

}  // namespace

void register_cpu_decode_block(CpuKernelTable& t) {
  t.set(OpKind::decode_block, decode_block_kernel);
  t.set(OpKind::decode_layer, decode_layer_kernel);
}

}  // namespace vrun
