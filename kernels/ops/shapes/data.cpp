// Shapes of the data family: copy, concat, pad, embedding, slice_update, glu.
#include <string>
#include <vector>

#include "kernels/ops/shape_infer.h"

namespace vrun {

namespace {

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

Status infer_concat(const std::vector<const TensorDesc*>& in, const Attrs& attrs, std::vector<TensorDesc>* out) {
  if (in.empty()) return err(ErrorCode::kInvalidArgument, "concat: needs at least one input");
  for (size_t k = 0; k < in.size(); ++k)
    if (!in[k]) return err(ErrorCode::kInvalidArgument, "concat: input x[", k, "] is missing");
  const TensorDesc& first = *in[0];
  if (is_quantized(first.dtype))
    return err(ErrorCode::kUnsupported, "concat: block-quantised dtype ", dtype_name(first.dtype), " is not supported");
  const int rank = first.shape.rank;
  const int64_t axis = attrs.i("axis");
  const int ax = normalize_axis(axis, rank);
  if (ax < 0) return err(ErrorCode::kInvalidArgument, "concat: axis ", axis, " out of range for x[0] ", first.shape.str());
  Shape s = first.shape;
  for (size_t k = 1; k < in.size(); ++k) {
    const TensorDesc& x = *in[k];
    if (x.dtype != first.dtype)
      return err(ErrorCode::kInvalidArgument, "concat: x[", k, "] has dtype ", dtype_name(x.dtype), ", x[0] has ",
                 dtype_name(first.dtype));
    if (x.shape.rank != rank)
      return err(ErrorCode::kInvalidArgument, "concat: x[", k, "] ", x.shape.str(), " has rank ", x.shape.rank,
                 ", x[0] ", first.shape.str(), " has rank ", rank);
    for (int d = 0; d < rank; ++d)
      if (d != ax && x.shape[d] != first.shape[d])
        return err(ErrorCode::kInvalidArgument, "concat: x[", k, "] ", x.shape.str(), " and x[0] ", first.shape.str(),
                   " differ in dim ", d, " (only axis ", ax, " may differ)");
    s[ax] += x.shape[ax];
  }
  out->push_back({first.dtype, s});
  return Status::ok();
}

Status infer_pad(const TensorDesc& x, const Attrs& attrs, std::vector<TensorDesc>* out) {
  if (is_quantized(x.dtype))
    return err(ErrorCode::kUnsupported, "pad: block-quantised dtype ", dtype_name(x.dtype), " is not supported");
  const std::vector<int64_t>& pads = attrs.ints("pads");
  const std::string& mode = attrs.s("mode");
  if (mode != "constant" && mode != "reflect" && mode != "replicate")
    return err(ErrorCode::kInvalidArgument, "pad: mode must be constant, reflect or replicate, got '", mode, "'");
  if (pads.size() % 2 != 0 || static_cast<int>(pads.size() / 2) > x.shape.rank)
    return err(ErrorCode::kInvalidArgument, "pad: pads must hold an even number of values, at most 2 per dim of x ",
               x.shape.str(), ", got ", pads.size());
  Shape s = x.shape;
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    const int d = x.shape.rank - 1 - static_cast<int>(p);
    const int64_t before = pads[2 * p], after = pads[2 * p + 1], n = x.shape[d];
    if (mode != "constant" && (before < 0 || after < 0))
      return err(ErrorCode::kInvalidArgument, "pad: ", mode, " padding of dim ", d, " must be >= 0, got [", before,
                 ", ", after, "]");
    if (mode == "reflect" && (before >= n || after >= n))
      return err(ErrorCode::kInvalidArgument, "pad: reflect padding [", before, ", ", after, "] of dim ", d,
                 " must be less than its size ", n);
    if (mode == "replicate" && n == 0 && (before > 0 || after > 0))
      return err(ErrorCode::kInvalidArgument, "pad: replicate cannot pad the empty dim ", d, " of x ", x.shape.str());
    s[d] = n + before + after;
    if (s[d] < 0)
      return err(ErrorCode::kInvalidArgument, "pad: pads [", before, ", ", after, "] leave dim ", d, " of x ",
                 x.shape.str(), " with negative size ", s[d]);
  }
  out->push_back({x.dtype, s});
  return Status::ok();
}

Status infer_embedding(const TensorDesc& table, const TensorDesc& ids, const Attrs& attrs, std::vector<TensorDesc>* out) {
  if (table.shape.rank != 2)
    return err(ErrorCode::kInvalidArgument, "embedding: table must be [V, D], got ", table.shape.str());
  if (ids.dtype != DType::i32 && ids.dtype != DType::i64)
    return err(ErrorCode::kInvalidArgument, "embedding: ids must be i32 or i64, got ", dtype_name(ids.dtype));
  const auto to = dtype_from_name(attrs.s("dtype"));
  if (!to) return err(ErrorCode::kInvalidArgument, "embedding: unknown dtype '", attrs.s("dtype"), "'");
  const bool float_out = is_float(*to);
  if (!(float_out && (is_float(table.dtype) || is_quantized(table.dtype))) && *to != table.dtype)
    return err(ErrorCode::kUnsupported, "embedding: table ", dtype_name(table.dtype), " to output ", attrs.s("dtype"),
               " (a float output needs a float or block-quantised table, other outputs the table's dtype)");
  if (is_quantized(table.dtype) && table.shape[1] % kQuantBlock != 0)
    return err(ErrorCode::kInvalidArgument, "embedding: ", dtype_name(table.dtype), " table ", table.shape.str(),
               " needs D a multiple of ", kQuantBlock);
  if (ids.shape.rank + 1 > kMaxRank)
    return err(ErrorCode::kInvalidArgument, "embedding: ids ", ids.shape.str(), " has too high a rank");
  Shape s = ids.shape;
  s.dims[s.rank++] = table.shape[1];
  out->push_back({*to, s});
  return Status::ok();
}

Status infer_slice_update(const TensorDesc& state, const TensorDesc& src, const Attrs& attrs,
                          std::vector<TensorDesc>* out) {
  if (is_quantized(state.dtype))
    return err(ErrorCode::kUnsupported, "slice_update: block-quantised state ", dtype_name(state.dtype), " is not supported");
  if (src.dtype != state.dtype && !(is_activation(src.dtype) && is_activation(state.dtype)))
    return err(ErrorCode::kInvalidArgument, "slice_update: src has dtype ", dtype_name(src.dtype), ", state has ",
               dtype_name(state.dtype), " (float types convert; others must match)");
  const int rank = state.shape.rank;
  if (src.shape.rank != rank)
    return err(ErrorCode::kInvalidArgument, "slice_update: src ", src.shape.str(), " and state ", state.shape.str(),
               " differ in rank");
  const int64_t axis = attrs.i("axis");
  const int ax = normalize_axis(axis, rank);
  if (ax < 0) return err(ErrorCode::kInvalidArgument, "slice_update: axis ", axis, " out of range for state ", state.shape.str());
  for (int d = 0; d < rank; ++d)
    if (d != ax && src.shape[d] != state.shape[d])
      return err(ErrorCode::kInvalidArgument, "slice_update: src ", src.shape.str(), " and state ", state.shape.str(),
                 " differ in dim ", d, " (only axis ", ax, " may differ)");
  // The start is a run-time value (a cache position): the kernel checks it against the state.
  // Here only the sizes: the builder samples positions and lengths together, not their sum.
  if (src.shape[ax] > state.shape[ax])
    return err(ErrorCode::kInvalidArgument, "slice_update: ", src.shape[ax], " rows along axis ", ax,
               " cannot fit the state's ", state.shape[ax], " (state ", state.shape.str(), ")");
  out->push_back(state);
  return Status::ok();
}

// slice_update's rotation of src as written: rope's frequencies for the whole last dim, a seq
// axis that is not the last, rope_heads counted along dim 1 (not the seq axis).
Status check_slice_update_rope(const TensorDesc& src, const TensorDesc* inv_freq, const Attrs& attrs) {
  if (!inv_freq) return Status::ok();
  const int r = src.shape.rank;
  const int ax = normalize_axis(attrs.i("axis"), r);
  if (!is_activation(src.dtype))
    return err(ErrorCode::kInvalidArgument, "slice_update: rotating src needs a float src, got ", dtype_name(src.dtype));
  if (ax < 0 || ax == r - 1)
    return err(ErrorCode::kInvalidArgument, "slice_update: rotating src needs a seq axis before the last, got axis ",
               attrs.i("axis"), " for src ", src.shape.str());
  const int64_t d = src.shape[r - 1];
  if (d % 2 != 0)
    return err(ErrorCode::kInvalidArgument, "slice_update: rotating src needs an even last dim, got src ", src.shape.str());
  VRUN_RETURN_IF_ERROR(check_rope_frequencies("slice_update", "rope_mode", attrs, *inv_freq, d));
  const int64_t heads = attrs.i("rope_heads");
  if (heads < 0 || (heads > 0 && (r < 3 || ax == 1 || heads > src.shape[1])))
    return err(ErrorCode::kInvalidArgument, "slice_update: rope_heads ", heads,
               " must be 0 or count along dim 1 of src (rank >= 3, not the seq axis), for src ", src.shape.str());
  return Status::ok();
}

Status infer_glu(const TensorDesc& x, const Attrs& attrs, std::vector<TensorDesc>* out) {
  if (!is_activation(x.dtype))
    return err(ErrorCode::kUnsupported, "glu: x has dtype ", dtype_name(x.dtype), ", expected f32, f16 or bf16");
  const int64_t axis = attrs.i("axis");
  const int ax = normalize_axis(axis, x.shape.rank);
  if (ax < 0) return err(ErrorCode::kInvalidArgument, "glu: axis ", axis, " out of range for x ", x.shape.str());
  if (x.shape[ax] % 2 != 0)
    return err(ErrorCode::kInvalidArgument, "glu: dim ", ax, " of x ", x.shape.str(), " must be even, got ", x.shape[ax]);
  Shape s = x.shape;
  s[ax] /= 2;
  out->push_back({x.dtype, s});
  return Status::ok();
}

}  // namespace

