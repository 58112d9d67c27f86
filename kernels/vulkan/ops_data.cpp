// Data movement: copy, concat, slice_update and glu are strided elementwise passes over views of
// their operands; embedding gathers rows (block-quantised tables included).
#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

// v restricted to [start, start + len) along axis.
DeviceView narrow(const DeviceView& v, int axis, int64_t start, int64_t len) {
  DeviceView r = v;
  r.offset += static_cast<uint64_t>(start * v.strides[axis] * dtype_elem_size(v.dtype));
  r.shape[axis] = len;
  return r;
}

// A pad the device does: constant zeros around the input, no dim cropped.
bool zero_pad(const Attrs& attrs) {
  if (attrs.s("mode") != "constant" || attrs.f("value") != 0) return false;
  for (int64_t v : attrs.ints("pads"))
    if (v < 0) return false;
  return true;
}

Status record_embedding(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y) {
  const DeviceView& table = in[0];
  VRUN_ASSIGN_OR_RETURN(DeviceView ids, rec.dense_view(in[1]));
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  std::vector<Binding> bindings = {{&y, true}, {&table, false}, {&ids, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(n).u(table.shape[1]).u(table.shape[0]).u(offs[0]).u(offs[1]).u(offs[2]);
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(n) + 255) / 256, &gx, &gy);
  return rec.dispatch("embedding", {dt_code(table.dtype), dt_code(ids.dtype), dt_code(y.dtype)}, bindings, pw.w,
                      pw.bytes(), gx, gy, 1);
}

}  // namespace

bool supports_data(const Context&, OpKind op, const std::vector<const TensorDesc*>& inputs,
                   const Attrs& attrs) {
  const TensorDesc* x = inputs[0];
  auto in = [&](size_t k) { return input_at(inputs, k); };
  switch (op) {
    case OpKind::copy:
      return is_copyable(x->dtype);
    case OpKind::pad: {
      // Zeros around a copy: constant mode, value 0, no cropping, and an output of whole 4-byte
      // words (the fill's unit): 4- and 8-byte dtypes, or 2-byte ones with an even last dim.
      if (!zero_pad(attrs) || !is_copyable(x->dtype)) return false;
      const std::vector<int64_t>& pads = attrs.ints("pads");
      const int64_t es = dtype_elem_size(x->dtype);
      if (es >= 4) return true;
      if (es != 2 || x->shape.rank < 1) return false;
      const int64_t last = x->shape[x->shape.rank - 1] + (pads.size() >= 2 ? pads[0] + pads[1] : 0);
      return last % 2 == 0;
    }
    case OpKind::concat:
      for (const TensorDesc* d : inputs)
        if (!d || d->dtype != x->dtype || !is_copyable(d->dtype)) return false;
      return true;
    case OpKind::slice_update:
      if (in(3))  // rotating as it writes: float state and src
        return in(1) && is_act(x->dtype) && is_act(in(1)->dtype) && in(3)->dtype == DType::f32;
      return in(1) && is_copyable(x->dtype) &&
             (in(1)->dtype == x->dtype || (is_act(x->dtype) && is_act(in(1)->dtype)));
    case OpKind::glu:
      return is_act(x->dtype) && (attrs.s("act") == "sigmoid" || attrs.s("act") == "silu");
    case OpKind::embedding: {
      const TensorDesc* ids = in(1);
      auto to = dtype_from_name(attrs.s("dtype"));
      return ids && is_index(ids->dtype) && is_weight(x->dtype) && to && is_act(*to);
    }
    default:
      return false;
  }
}

