// rms_norm and layer_norm (per row of the last dim), softmax / log_softmax / argmax along an axis.
#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

Status record_row_norm(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const DeviceView& y,
                       const Attrs& attrs) {
  VRUN_ASSIGN_OR_RETURN(DeviceView x, rec.rows_view(in[0], 1));
  DeviceView w, b;
  if (in.size() > 1 && in[1].present()) {
    VRUN_ASSIGN_OR_RETURN(w, rec.dense_view(in[1]));
  }
  if (in.size() > 2 && in[2].present()) {
    VRUN_ASSIGN_OR_RETURN(b, rec.dense_view(in[2]));
  }
  const int r = x.shape.rank;
  const int64_t C = r ? x.shape[r - 1] : 1;
  const int64_t rows = C ? x.numel() / C : 0;
  if (rows == 0) return Status::ok();
  int64_t srow = C;
  for (int i = r - 2; i >= 0; --i)
    if (x.shape[i] != 1) {
      srow = x.strides[i];
      break;
    }
  const bool layer = op == OpKind::layer_norm;
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&w, false}, {&b, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(rows).u(C).u(srow).u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]);
  pw.f(static_cast<float>(attrs.f("eps"))).f(layer ? 0.f : static_cast<float>(attrs.f("unit_offset")));
  uint32_t gx, gy;
  rec.grid_1d(static_cast<uint64_t>(rows), &gx, &gy);
  return rec.dispatch("norm", {layer ? 1 : 0, dt_code(x.dtype), dt_code(w), dt_code(b), dt_code(y.dtype)}, bindings,
                      pw.w, pw.bytes(), gx, gy, 1);
}

// A dense tensor seen as [outer, C, inner] around `attrs`' axis: rows = outer * inner rows of C.
struct AxisRows {
  DeviceView x;
  int64_t rows = 0, C = 0, inner = 1;
};

Result<AxisRows> axis_rows(Recorder& rec, OpKind op, const DeviceView& in, const Attrs& attrs) {
  AxisRows a;
  VRUN_ASSIGN_OR_RETURN(a.x, rec.dense_view(in));
  const int r = a.x.shape.rank;
  const int axis = normalize_axis(attrs.i("axis"), r == 0 ? 1 : r);
  if (axis < 0) return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " axis ", attrs.i("axis"), " out of range");
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= a.x.shape[i];
  for (int i = axis + 1; i < r; ++i) a.inner *= a.x.shape[i];
  a.C = r ? a.x.shape[axis] : 1;
  a.rows = outer * a.inner;
  return a;
}

Status record_axis_reduce(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const DeviceView& y,
                          const Attrs& attrs) {
  VRUN_ASSIGN_OR_RETURN(const AxisRows a, axis_rows(rec, op, in[0], attrs));
  const DeviceView& x = a.x;
  const int64_t rows = a.rows, C = a.C, inner = a.inner;
  if (rows == 0 || C == 0) return Status::ok();
  std::vector<Binding> bindings = {{&y, true}, {&x, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(rows).u(C).u(inner).u(offs[0]).u(offs[1]);
  uint32_t gx, gy;
  rec.grid_1d(static_cast<uint64_t>(rows), &gx, &gy);
  const int32_t mode = op == OpKind::softmax ? 0 : 1;
  return rec.dispatch("softmax", {mode, dt_code(x.dtype), dt_code(y.dtype)}, bindings, pw.w, pw.bytes(), gx, gy, 1);
}

// argmax.comp: a row of C values in P spans of at least 2,048 (8 per invocation), so one
// language-model row of logits spreads over tens of workgroups, then the spans' winners merged.
Status record_argmax(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& attrs) {
  VRUN_ASSIGN_OR_RETURN(const AxisRows a, axis_rows(rec, OpKind::argmax, in[0], attrs));
  const DeviceView& x = a.x;
  const int64_t rows = a.rows, C = a.C, inner = a.inner;
  if (rows == 0 || C == 0) return Status::ok();
  constexpr int64_t kMinSpan = 2048, kMaxParts = 256;
  const int64_t parts = std::min(kMaxParts, std::max<int64_t>(1, C / kMinSpan));
  const int64_t span = (C + parts - 1) / parts;
  DeviceView partials;
  if (parts > 1) {
    VRUN_ASSIGN_OR_RETURN(partials, rec.scratch(DType::i32, Shape{rows * parts * 2}));
  }
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&partials, true}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(rows).u(C).u(inner).u(parts).u(span).u(offs[0]).u(offs[1]);
  uint32_t gx, gy;
  rec.grid_1d(static_cast<uint64_t>(rows * parts), &gx, &gy);
  const int32_t nan_flag = attrs.i("nan_flag") != 0 ? 1 : 0;
  VRUN_RETURN_IF_ERROR(rec.dispatch("argmax", {dt_code(x.dtype), 0, nan_flag}, bindings, pw.w, pw.bytes(), gx, gy, 1));
  if (parts == 1) return Status::ok();
  bindings = {{&y, true}, {&x, false}, {&partials, false}};
  rec.grid_1d(static_cast<uint64_t>(rows), &gx, &gy);
  return rec.dispatch("argmax", {dt_code(x.dtype), 1, nan_flag}, bindings, pw.w, pw.bytes(), gx, gy, 1);
}

}  // namespace

bool supports_norm(const Context&, OpKind op, const std::vector<const TensorDesc*>& inputs,
                   const Attrs&) {
  const TensorDesc* x = inputs[0];
  if (op_schema(op).family == OpFamily::norm) {
    if (op == OpKind::batch_norm) return false;
    for (size_t k = 1; k < inputs.size(); ++k)
      if (inputs[k] && !is_act(inputs[k]->dtype)) return false;
    return is_act(x->dtype);
  }
  if (op == OpKind::softmax || op == OpKind::log_softmax || op == OpKind::argmax) return is_act(x->dtype);
  return false;
}

Status record_norm(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                   const Attrs& attrs) {
  switch (op) {
    case OpKind::rms_norm:
    case OpKind::layer_norm: return record_row_norm(rec, op, in, out[0], attrs);
    case OpKind::softmax:
    case OpKind::log_softmax: return record_axis_reduce(rec, op, in, out[0], attrs);
    case OpKind::argmax: return record_argmax(rec, in, out[0], attrs);
    default: return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
  }
}

}  // namespace vrun::vulkan