Status infer_shapes_data(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                         std::vector<TensorDesc>* out) {
  const OpSchema& s = op_schema(op);
  if (op == OpKind::concat) return infer_concat(in, attrs, out);
  const size_t n = s.inputs.size();
  if (in.size() > n) return err(ErrorCode::kInvalidArgument, s.name, ": expected at most ", n, " inputs, got ", in.size());
  for (size_t k = 0; k < n; ++k)
    if ((k >= in.size() || !in[k]) && !s.inputs[k].optional)
      return err(ErrorCode::kInvalidArgument, s.name, ": input ", s.inputs[k].name, " is missing");
  switch (op) {
    case OpKind::copy: out->push_back(*in[0]); return Status::ok();
    case OpKind::pad: return infer_pad(*in[0], attrs, out);
    case OpKind::embedding: return infer_embedding(*in[0], *in[1], attrs, out);
    case OpKind::slice_update:
      if (in.size() > 2 && in[2] && in[2]->shape.numel() > 1) {  // one offset per row of src along axis
        const int ax = normalize_axis(attrs.i("axis"), in[1]->shape.rank);
        if (ax < 0) return err(ErrorCode::kInvalidArgument, "slice_update: axis ", attrs.i("axis"), " invalid for src ", in[1]->shape.str());
        VRUN_RETURN_IF_ERROR(check_device_positions(in[2], "slice_update", "offset", in[1]->shape[ax], "row of src along axis"));
        if (in.size() > 3 && in[3])
          return err(ErrorCode::kInvalidArgument, "slice_update: rows written apart (an offset per row) do not rotate as written");
      } else {
        VRUN_RETURN_IF_ERROR(check_device_scalar(in.size() > 2 ? in[2] : nullptr, "slice_update", "offset"));
      }
      VRUN_RETURN_IF_ERROR(check_slice_update_rope(*in[1], in.size() > 3 ? in[3] : nullptr, attrs));
      return infer_slice_update(*in[0], *in[1], attrs, out);
    case OpKind::glu: return infer_glu(*in[0], attrs, out);
    default: return err(ErrorCode::kInternal, "infer_shapes_data called for ", s.name);
  }
}

}  // namespace vrun