Status record_data(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                   const Attrs& attrs) {
  const DeviceView& y = out[0];
  switch (op) {
    case OpKind::copy: return record_eltwise(rec, OP_COPY, y, &in[0], nullptr, nullptr);
    case OpKind::concat: {
      const int axis = normalize_axis(attrs.i("axis"), y.shape.rank);
      if (axis < 0) return err(ErrorCode::kInvalidArgument, "vulkan: concat axis ", attrs.i("axis"), " out of range");
      int64_t at = 0;
      for (const auto& x : in) {
        const DeviceView dst = narrow(y, axis, at, x.shape[axis]);
        VRUN_RETURN_IF_ERROR(record_eltwise(rec, OP_COPY, dst, &x, nullptr, nullptr));
        at += x.shape[axis];
      }
      return Status::ok();
    }
    case OpKind::pad: {
      const DeviceView& x = in[0];
      const std::vector<int64_t>& pads = attrs.ints("pads");
      if (!zero_pad(attrs))
        return err(ErrorCode::kUnsupported, "vulkan: no pad kernel for mode ", attrs.s("mode"), " (value ", attrs.f("value"),
                   ") or cropping: only zeros around the input");
      const uint64_t at = y.buffer.offset + y.offset;
      if (!y.is_contiguous() || at % 4 != 0 || y.dense_bytes() % 4 != 0)
        return err(ErrorCode::kInternal, "vulkan: pad into ", y.shape.str(), " at byte ", at, ": not whole aligned 4-byte words");
      VRUN_RETURN_IF_ERROR(rec.record_zero(y.buffer, y.offset, y.dense_bytes()));
      DeviceView inner = y;
      for (size_t p = 0; p < pads.size() / 2; ++p) {
        const int d = y.shape.rank - 1 - static_cast<int>(p);
        inner = narrow(inner, d, pads[2 * p], x.shape[d]);
      }
      return record_eltwise(rec, OP_COPY, inner, &x, nullptr, nullptr);
    }
    case OpKind::slice_update: {
      const DeviceView &state = in[0], &src = in[1];
      const int axis = normalize_axis(attrs.i("axis"), state.shape.rank);
      const int64_t start = attrs.i("start");
      const bool scatter = in.size() > 2 && in[2].present() && in[2].numel() > 1;
      if (axis < 0 || start < 0 || (!scatter && start + src.shape[axis] > state.shape[axis]) || start >= state.shape[axis])
        return err(ErrorCode::kInvalidArgument, "vulkan: slice_update of ", src.shape.str(), " at ", start, " on axis ",
                   attrs.i("axis"), " does not fit state ", state.shape.str());
      const bool aliased = state.buffer.buffer == y.buffer.buffer &&
                           state.buffer.offset + state.offset == y.buffer.offset + y.offset;
      if (!aliased) VRUN_RETURN_IF_ERROR(record_eltwise(rec, OP_COPY, y, &state, nullptr, nullptr));
      // start + offset, the offset read on the device (a decode position).
      const DeviceView* offset = in.size() > 2 && in[2].present() ? &in[2] : nullptr;
      if (in.size() > 3 && in[3].present())
        return record_rope_into(rec, y, src, in[3], offset, axis, start, attrs.s("rope_mode") == "interleaved",
                                attrs.i("rope_heads"));
      if (scatter) {  // row r at start + offset[r]: a window of one row, moved per row by its offset
        VRUN_ASSIGN_OR_RETURN(DeviceView index, rec.dense_view(*offset));
        DeviceView rows = narrow(y, axis, start, 1);
        rows.shape[axis] = src.shape[axis];
        rows.strides[axis] = 0;
        return record_copy_at(rec, rows, src, index, y.strides[axis], state.shape[axis] - 1 - start, axis);
      }
      const DeviceView window = narrow(y, axis, start, src.shape[axis]);
      if (offset) {
        VRUN_ASSIGN_OR_RETURN(DeviceView index, rec.dense_view(*offset));
        return record_copy_at(rec, window, src, index, y.strides[axis], state.shape[axis] - src.shape[axis] - start);
      }
      return record_eltwise(rec, OP_COPY, window, &src, nullptr, nullptr);
    }
    case OpKind::glu: {
      const DeviceView& x = in[0];
      const int axis = normalize_axis(attrs.i("axis"), x.shape.rank);
      if (axis < 0 || x.shape[axis] % 2)
        return err(ErrorCode::kInvalidArgument, "vulkan: glu needs an even dim on axis ", attrs.i("axis"), ", got ",
                   x.shape.str());
      const int64_t half = x.shape[axis] / 2;
      const DeviceView a = narrow(x, axis, 0, half), b = narrow(x, axis, half, half);
      return record_eltwise(rec, attrs.s("act") == "silu" ? OP_GLU_SILU : OP_GLU, y, &a, &b, nullptr);
    }
    case OpKind::embedding: return record_embedding(rec, in, y);
    default: return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
  }
}

}  // namespace vrun::vulkan
