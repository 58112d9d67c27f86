// Shapes of the reduce family: reductions over a set of axes (empty = all) with keepdim,
// argmax along one axis (i32 output), softmax/log_softmax along one axis (same shape).
#include <vector>

#include "kernels/ops/shape_infer.h"

namespace vrun {

namespace {

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

Status check_keepdim(const char* name, int64_t keepdim) {
  if (keepdim != 0 && keepdim != 1)
    return err(ErrorCode::kInvalidArgument, name, ": keepdim must be 0 or 1, got ", keepdim);
  return Status::ok();
}

}  // namespace

Status infer_shapes_reduce(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                           std::vector<TensorDesc>* out) {
  const char* name = op_name(op);
  if (in.size() != 1 || !in[0]) return err(ErrorCode::kInvalidArgument, name, ": expected one input x, got ", in.size());
  const TensorDesc& x = *in[0];
  if (!is_activation(x.dtype))
    return err(ErrorCode::kUnsupported, name, ": x has dtype ", dtype_name(x.dtype), ", expected f32, f16 or bf16");
  const int rank = x.shape.rank;

  switch (op) {
    case OpKind::softmax:
    case OpKind::log_softmax: {
      const int64_t axis = attrs.i("axis");
      if (normalize_axis(axis, rank) < 0)
        return err(ErrorCode::kInvalidArgument, name, ": axis ", axis, " out of range for x ", x.shape.str());
      out->push_back(x);
      return Status::ok();
    }
    case OpKind::argmax: {
      const int64_t axis = attrs.i("axis");
      const int ax = normalize_axis(axis, rank);
      if (ax < 0) return err(ErrorCode::kInvalidArgument, name, ": axis ", axis, " out of range for x ", x.shape.str());
      VRUN_RETURN_IF_ERROR(check_keepdim(name, attrs.i("keepdim")));
      if (attrs.i("nan_flag") != 0 && attrs.i("nan_flag") != 1)
        return err(ErrorCode::kInvalidArgument, name, ": nan_flag must be 0 or 1, got ", attrs.i("nan_flag"));
      if (x.shape[ax] == 0)
        return err(ErrorCode::kInvalidArgument, name, ": axis ", axis, " of x ", x.shape.str(), " is empty");
      Shape s;
      for (int d = 0; d < rank; ++d) {
        if (d != ax) s.dims[s.rank++] = x.shape[d];
        else if (attrs.i("keepdim")) s.dims[s.rank++] = 1;
      }
      out->push_back({DType::i32, s});
      return Status::ok();
    }
    case OpKind::reduce_sum:
    case OpKind::reduce_mean:
    case OpKind::reduce_max:
    case OpKind::reduce_min: {
      VRUN_RETURN_IF_ERROR(check_keepdim(name, attrs.i("keepdim")));
      std::vector<bool> reduced(static_cast<size_t>(rank), false);
      const std::vector<int64_t>& axes = attrs.ints("axes");
      if (axes.empty()) reduced.assign(static_cast<size_t>(rank), true);
      for (int64_t a : axes) {
        const int ax = normalize_axis(a, rank);
        if (ax < 0) return err(ErrorCode::kInvalidArgument, name, ": axis ", a, " out of range for x ", x.shape.str());
        if (reduced[ax]) return err(ErrorCode::kInvalidArgument, name, ": axis ", a, " given twice");
        reduced[ax] = true;
      }
      const bool needs_elements = op == OpKind::reduce_max || op == OpKind::reduce_min;
      Shape s;
      for (int d = 0; d < rank; ++d) {
        if (reduced[d] && needs_elements && x.shape[d] == 0)
          return err(ErrorCode::kInvalidArgument, name, ": cannot reduce over the empty axis ", d, " of x ",
                     x.shape.str());
        if (!reduced[d]) s.dims[s.rank++] = x.shape[d];
        else if (attrs.i("keepdim")) s.dims[s.rank++] = 1;
      }
      out->push_back({x.dtype, s});
      return Status::ok();
    }
    default: return err(ErrorCode::kInternal, "infer_shapes_reduce called for ", name);
  }
}

}  // namespace vrun
