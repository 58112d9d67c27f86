// rope, and the attention family's support predicate and recording entry; sdpa's kernels are
// recorded by ops_sdpa.cpp.
#include <string>
#include <vector>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {

// One rope.comp dispatch: x (dense) rotated into y, the position pos plus the i32 at *offset
// when given. OUT_AT (cap > 0): y is a state with cap rows along the seq axis, x's row s written
// to row pos + s, the offset clamped so the rows stay inside it.
struct RopeDispatch {
  int64_t seq_inner = 1, rd = 0, pos = 0;
  int64_t H = 1, heads = 0, heads_inner = 1;  // the head axis: extent, rows rotated (0: all), stride
  int64_t cap = 0, max_off = 0;
  int64_t outer_stride = 0;  // cap > 0: elements between the state's rows before the seq axis
  int seq_axis = 0;
  bool interleaved = false;
};

Status dispatch_rope(Recorder& rec, const DeviceView& y, const DeviceView& x, const DeviceView& f, const DeviceView* offset,
                     const RopeDispatch& p) {
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  DeviceView at;
  if (offset) {
    VRUN_ASSIGN_OR_RETURN(at, rec.dense_view(*offset));
  }
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&f, false}, {offset ? &at : nullptr, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(n).u(x.shape[x.shape.rank - 1]).u(x.shape[p.seq_axis]).u(p.seq_inner).u(p.rd).u(p.pos);
  pw.u(offs[0]).u(offs[1]).u(offs[2]).u(p.H).u(p.heads).u(offs[3]).u(p.heads_inner).u(p.cap).u(p.max_off).u(p.outer_stride);
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(n) + 255) / 256, &gx, &gy);
  return rec.dispatch("rope",
                      {p.interleaved ? 1 : 0, dt_code(x.dtype), dt_code(f.dtype), dt_code(y.dtype),
                       !offset ? 0 : at.numel() > 1 ? 2 : 1,
                       p.cap > 0 ? 1 : 0},
                      bindings, pw.w, pw.bytes(), gx, gy, 1);
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
  RopeDispatch p;
  for (int i = axis + 1; i < r; ++i) p.seq_inner *= x.shape[i];
  p.seq_axis = axis;
  p.rd = rd;
  p.pos = attrs.i("pos");
  p.H = x.shape[r - 2];  // the head axis is the one before D
  p.heads = attrs.i("heads");
  p.heads_inner = D;
  p.interleaved = attrs.s("mode") == "interleaved";
  // A position held on the device is added to pos.
  return dispatch_rope(rec, y, x, f, in.size() > 2 && in[2].present() ? &in[2] : nullptr, p);
}

}  // namespace

Status record_rope_into(Recorder& rec, const DeviceView& state, const DeviceView& src, const DeviceView& inv_freq,
                        const DeviceView* offset, int axis, int64_t start, bool interleaved, int64_t heads) {
  VRUN_ASSIGN_OR_RETURN(DeviceView x, rec.dense_view(src));
  VRUN_ASSIGN_OR_RETURN(DeviceView f, rec.dense_view(inv_freq));
  const int r = x.shape.rank;
  RopeDispatch p;
  for (int i = axis + 1; i < r; ++i) p.seq_inner *= x.shape[i];
  // The state's rows from the seq axis on are dense; the rows before it may lie further apart
  // (one slot's rows of a batched cache), as long as they collapse to one stride.
  bool dense_rows = state.strides[axis] == p.seq_inner && state.shape.rank == r;
  for (int i = axis + 1; i < r && dense_rows; ++i) dense_rows = state.strides[i] == (i + 1 < r ? state.strides[i + 1] * state.shape[i + 1] : 1);
  for (int i = 0; i + 1 < axis && dense_rows; ++i)
    dense_rows = state.shape[i] == 1 || state.strides[i] == state.strides[i + 1] * state.shape[i + 1];
  if (!dense_rows)
    return err(ErrorCode::kInvalidArgument, "vulkan: slice_update rotating into a state ", state.shape.str(),
               " whose rows are not dense from the seq axis on");
  p.outer_stride = axis > 0 ? state.strides[axis - 1] : 0;
  for (int i = 2; i < r; ++i) p.heads_inner *= x.shape[i];  // the head axis is dim 1
  p.seq_axis = axis;
  p.rd = x.shape[r - 1];
  p.pos = start;
  p.H = heads > 0 ? x.shape[1] : 1;
  p.heads = heads;
  p.cap = state.shape[axis];
  p.max_off = p.cap - x.shape[axis] - start;
  p.interleaved = interleaved;
  return dispatch_rope(rec, state, x, f, offset, p);
}

bool supports_attention(const Context&, OpKind op, const std::vector<const TensorDesc*>& inputs,
                        const Attrs& attrs) {
  const TensorDesc* x = inputs[0];
  auto in = [&](size_t k) { return input_at(inputs, k); };
  if (op == OpKind::sdpa) {
    const TensorDesc *k = in(1), *v = in(2), *m = in(3);
    if (!k || !v || !is_act(x->dtype) || !is_act(k->dtype) || !is_act(v->dtype)) return false;
    if (x->shape.rank != 4 || x->shape[3] > 256 || v->shape.rank != 4 || v->shape[3] > 256) return false;
    if (attrs.i("causal") && x->shape[2] > k->shape[2]) return false;
    if (!attrs.ints("window").empty() && (in(4) || !sdpa_window_fits(attrs.ints("window")))) return false;
    return !m || is_act(m->dtype) || m->dtype == DType::bool_ || m->dtype == DType::u8;
  }
  // decode_block, decode_layer: their kernel, or the kernels they stand for, take any shape the
  // op's shape function accepts.
  if (op == OpKind::decode_block || op == OpKind::decode_layer) return true;
  if (op == OpKind::rope) {
    const TensorDesc* f = in(1);
    return f && is_act(x->dtype) && is_act(f->dtype) &&
           (attrs.s("mode") == "half" || attrs.s("mode") == "interleaved");
  }
  return false;
}

Status record_attention(Recorder& rec, OpKind op, const std::vector<DeviceView>& in,
                        const std::vector<DeviceView>& out, const Attrs& attrs) {
  if (op == OpKind::sdpa) return record_sdpa(rec, in, out[0], attrs);
  if (op == OpKind::rope) return record_rope(rec, in, out[0], attrs);
  if (op == OpKind::decode_block) return record_decode_block(rec, in, out[0], attrs);
  if (op == OpKind::decode_layer) return record_decode_layer(rec, in, out, attrs);
  return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
}

}  // namespace vrun::vulkan
