// Shape functions of conv1d and conv2d.
#include "kernels/ops/shapes/conv_params.h"
#include "kernels/ops/shape_infer.h"

namespace vrun {

namespace {

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace

// Per spatial dim: stride, dilation, padding before/after. Attribute lists may give one value for
// every dim (or, for padding, one per dim applied to both sides).
Status conv_spatial_params(const char* op, const Attrs& attrs, int nd, int64_t* stride, int64_t* dil,
                           int64_t* pad_lo, int64_t* pad_hi) {
  if (nd == 1) {
    stride[0] = attrs.i("stride");
    dil[0] = attrs.i("dilation");
  } else {
    const auto& s = attrs.ints("stride");
    const auto& d = attrs.ints("dilation");
    if ((s.size() != 1 && s.size() != 2) || (d.size() != 1 && d.size() != 2))
      return err(ErrorCode::kInvalidArgument, op, ": stride and dilation need 1 or 2 values, got ", s.size(), " and ",
                 d.size());
    for (int i = 0; i < 2; ++i) {
      stride[i] = s[s.size() == 1 ? 0 : i];
      dil[i] = d[d.size() == 1 ? 0 : i];
    }
  }
  const auto& p = attrs.ints("padding");
  if (p.size() == 1) {
    for (int i = 0; i < nd; ++i) pad_lo[i] = pad_hi[i] = p[0];
  } else if (static_cast<int>(p.size()) == nd && nd == 2) {
    for (int i = 0; i < nd; ++i) pad_lo[i] = pad_hi[i] = p[i];
  } else if (static_cast<int>(p.size()) == 2 * nd) {
    for (int i = 0; i < nd; ++i) {
      pad_lo[i] = p[2 * i];
      pad_hi[i] = p[2 * i + 1];
    }
  } else {
    return err(ErrorCode::kInvalidArgument, op, ": padding needs ", nd == 1 ? "1 or 2" : "1, 2 or 4", " values, got ",
               p.size());
  }
  for (int i = 0; i < nd; ++i) {
    if (stride[i] < 1) return err(ErrorCode::kInvalidArgument, op, ": stride must be >= 1, got ", stride[i]);
    if (dil[i] < 1) return err(ErrorCode::kInvalidArgument, op, ": dilation must be >= 1, got ", dil[i]);
    if (pad_lo[i] < 0 || pad_hi[i] < 0)
      return err(ErrorCode::kInvalidArgument, op, ": padding must be >= 0, got ", pad_lo[i], ", ", pad_hi[i]);
  }
  return Status::ok();
}

namespace {

Status infer_conv(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                  std::vector<TensorDesc>* out) {
  const char* name = op_name(op);
  const int nd = op == OpKind::conv1d ? 1 : 2;
  const TensorDesc* x = in.size() > 0 ? in[0] : nullptr;
  const TensorDesc* w = in.size() > 1 ? in[1] : nullptr;
  const TensorDesc* b = in.size() > 2 ? in[2] : nullptr;
  if (!x || !w) return err(ErrorCode::kInvalidArgument, name, ": missing input ", x ? "weight" : "x");
  if (!is_activation(x->dtype) || !is_activation(w->dtype))
    return err(ErrorCode::kInvalidArgument, name, ": x and weight must be f32, f16 or bf16, got ", dtype_name(x->dtype),
               " and ", dtype_name(w->dtype));
  if (x->shape.rank != nd + 2)
    return err(ErrorCode::kInvalidArgument, name, ": x must be rank ", nd + 2, ", got ", x->shape.str());
  if (w->shape.rank != nd + 2)
    return err(ErrorCode::kInvalidArgument, name, ": weight must be rank ", nd + 2, ", got ", w->shape.str());
  const int64_t groups = attrs.i("groups");
  const int64_t cin = x->shape[1], cout = w->shape[0], cin_g = w->shape[1];
  if (groups < 1) return err(ErrorCode::kInvalidArgument, name, ": groups must be >= 1, got ", groups);
  if (cin % groups != 0 || cout % groups != 0)
    return err(ErrorCode::kInvalidArgument, name, ": in channels (", cin, ") and out channels (", cout,
               ") must be multiples of groups (", groups, ")");
  if (cin_g * groups != cin)
    return err(ErrorCode::kInvalidArgument, name, ": weight ", w->shape.str(), " expects ", cin_g * groups,
               " in channels (", cin_g, " per group x ", groups, " groups), x ", x->shape.str(), " has ", cin);
  if (b) {
    if (!is_activation(b->dtype) || b->shape.rank != 1 || b->shape[0] != cout)
      return err(ErrorCode::kInvalidArgument, name, ": bias must be float [", cout, "], got ", dtype_name(b->dtype), " ",
                 b->shape.str());
  }
  int64_t stride[2], dil[2], plo[2], phi[2];
  VRUN_RETURN_IF_ERROR(conv_spatial_params(name, attrs, nd, stride, dil, plo, phi));
  TensorDesc y{x->dtype, x->shape};
  y.shape[1] = cout;
  for (int i = 0; i < nd; ++i) {
    const int64_t padded = x->shape[2 + i] + plo[i] + phi[i];
    const int64_t span = dil[i] * (w->shape[2 + i] - 1) + 1;
    if (w->shape[2 + i] < 1 || span > padded)
      return err(ErrorCode::kInvalidArgument, name, ": kernel extent ", span, " (size ", w->shape[2 + i],
                 ", dilation ", dil[i], ") exceeds padded input ", padded, " on spatial dim ", i);
    y.shape[2 + i] = (padded - span) / stride[i] + 1;
  }
  out->push_back(y);
  return Status::ok();
}

}  // namespace

Status pool_output_sizes(const Attrs& attrs, const Shape& x, int64_t* oh, int64_t* ow) {
  int64_t stride[2], dil[2], plo[2], phi[2];
  VRUN_RETURN_IF_ERROR(conv_spatial_params("max_pool2d", attrs, 2, stride, dil, plo, phi));
  const auto& k = attrs.ints("kernel");
  if (k.size() != 1 && k.size() != 2)
    return err(ErrorCode::kInvalidArgument, "max_pool2d: kernel needs 1 or 2 values, got ", k.size());
  const bool ceil_mode = attrs.i("ceil_mode") != 0;
  int64_t* outs[2] = {oh, ow};
  for (int i = 0; i < 2; ++i) {
    const int64_t kk = k[k.size() == 1 ? 0 : i];
    if (kk < 1) return err(ErrorCode::kInvalidArgument, "max_pool2d: kernel must be >= 1, got ", kk);
    if (plo[i] >= (dil[i] * (kk - 1) + 1) || phi[i] >= (dil[i] * (kk - 1) + 1))
      return err(ErrorCode::kInvalidArgument, "max_pool2d: padding [", plo[i], ", ", phi[i],
                 "] must be smaller than the window on spatial dim ", i);
    const int64_t padded = x[2 + i] + plo[i] + phi[i];
    const int64_t span = dil[i] * (kk - 1) + 1;
    if (span > padded)
      return err(ErrorCode::kInvalidArgument, "max_pool2d: window extent ", span, " exceeds padded input ", padded,
                 " on spatial dim ", i);
    int64_t n = (padded - span + (ceil_mode ? stride[i] - 1 : 0)) / stride[i] + 1;
    // A last window must start inside the input or its leading padding.
    if (ceil_mode && (n - 1) * stride[i] >= x[2 + i] + plo[i]) --n;
    *outs[i] = n;
  }
  return Status::ok();
}

Status infer_shapes_conv(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                         std::vector<TensorDesc>* out) {
  if (op == OpKind::max_pool2d) {
    const TensorDesc* x = in.empty() ? nullptr : in[0];
    if (!x) return err(ErrorCode::kInvalidArgument, "max_pool2d: missing input x");
    if (!is_activation(x->dtype) || x->shape.rank != 4)
      return err(ErrorCode::kInvalidArgument, "max_pool2d: x must be f32, f16 or bf16 of rank 4, got ",
                 dtype_name(x->dtype), " ", x->shape.str());
    TensorDesc y{x->dtype, x->shape};
    VRUN_RETURN_IF_ERROR(pool_output_sizes(attrs, x->shape, &y.shape[2], &y.shape[3]));
    out->push_back(y);
    return Status::ok();
  }
  if (op != OpKind::conv1d && op != OpKind::conv2d)
    return err(ErrorCode::kInternal, "infer_shapes_conv: op ", op_name(op), " is not a convolution");
  return infer_conv(op, in, attrs, out);
}

}  // namespace vrun
