// lstm: the input projection of every step is one linear up front (the matvec or matmul kernels,
// whatever weight dtype they take); each step is then one lstm_step dispatch that adds
// h_prev . w_hh^T and applies the cell. The recurrence runs in f32 (as the CPU kernel's does) and
// converts to the outputs' dtype at the end.
#include "runtime/backends/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

Status record_lstm(Recorder& rec, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out) {
  const DeviceView& x_in = in[0];
  const DeviceView& h0_in = in[1];
  const DeviceView& c0 = in[2];
  const DeviceView& w_ih = in[3];
  const DeviceView& w_hh_in = in[4];
  const DeviceView none;
  const DeviceView& b_ih = in.size() > 5 ? in[5] : none;
  const DeviceView& b_hh = in.size() > 6 ? in[6] : none;
  const DeviceView &y = out[0], &h = out[1], &c = out[2];
  const int64_t B = x_in.shape[0], T = x_in.shape[1], H = h0_in.shape[1];
  if (B == 0 || H == 0) return Status::ok();
  if (T == 0) {
    VRUN_RETURN_IF_ERROR(rec.record_copy(h0_in, h));
    return rec.record_copy(c0, c);
  }

  // gx [B, T, 4H] = x . w_ih^T + b_ih (+ b_hh), in f32.
  DeviceView x = x_in;
  if (x.dtype != DType::f32) {
    VRUN_ASSIGN_OR_RETURN(x, rec.scratch(DType::f32, x_in.shape));
    VRUN_RETURN_IF_ERROR(rec.record_copy(x_in, x));
  }
  VRUN_ASSIGN_OR_RETURN(DeviceView gx, rec.scratch(DType::f32, Shape{B, T, 4 * H}));
  VRUN_RETURN_IF_ERROR(record_linalg(rec, OpKind::linear, {x, w_ih, b_ih}, {gx}, Attrs(OpKind::linear)));
  if (b_hh.present()) VRUN_RETURN_IF_ERROR(record_elementwise(rec, OpKind::add, {gx, b_hh}, {gx}, Attrs(OpKind::add)));

  // The recurrence's own f32 buffers: the outputs themselves when they are f32.
  DeviceView ys = y, cs = c;
  if (y.dtype != DType::f32) {
    VRUN_ASSIGN_OR_RETURN(ys, rec.scratch(DType::f32, y.shape));
  }
  if (c.dtype != DType::f32) {
    VRUN_ASSIGN_OR_RETURN(cs, rec.scratch(DType::f32, c.shape));
  }
  // The kernel reads c0 at the first step and writes h at the last: no copies around it.
  VRUN_ASSIGN_OR_RETURN(DeviceView c0d, rec.dense_view(c0));
  VRUN_ASSIGN_OR_RETURN(DeviceView h0, rec.dense_view(h0_in));
  VRUN_ASSIGN_OR_RETURN(DeviceView w_hh, rec.dense_view(w_hh_in));

  std::vector<Binding> bindings = {{&ys, true}, {&gx, false}, {&w_hh, false}, {&h0, false},
                                   {&cs, true}, {&c0d, false},  {&h, true}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  uint32_t gx_groups, gy_groups;
  rec.grid_1d(static_cast<uint64_t>(B * H), &gx_groups, &gy_groups);
  for (int64_t t = 0; t < T; ++t) {
    PushWords pw;
    pw.u(B).u(T).u(H).u(t);
    for (uint32_t o : offs) pw.u(o);
    VRUN_RETURN_IF_ERROR(rec.dispatch("lstm_step", {dt_code(w_hh.dtype), dt_code(h0.dtype), dt_code(c0d.dtype), dt_code(h.dtype)},
                                      bindings, pw.w, pw.bytes(), gx_groups, gy_groups, 1));
  }
  if (y.dtype != DType::f32) VRUN_RETURN_IF_ERROR(rec.record_copy(ys, y));
  if (c.dtype != DType::f32) VRUN_RETURN_IF_ERROR(rec.record_copy(cs, c));
  return Status::ok();
}

}  // namespace

Status record_rnn(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                  const Attrs&) {
  if (op == OpKind::lstm) return record_lstm(rec, in, out);
  return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
}

}  // namespace vrun::vulkan
