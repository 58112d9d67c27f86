#include "kernels/ops/views.h"

#include <algorithm>
#include <limits>

namespace vrun {

namespace {

TensorView with_offset(const TensorView& x, int64_t elems) {
  TensorView v = x;
  const int es = dtype_elem_size(x.dtype);
  v.data = static_cast<char*>(x.data) + elems * (es ? es : 1);
  return v;
}

// torch's rule: a view of the new shape exists when each group of new dims maps onto a run of
// old dims that is contiguous with respect to itself.
bool view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape, Strides* out) {
  if (old_shape.numel() == 0 || new_shape.numel() == 0) {
    *out = contiguous_strides(new_shape);
    return true;
  }
  int view_d = new_shape.rank - 1;
  int64_t chunk_base_stride = old_shape.rank ? old_strides[old_shape.rank - 1] : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int tensor_d = old_shape.rank - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 ||
        (old_shape[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Status bad(OpKind op, const auto&... parts) { return err(ErrorCode::kInvalidArgument, op_name(op), ": ", parts...); }

// The "axis" attribute as an index into x's dims.
Result<int> axis_of(OpKind op, const TensorView& x, const Attrs& attrs) {
  const int axis = normalize_axis(attrs.i("axis"), x.rank());
  if (axis < 0) return bad(op, "axis ", attrs.i("axis"), " out of range for rank ", x.rank());
  return axis;
}

Result<TensorView> reshape_view(OpKind op, const TensorView& x, const Attrs& attrs) {
  const int rank = x.rank();
  const auto& req = attrs.ints("shape");
  if (req.size() > static_cast<size_t>(kMaxRank)) return bad(op, "rank ", req.size(), " exceeds ", kMaxRank);
  Shape s;
  s.rank = static_cast<int>(req.size());
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.rank; ++i) {
    int64_t d = req[i];
    if (d == 0) {
      if (i >= rank) return bad(op, "shape entry ", i, " is 0 (keep) but the input has rank ", rank);
      d = x.shape[i];
    }
    if (d == -1) {
      if (infer >= 0) return bad(op, "more than one -1 in shape");
      infer = i;
      continue;
    }
    if (d < 0) return bad(op, "negative size ", d, " in shape");
    s[i] = d;
    if (__builtin_mul_overflow(known, d, &known)) return bad(op, "target shape's element count overflows 64 bits");
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return bad(op, "cannot infer -1: ", x.numel(), " elements do not divide by ", known);
    s[infer] = x.numel() / known;
  }
  if (s.numel() != x.numel())
    return bad(op, "input ", x.shape.str(), " has ", x.numel(), " elements, target ", s.str(), " has ", s.numel());
  TensorView v = x;
  v.shape = s;
  if (is_quantized(x.dtype)) {
    if (!x.is_contiguous() || (s.rank && s[s.rank - 1] % kQuantBlock))
      return err(ErrorCode::kUnsupported, "reshape: block-quantised rows must stay whole");
    v.strides = contiguous_strides(s);
  } else if (!view_strides(x.shape, x.strides, s, &v.strides)) {
    return err(ErrorCode::kUnsupported, "reshape: ", x.shape.str(), " -> ", s.str(),
               " is not expressible as a view of this layout (needs a copy)");
  }
  return v;
}

Result<TensorView> permute_view(OpKind op, const TensorView& x, const Attrs& attrs) {
  const int rank = x.rank();
  const auto& perm = attrs.ints("perm");
  if (static_cast<int>(perm.size()) != rank) return bad(op, "perm has ", perm.size(), " entries for rank ", rank);
  TensorView v = x;
  bool seen[kMaxRank] = {};
  for (int i = 0; i < rank; ++i) {
    const int p = normalize_axis(perm[i], rank);
    if (p < 0 || seen[p]) return bad(op, "perm is not a permutation of 0..", rank - 1);
    seen[p] = true;
    v.shape[i] = x.shape[p];
    v.strides[i] = x.strides[p];
  }
  return v;
}

Result<TensorView> slice_view(OpKind op, const TensorView& x, const Attrs& attrs) {
  VRUN_ASSIGN_OR_RETURN(const int axis, axis_of(op, x, attrs));
  const int64_t dim = x.shape[axis];
  int64_t start = attrs.i("start"), end = attrs.i("end");
  const int64_t step = attrs.i("step");
  if (step <= 0) return bad(op, "step must be positive, got ", step);
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  start = std::clamp<int64_t>(start, 0, dim);
  end = std::clamp<int64_t>(end, start, dim);
  TensorView v = with_offset(x, start * x.strides[axis]);
  v.shape[axis] = (end - start + step - 1) / step;
  v.strides[axis] = x.strides[axis] * step;
  return v;
}

Result<TensorView> select_view(OpKind op, const TensorView& x, const Attrs& attrs) {
  const int rank = x.rank();
  VRUN_ASSIGN_OR_RETURN(const int axis, axis_of(op, x, attrs));
  int64_t index = attrs.i("index");
  if (index < 0) index += x.shape[axis];
  if (index < 0 || index >= x.shape[axis])
    return bad(op, "index ", attrs.i("index"), " out of range for dim ", axis, " of size ", x.shape[axis]);
  TensorView v = with_offset(x, index * x.strides[axis]);
  v.shape.rank = rank - 1;
  for (int i = axis; i < rank - 1; ++i) {
    v.shape[i] = x.shape[i + 1];
    v.strides[i] = x.strides[i + 1];
  }
  return v;
}

Status split_view(OpKind op, const TensorView& x, const Attrs& attrs, std::vector<TensorView>* out) {
  VRUN_ASSIGN_OR_RETURN(const int axis, axis_of(op, x, attrs));
  const auto& sizes = attrs.ints("sizes");
  if (sizes.empty()) return bad(op, "sizes is empty");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return bad(op, "negative size ", s);
    if (s > x.shape[axis] - total) return bad(op, "sizes add up to more than dim ", axis, "'s size ", x.shape[axis]);
    total += s;
  }
  if (total != x.shape[axis])
    return bad(op, "sizes add up to ", total, " but dim ", axis, " has size ", x.shape[axis]);
  int64_t at = 0;
  for (int64_t s : sizes) {
    TensorView v = with_offset(x, at * x.strides[axis]);
    v.shape[axis] = s;
    out->push_back(v);
    at += s;
  }
  return Status::ok();
}

Result<TensorView> expand_view(OpKind op, const TensorView& x, const Attrs& attrs) {
  const int rank = x.rank();
  const auto& req = attrs.ints("shape");
  const int nr = static_cast<int>(req.size());
  if (nr < rank || nr > kMaxRank) return bad(op, "target rank ", nr, " is below input rank ", rank);
  TensorView v = x;
  v.shape.rank = nr;
  for (int i = 0; i < nr; ++i) {
    const int ii = i - (nr - rank);
    const int64_t in_dim = ii >= 0 ? x.shape[ii] : 1;
    const int64_t in_stride = ii >= 0 ? x.strides[ii] : 0;
    int64_t d = req[i] == -1 ? in_dim : req[i];
    if (ii < 0 && req[i] == -1) return bad(op, "-1 for a new leading dim ", i);
    if (d == in_dim) {
      v.shape[i] = d;
      v.strides[i] = in_stride;
    } else if (in_dim == 1 && d >= 0) {
      v.shape[i] = d;
      v.strides[i] = 0;
    } else {
      return bad(op, "cannot expand dim ", i, " of size ", in_dim, " to ", d, " (input ", x.shape.str(), ")");
    }
  }
  return v;
}

Result<TensorView> rel_shift_view(OpKind op, const TensorView& x) {
  const int rank = x.rank();
  if (rank < 2) return bad(op, "needs rank >= 2, got ", rank);
  const int64_t t = x.shape[rank - 2], w = x.shape[rank - 1];
  if (w != 2 * t - 1) return bad(op, "last dim must be 2T - 1 = ", 2 * t - 1, " for T = ", t, ", got ", w);
  // y[i, j] = x[i, j - i + T - 1]: start at column T - 1 and step one column left per row.
  TensorView v = with_offset(x, (t - 1) * x.strides[rank - 1]);
  v.shape[rank - 1] = t;
  v.strides[rank - 2] = x.strides[rank - 2] - x.strides[rank - 1];
  return v;
}

// The views with one output.
Result<TensorView> one_view(OpKind op, const TensorView& x, const Attrs& attrs) {
  switch (op) {
    case OpKind::reshape:
      return reshape_view(op, x, attrs);
    case OpKind::permute:
      return permute_view(op, x, attrs);
    case OpKind::slice:
      return slice_view(op, x, attrs);
    case OpKind::select:
      return select_view(op, x, attrs);
    case OpKind::expand:
      return expand_view(op, x, attrs);
    case OpKind::rel_shift:
      return rel_shift_view(op, x);
    default:
      return err(ErrorCode::kInternal, op_name(op), " is not a view op");
  }
}

}  // namespace

Status compute_view(OpKind op, const TensorView& x, const Attrs& attrs, std::vector<TensorView>* out) {
  out->clear();
  if (is_quantized(x.dtype) && op != OpKind::reshape)
    return err(ErrorCode::kUnsupported, op_name(op), ": views of block-quantised ", dtype_name(x.dtype),
               " tensors are not supported (only reshape)");
  if (op == OpKind::split) return split_view(op, x, attrs, out);
  VRUN_ASSIGN_OR_RETURN(const TensorView v, one_view(op, x, attrs));
  out->push_back(v);
  return Status::ok();
}

}  // namespace vrun
