// decode_block and decode_layer: one dispatch of decode_block.comp (a grid that meets at
// barriers, one workgroup per multiprocessor) where the device says how many it keeps resident
// and the shapes fit its shared memory; elsewhere the rope, sdpa, linear and cache-write kernels
// the op stands for, in the order the unfused graph runs them.
#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"
#include "runtime/base/knobs.h"

namespace vrun::vulkan {

namespace {

constexpr int64_t kMaxHeadDim = 256;
constexpr uint32_t kSubgroupBasic = 0x1, kSubgroupArithmetic = 0x4;  // VK_SUBGROUP_FEATURE_*_BIT

struct Grid {
  uint32_t groups = 0, invocations = 0;  // 0 groups: the unfused kernels
};

// VRUN_DECODE_BLOCK: unset or 0, the unfused kernels; "on": one workgroup per multiprocessor
// (512 invocations) where the device reports them (an H200, Llama-1B shape, 128 tokens after 512:
// q4_0 812 tok/s against 716 unfused, f16 717 against 667; 256 invocations were slower, 1,024
// no faster), one of 256 on a CPU implementation (lavapipe runs a dispatch's workgroups one after
// another on a thread, so only one can wait at a barrier), and the unfused kernels elsewhere (a
// device that does not say how many workgroups it keeps resident); G or GxWG: that grid.
// Off unless asked for: the kernel's sums run in another order than the batched decode step's
// kernels (the matvec and rows kernels, sdpa), so with it a sequence's logits differ in the last
// bits between `vrun generate` and a server's steps of several rows, and its greedy text can
// differ at a near tie; with the unfused kernels a batched step's rows keep the single-stream
// bits up to 8 rows of float, q4_1 and q8_0 weights (docs/serving.md;
// LlamaBatch.BatchedRowsHaveTheSingleStreamBits).
Grid block_grid(const Context& ctx) {
  const char* e = knob_value(Knob::VRUN_DECODE_BLOCK);
  if (!e || !*e || std::string(e) == "0") return {};
  const DeviceInfo& d = ctx.info();
  if ((d.subgroup_ops & (kSubgroupBasic | kSubgroupArithmetic)) != (kSubgroupBasic | kSubgroupArithmetic)) return {};
  if (std::string(e) == "on") {
    if (d.type == "cpu") return {1, 256};
    if (d.multiprocessors == 0) return {};
    return {d.multiprocessors, 512};
  }
  long g = 0, w = 0;
  const int n = std::sscanf(e, "%ldx%ld", &g, &w);
  if (n >= 1 && g >= 1 && g <= 4096 && (n == 1 || w == 64 || w == 128 || w == 256 || w == 512 || w == 1024))
    return {static_cast<uint32_t>(g), static_cast<uint32_t>(n == 2 ? w : 256)};
  std::fprintf(stderr, "vrun: VRUN_DECODE_BLOCK=%s is not 0, on, G or GxWG (WG 64-1024, a power of two); the unfused kernels run\n", e);
  return {};
}

struct Dims {
  int64_t H, KV, D, F, C, hd;
};

Dims dims_of(const std::vector<DeviceView>& in, const Attrs& a) {
  return {a.i("heads"), a.i("kv_heads"), in[0].shape[2], in[8].shape[1], in[2].shape[2], in[2].shape[3]};
}

// Keys of one attention item at most: a head's keys are split into chunks no longer (and into
// enough chunks for the grid, at most 16, when the cache is shorter).
constexpr int64_t kMaxChunk = 2048;
int64_t key_splits(const Dims& d, uint32_t groups) {
  return std::max(std::clamp<int64_t>(groups / d.H, 1, 16), (d.C + kMaxChunk - 1) / kMaxChunk);
}

// Floats of shared memory the kernel stages: the longest vector, and attention's query (and the
// key at pos, for decode_layer), a chunk's scores and the subgroups' value partials; rounded up
// to 1,024.
int64_t staged_floats(const Dims& d, uint32_t invocations, uint32_t subgroup, int64_t splits) {
  const int64_t chunk = (d.C + splits - 1) / splits;
  const int64_t need = std::max({d.D, d.F, d.H * d.hd, 2 * d.hd + (chunk + 3) / 4 * 4 + invocations / subgroup * d.hd});
  return (need + 1023) / 1024 * 1024;
}

// The cache as the kernels read it: its positions' rows dense and hd apart, its heads any
// distance apart (one slot's rows of a batched cache); else a dense copy.
Result<DeviceView> cache_view(Recorder& rec, const DeviceView& c) {
  if (c.strides[3] == 1 && c.strides[2] == c.shape[3] && c.strides[1] >= c.shape[2] * c.shape[3]) return c;
  return rec.dense_view(c);
}

Status record_unfused(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& a) {
  const Dims d = dims_of(in, a);
  const DeviceView &x = in[0], &pos = in[3], &inv = in[4];
  VRUN_ASSIGN_OR_RETURN(DeviceView qin, rec.dense_view(in[1]));
  VRUN_ASSIGN_OR_RETURN(DeviceView cache, cache_view(rec, in[2]));
  VRUN_ASSIGN_OR_RETURN(DeviceView q, rec.scratch(DType::f32, qin.shape));
  Attrs ra(OpKind::rope);
  ra.set_s("mode", a.s("rope_mode"));
  VRUN_RETURN_IF_ERROR(record_attention(rec, OpKind::rope, {qin, inv, pos}, {q}, ra));

  const int64_t hs = cache.strides[1];
  DeviceView keys = cache, vals = cache;
  keys.shape = vals.shape = Shape{1, d.KV, d.C, d.hd};
  for (DeviceView* v : {&keys, &vals}) {
    v->strides[0] = 2 * d.KV * hs;
    v->strides[1] = hs;
    v->strides[2] = d.hd;
    v->strides[3] = 1;
  }
  vals.offset += static_cast<uint64_t>(d.KV * hs) * dtype_elem_size(cache.dtype);
  DeviceView qh = q;
  qh.shape = Shape{1, d.H, 1, d.hd};
  qh.strides = contiguous_strides(qh.shape);
  VRUN_ASSIGN_OR_RETURN(DeviceView att, rec.scratch(DType::f32, qh.shape));
  Attrs sa(OpKind::sdpa);
  sa.set_i("causal", 1);
  VRUN_RETURN_IF_ERROR(record_sdpa(rec, {qh, keys, vals, DeviceView{}, pos}, att, sa));

  DeviceView heads = att;
  heads.shape = Shape{1, 1, d.H, d.hd};
  heads.strides = contiguous_strides(heads.shape);
  VRUN_ASSIGN_OR_RETURN(DeviceView x1, rec.scratch(DType::f32, x.shape));
  Attrs lo(OpKind::linear);
  lo.set_i("x_dims", 2);
  VRUN_RETURN_IF_ERROR(record_linalg(rec, OpKind::linear, {heads, in[5], DeviceView{}, x}, {x1}, lo));
  VRUN_ASSIGN_OR_RETURN(DeviceView u, rec.scratch(DType::f32, Shape{1, 1, 2 * d.F}));
  Attrs ln(OpKind::linear);
  ln.set_s("norm", "rms");
  ln.set_f("eps", a.f("eps"));
  VRUN_RETURN_IF_ERROR(record_linalg(rec, OpKind::linear, {x1, in[7], DeviceView{}, DeviceView{}, in[6]}, {u}, ln));
  Attrs lg(OpKind::linear);
  lg.set_s("glu", "silu");
  return record_linalg(rec, OpKind::linear, {u, in[8], DeviceView{}, x1}, {y}, lg);
}

// The kernel for decode_block (wq null) or decode_layer (wq: w_qkv, an: attn_norm; q unused): false
// in *ran when the grid or the shapes do not fit it (nothing recorded).
Status record_kernel(Recorder& rec, const Dims& d, const DeviceView& y, const DeviceView& x, const DeviceView* q,
                     const DeviceView& cache, const DeviceView* wq, const DeviceView* an, const std::vector<DeviceView>& rest,
                     const Attrs& a, bool* ran) {
  *ran = false;
  const Context& ctx = rec.context();
  const Grid grid = block_grid(ctx);
  const int64_t S = key_splits(d, grid.groups);
  const uint32_t sgs = std::max<uint32_t>(ctx.info().subgroup_size, 1);
  const int64_t staged = grid.groups ? staged_floats(d, grid.invocations, sgs, S) : 0;
  const int64_t shared_bytes = staged * 4 + 1024;
  // The head dim: a power of two from 8, its 8-element chunks within a subgroup (the values'
  // partial sums meet by shuffles).
  const bool hd_fits = d.hd >= 8 && d.hd <= kMaxHeadDim && (d.hd & (d.hd - 1)) == 0 && d.hd / 8 <= sgs;
  if (!grid.groups || !hd_fits || d.hd > grid.invocations || shared_bytes > ctx.limits().maxComputeSharedMemorySize ||
      grid.invocations > ctx.limits().maxComputeWorkGroupInvocations || grid.invocations / sgs > 64)
    return Status::ok();
  const DeviceView &pos = rest[0], &inv = rest[1], &wo = rest[2], &g = rest[3], &wgu = rest[4], &wd = rest[5];
  const uint32_t G = grid.groups;
  const int64_t nq = wq ? (d.H + 2 * d.KV) * d.hd : 0;
  VRUN_ASSIGN_OR_RETURN(DeviceView scratch, rec.scratch(DType::f32, Shape{d.H * S * (d.hd + 2) + d.D + d.F + nq}));
  VRUN_ASSIGN_OR_RETURN(DeviceView counters, rec.counters(2));
  const DeviceView none;
  std::vector<Binding> bindings = {{&y, true},     {&x, false},    {wq ? wq : q, false}, {&cache, wq != nullptr}, {&pos, false},
                                   {&inv, false},  {&wo, false},   {&g, false},          {&wgu, false},           {&wd, false},
                                   {&scratch, true}, {&counters, true}, {an ? an : &none, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  for (uint32_t o : offs) pw.u(o);
  pw.u(static_cast<uint32_t>(d.H)).u(static_cast<uint32_t>(d.KV)).u(static_cast<uint32_t>(d.D)).u(static_cast<uint32_t>(d.F));
  pw.u(static_cast<uint32_t>(d.C)).u(static_cast<uint32_t>(S)).f(static_cast<float>(a.f("eps"))).u(static_cast<uint32_t>(cache.strides[1]));
  const char* stream = knob_value(Knob::VRUN_DECODE_STREAM);
  const std::vector<int32_t> spec = {dt_code(wo.dtype),
                                     dt_code(wgu.dtype),
                                     dt_code(wd.dtype),
                                     dt_code(cache.dtype),
                                     dt_code(g.dtype),
                                     a.s("rope_mode") == "half" ? 1 : 0,
                                     static_cast<int32_t>(staged),
                                     4,
                                     static_cast<int32_t>(grid.invocations),
                                     static_cast<int32_t>(knob_count(Knob::VRUN_DECODE_SKIP)),
                                     static_cast<int32_t>(d.hd),
                                     stream && std::string(stream) == "0" ? 0 : 1,
                                     wq ? 1 : 0,
                                     wq ? dt_code(wq->dtype) : dt_code(DType::f16),
                                     an ? dt_code(an->dtype) : dt_code(DType::f32)};
  *ran = true;
  return rec.dispatch("decode_block", spec, bindings, pw.w, pw.bytes(), G, 1, 1);
}

// decode_layer's QKV projection and cache write as their own kernels (the normalised linear, then
// the rotating cache write), leaving the queries in q [1, 1, heads, hd].
Status record_qkv_parts(Recorder& rec, const Dims& d, const std::vector<DeviceView>& in, const DeviceView& cache,
                        const Attrs& a, DeviceView* q) {
  const int64_t N = (d.H + 2 * d.KV) * d.hd;
  VRUN_ASSIGN_OR_RETURN(DeviceView qkv, rec.scratch(DType::f32, Shape{1, 1, N}));
  Attrs ln(OpKind::linear);
  ln.set_s("norm", "rms");
  ln.set_f("eps", a.f("eps"));
  const DeviceView none;
  VRUN_RETURN_IF_ERROR(record_linalg(rec, OpKind::linear, {in[1], in[3], none, none, in[2]}, {qkv}, ln));
  *q = qkv;
  q->shape = Shape{1, 1, d.H, d.hd};
  q->strides = contiguous_strides(q->shape);
  // The keys and values: [1, 1, 2 kv_heads, hd] rows after the queries' (seen as [1, 2 kv_heads,
  // 1, hd]: one position).
  DeviceView kv = qkv;
  kv.offset += static_cast<uint64_t>(d.H * d.hd) * 4;
  kv.shape = Shape{1, 2 * d.KV, 1, d.hd};
  kv.strides = contiguous_strides(kv.shape);
  Attrs su(OpKind::slice_update);
  su.set_i("axis", 2);
  su.set_i("start", 0);
  su.set_s("rope_mode", a.s("rope_mode"));
  su.set_i("rope_heads", d.KV);
  return record_data(rec, OpKind::slice_update, {cache, kv, in[4], in[5]}, {cache}, su);
}

}  // namespace

Status record_decode_block(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& a) {
  const Dims d = dims_of(in, a);
  VRUN_ASSIGN_OR_RETURN(DeviceView q, rec.dense_view(in[1]));
  VRUN_ASSIGN_OR_RETURN(DeviceView cache, cache_view(rec, in[2]));
  bool ran = false;
  VRUN_RETURN_IF_ERROR(record_kernel(rec, d, y, in[0], &q, cache, nullptr, nullptr, {in.begin() + 3, in.end()}, a, &ran));
  return ran ? Status::ok() : record_unfused(rec, in, y, a);
}

// decode_layer (inputs cache, x, attn_norm, w_qkv, pos, inv_freq, wo, ffn_norm, w_gate_up, w_down;
// outputs the cache, written in place, and y): the kernel with its QKV stage where the cache's
// positions are dense rows (the kernel writes it where it lies) and VRUN_DECODE_LAYER is not 0;
// else the QKV projection and the cache write as kernels of their own, then decode_block.
Status record_decode_layer(Recorder& rec, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out, const Attrs& a) {
  const DeviceView& cache = out[0];
  const Dims d{a.i("heads"), a.i("kv_heads"), in[1].shape[2], in[9].shape[1], cache.shape[2], cache.shape[3]};
  const char* e = knob_value(Knob::VRUN_DECODE_LAYER);
  const bool fused_on = !(e && std::string(e) == "0");
  const bool rows_dense = cache.strides[3] == 1 && cache.strides[2] == cache.shape[3] && cache.strides[1] >= cache.shape[2] * cache.shape[3];
  if (fused_on && rows_dense) {
    bool ran = false;
    VRUN_RETURN_IF_ERROR(record_kernel(rec, d, out[1], in[1], nullptr, cache, &in[3], &in[2], {in.begin() + 4, in.end()}, a, &ran));
    if (ran) return Status::ok();
  }
  DeviceView q;
  VRUN_RETURN_IF_ERROR(record_qkv_parts(rec, d, in, cache, a, &q));
  return record_decode_block(rec, {in[1], q, cache, in[4], in[5], in[6], in[7], in[8], in[9]}, out[1], a);
}

}  // namespace vrun::vulkan
