// decode_block: one dispatch of decode_block.comp (a grid that meets at barriers, one workgroup
// per multiprocessor) where the device says how many it keeps resident and the shapes fit its
// shared memory; elsewhere the rope, sdpa and linear kernels the op stands for, in the order the
// unfused graph runs them.
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

// VRUN_DECODE_BLOCK: 0 off, G or GxWG forced; unset: one workgroup per multiprocessor (512
// invocations) where the device reports them (an H200, Llama-1B shape, 128 tokens after 512:
// q4_0 812 tok/s against 716 unfused, f16 717 against 667; 256 invocations were slower, 1,024
// no faster), one of 256 on a CPU implementation (lavapipe runs a dispatch's workgroups one after
// another on a thread, so only one can wait at a barrier), and the unfused kernels elsewhere
// (a device that does not say how many workgroups it keeps resident).
Grid block_grid(const Context& ctx) {
  const char* e = knob_value(Knob::VRUN_DECODE_BLOCK);
  if (e && std::string(e) == "0") return {};
  const DeviceInfo& d = ctx.info();
  if ((d.subgroup_ops & (kSubgroupBasic | kSubgroupArithmetic)) != (kSubgroupBasic | kSubgroupArithmetic)) return {};
  long g = 0, w = 0;
  if (e && *e) {
    const int n = std::sscanf(e, "%ldx%ld", &g, &w);
    if (n >= 1 && g >= 1 && g <= 4096 && (n == 1 || w == 64 || w == 128 || w == 256 || w == 512 || w == 1024))
      return {static_cast<uint32_t>(g), static_cast<uint32_t>(n == 2 ? w : 256)};
    std::fprintf(stderr, "vrun: VRUN_DECODE_BLOCK=%s is not 0, G or GxWG (WG 64-1024, a power of two); ignored\n", e);
  }
  if (d.type == "cpu") return {1, 256};
  if (d.multiprocessors == 0) return {};
  return {d.multiprocessors, 512};
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

// Floats of shared memory the kernel stages: the longest vector, and attention's query, a
// chunk's scores and the subgroups' value partials; rounded up to 1,024.
int64_t staged_floats(const Dims& d, uint32_t invocations, uint32_t subgroup, int64_t splits) {
  const int64_t chunk = (d.C + splits - 1) / splits;
  const int64_t need = std::max({d.D, d.F, d.H * d.hd, d.hd + (chunk + 3) / 4 * 4 + invocations / subgroup * d.hd});
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

}  // namespace

Status record_decode_block(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& a) {
  const Context& ctx = rec.context();
  const Grid grid = block_grid(ctx);
  const Dims d = dims_of(in, a);
  const int64_t S = key_splits(d, grid.groups);
  const uint32_t sgs = std::max<uint32_t>(ctx.info().subgroup_size, 1);
  const int64_t staged = grid.groups ? staged_floats(d, grid.invocations, sgs, S) : 0;
  const int64_t shared_bytes = staged * 4 + 1024;
  // The head dim: a power of two from 8, its 8-element chunks within a subgroup (the values'
  // partial sums meet by shuffles).
  const bool hd_fits = d.hd >= 8 && d.hd <= kMaxHeadDim && (d.hd & (d.hd - 1)) == 0 && d.hd / 8 <= sgs;
  if (!grid.groups || !hd_fits || d.hd > grid.invocations || shared_bytes > ctx.limits().maxComputeSharedMemorySize ||
      grid.invocations > ctx.limits().maxComputeWorkGroupInvocations || grid.invocations / sgs > 64)
    return record_unfused(rec, in, y, a);

  VRUN_ASSIGN_OR_RETURN(DeviceView q, rec.dense_view(in[1]));
  VRUN_ASSIGN_OR_RETURN(DeviceView cache, cache_view(rec, in[2]));
  const uint32_t G = grid.groups;
  VRUN_ASSIGN_OR_RETURN(DeviceView scratch, rec.scratch(DType::f32, Shape{d.H * S * (d.hd + 2) + d.D + d.F}));
  VRUN_ASSIGN_OR_RETURN(DeviceView counters, rec.counters(2));
  const DeviceView none;
  std::vector<Binding> bindings = {{&y, true},     {&in[0], false}, {&q, false},     {&cache, false},   {&in[3], false},   {&in[4], false},
                                   {&in[5], false}, {&in[6], false}, {&in[7], false}, {&in[8], false}, {&scratch, true}, {&counters, true}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  for (uint32_t o : offs) pw.u(o);
  pw.u(static_cast<uint32_t>(d.H)).u(static_cast<uint32_t>(d.KV)).u(static_cast<uint32_t>(d.D)).u(static_cast<uint32_t>(d.F));
  pw.u(static_cast<uint32_t>(d.C)).u(static_cast<uint32_t>(S)).f(static_cast<float>(a.f("eps"))).u(static_cast<uint32_t>(cache.strides[1]));
  const std::vector<int32_t> spec = {dt_code(in[5].dtype),
                                     dt_code(in[7].dtype),
                                     dt_code(in[8].dtype),
                                     dt_code(cache.dtype),
                                     dt_code(in[6].dtype),
                                     a.s("rope_mode") == "half" ? 1 : 0,
                                     static_cast<int32_t>(staged),
                                     4,
                                     static_cast<int32_t>(grid.invocations),
                                     static_cast<int32_t>(knob_count(Knob::VRUN_DECODE_SKIP)),
                                     static_cast<int32_t>(d.hd),
                                     knob_value(Knob::VRUN_DECODE_STREAM) && std::string(knob_value(Knob::VRUN_DECODE_STREAM)) == "0" ? 0 : 1};
  return rec.dispatch("decode_block", spec, bindings, pw.w, pw.bytes(), G, 1, 1);
}

}  // namespace vrun::vulkan
