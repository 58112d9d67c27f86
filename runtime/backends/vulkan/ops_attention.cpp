// sdpa (flash-style, KV cache read in place through its strides) and rope.
#include <algorithm>
#include <cmath>

#include "runtime/backends/vulkan/context.h"
#include "runtime/backends/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

Status record_sdpa(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& attrs) {
  // The kernel reads head dims contiguously; every other dim goes through strides.
  auto last_dense = [&](const DeviceView& v) -> Result<DeviceView> {
    if (v.shape[3] == 1 || v.strides[3] == 1) return v;
    return rec.dense_view(v);
  };
  VRUN_ASSIGN_OR_RETURN(DeviceView q, last_dense(in[0]));
  VRUN_ASSIGN_OR_RETURN(DeviceView k, last_dense(in[1]));
  VRUN_ASSIGN_OR_RETURN(DeviceView v, last_dense(in[2]));
  const int64_t B = q.shape[0], Hq = q.shape[1], Lq = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], Lk = k.shape[2], Dv = v.shape[3];
  if (y.numel() == 0) return Status::ok();
  if (Lk == 0) return err(ErrorCode::kUnsupported, "vulkan: sdpa over zero keys");
  if (Lq > 65535 || Hq > 65535 || B > 65535)
    return err(ErrorCode::kUnsupported, "vulkan: sdpa grid [", Lq, ", ", Hq, ", ", B, "] exceeds the kernel's");
  DeviceView mask;
  const bool has_mask = in.size() > 3 && in[3].present();
  if (has_mask) {
    mask = in[3];
    const Shape full{B, Hq, Lq, Lk};
    mask.strides = broadcast_strides(mask.shape, mask.strides, full);
    mask.shape = full;
  }
  double scale = attrs.f("scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  // Few query rows (decode) leave most of the GPU idle: split the keys over workgroups.
  const int64_t rows = B * Hq * Lq;
  int64_t nsplit = 1, kchunk = Lk;
  if (rows < 1024 && Lk >= 512) {
    nsplit = std::min<int64_t>(64, (Lk + 255) / 256);
    kchunk = ((Lk + nsplit - 1) / nsplit + 63) / 64 * 64;
    nsplit = (Lk + kchunk - 1) / kchunk;
    if (B * nsplit > 65535) nsplit = 1, kchunk = Lk;
  }
  DeviceView partial;
  if (nsplit > 1) {
    VRUN_ASSIGN_OR_RETURN(partial, rec.scratch(DType::f32, Shape{rows * nsplit * (Dv + 2)}));
  }
  const DeviceView& dst = nsplit > 1 ? partial : y;
  std::vector<Binding> bindings = {{&dst, true}, {&q, false}, {&k, false}, {&v, false}, {has_mask ? &mask : nullptr, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(Lq).u(Lk).u(D).u(Dv).u(Hq).u(Hkv).f(static_cast<float>(scale));
  pw.u(q.strides[0]).u(q.strides[1]).u(q.strides[2]);
  pw.u(k.strides[0]).u(k.strides[1]).u(k.strides[2]);
  pw.u(v.strides[0]).u(v.strides[1]).u(v.strides[2]);
  pw.u(has_mask ? mask.strides[0] : 0).u(has_mask ? mask.strides[1] : 0).u(has_mask ? mask.strides[2] : 0);
  pw.u(has_mask ? mask.strides[3] : 0);
  pw.u(offs[1]).u(offs[2]).u(offs[3]).u(offs[4]).u(offs[0]);
  pw.u(nsplit).u(kchunk);
  const bool kvec8 = k.dtype == DType::f16 && D % 8 == 0 && k.strides[0] % 8 == 0 && k.strides[1] % 8 == 0 &&
                     k.strides[2] % 8 == 0 && offs[2] % 8 == 0;
  const std::vector<int32_t> spec = {dt_code(q.dtype),     dt_code(k.dtype), dt_code(v.dtype), dt_code(y.dtype),
                                     has_mask ? dt_code(mask.dtype) : 255, attrs.i("causal") ? 1 : 0,
                                     nsplit > 1 ? 1 : 0, kvec8};
  // Many query rows: 16 per workgroup share each K/V tile through shared memory.
  if (nsplit == 1 && Lq >= 16 && D <= 128 && Dv <= 128) {
    const std::vector<int32_t> tspec(spec.begin(), spec.end() - 2);
    return rec.dispatch("sdpa_tile", tspec, bindings, pw.w, pw.bytes(), static_cast<uint32_t>((Lq + 15) / 16),
                        static_cast<uint32_t>(Hq), static_cast<uint32_t>(B));
  }
  VRUN_RETURN_IF_ERROR(rec.dispatch("sdpa", spec, bindings, pw.w, pw.bytes(), static_cast<uint32_t>(Lq),
                                    static_cast<uint32_t>(Hq), static_cast<uint32_t>(B * nsplit)));
  if (nsplit == 1) return Status::ok();
  std::vector<Binding> cb = {{&y, true}, {&partial, false}};
  VRUN_ASSIGN_OR_RETURN(auto coffs, rec.binding_offsets(cb));
  PushWords cp;
  const int64_t n = rows * Dv;
  cp.u(n).u(Dv).u(nsplit).u(coffs[0]).u(coffs[1]);
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(n) + 255) / 256, &gx, &gy);
  return rec.dispatch("sdpa_combine", {dt_code(y.dtype)}, cb, cp.w, cp.bytes(), gx, gy, 1);
}

Status record_rope(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& attrs) {
  VRUN_ASSIGN_OR_RETURN(DeviceView x, rec.dense_view(in[0]));
  VRUN_ASSIGN_OR_RETURN(DeviceView f, rec.dense_view(in[1]));
  const int r = x.shape.rank;
  const int axis = normalize_axis(attrs.i("seq_axis"), r);
  if (axis < 0 || axis == r - 1)
    return err(ErrorCode::kInvalidArgument, "vulkan: rope seq_axis ", attrs.i("seq_axis"), " invalid for x ", x.shape.str());
  const int64_t D = x.shape[r - 1];
  int64_t rd = attrs.i("rotary_dim");
  if (rd == 0) rd = D;
  if (rd > D || rd % 2 || f.numel() < rd / 2)
    return err(ErrorCode::kInvalidArgument, "vulkan: rope rotary_dim ", rd, " invalid for D = ", D, " and inv_freq ",
               f.shape.str());
  int64_t inner = 1;
  for (int i = axis + 1; i < r; ++i) inner *= x.shape[i];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&f, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(n).u(D).u(x.shape[axis]).u(inner).u(rd).u(attrs.i("pos")).u(offs[0]).u(offs[1]).u(offs[2]);
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(n) + 255) / 256, &gx, &gy);
  const int32_t interleaved = attrs.s("mode") == "interleaved" ? 1 : 0;
  return rec.dispatch("rope", {interleaved, dt_code(x.dtype), dt_code(f.dtype), dt_code(y.dtype)}, bindings, pw.w,
                      pw.bytes(), gx, gy, 1);
}

}  // namespace

Status record_attention(Recorder& rec, OpKind op, const std::vector<DeviceView>& in,
                        const std::vector<DeviceView>& out, const Attrs& attrs) {
  if (op == OpKind::sdpa) return record_sdpa(rec, in, out[0], attrs);
  if (op == OpKind::rope) return record_rope(rec, in, out[0], attrs);
  return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
}

}  // namespace vrun::vulkan
