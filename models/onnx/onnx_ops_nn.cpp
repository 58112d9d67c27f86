// The neural-network ONNX operators onto vrun's ops: convolution and pooling, reductions,
// softmax, batch norm, matrix products and the LSTM.
#include "models/onnx/onnx_importer.h"
#include "models/onnx/onnx_ops.h"

namespace vrun::onnx::detail {

namespace {

// Conv/MaxPool geometry: ONNX pads [x1_begin, x2_begin, x1_end, x2_end] -> vrun's per-dim
// [begin, end] pairs.
Result<std::vector<int64_t>> spatial_pads(const Node& n, int nd) {
  const std::string auto_pad = attr_s(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    return err(ErrorCode::kUnsupported, "auto_pad ", auto_pad,
               " is not supported (export with explicit pads)");
  std::vector<int64_t> pads = attr_ints(n, "pads", std::vector<int64_t>(static_cast<size_t>(2 * nd), 0));
  if (auto_pad == "VALID") pads.assign(static_cast<size_t>(2 * nd), 0);
  if (pads.size() != static_cast<size_t>(2 * nd))
    return err(ErrorCode::kInvalidProgram, "pads holds ", pads.size(), " values, expected ", 2 * nd);
  std::vector<int64_t> out;
  for (int i = 0; i < nd; ++i) {
    out.push_back(pads[static_cast<size_t>(i)]);
    out.push_back(pads[static_cast<size_t>(i + nd)]);
  }
  return out;
}

}  // namespace

Status Importer::map_conv(const Node& n, Val x) {
  const int rank = shape(x).rank;
  VRUN_ASSIGN_OR_RETURN(const Tensor* w, known_in(n, 1, "weight"));
  const int nd = rank - 2;
  if (nd != 1 && nd != 2)
    return err(ErrorCode::kUnsupported, "Conv over ", nd, " spatial dims (1 or 2 supported)");
  VRUN_ASSIGN_OR_RETURN(auto pads, spatial_pads(n, nd));
  const auto strides = attr_ints(n, "strides", std::vector<int64_t>(static_cast<size_t>(nd), 1));
  const auto dil = attr_ints(n, "dilations", std::vector<int64_t>(static_cast<size_t>(nd), 1));
  if (strides.size() != static_cast<size_t>(nd) || dil.size() != static_cast<size_t>(nd))
    return err(ErrorCode::kInvalidProgram, "strides and dilations need ", nd, " values");
  std::vector<Val> ins{x, constant(*w, DType::f32)};
  if (in(n, 2)) {
    VRUN_ASSIGN_OR_RETURN(const Tensor* b, known_in(n, 2, "bias"));
    ins.push_back(constant(*b, DType::f32));
  }
  const int64_t groups = attr_i(n, "group", 1);
  if (nd == 1)
    return set_output(
        n, mb_.op(OpKind::conv1d, ins,
                  {{"stride", strides[0]}, {"dilation", dil[0]}, {"padding", pads}, {"groups", groups}},
                  n.name));
  return set_output(
      n, mb_.op(OpKind::conv2d, ins,
                {{"stride", strides}, {"dilation", dil}, {"padding", pads}, {"groups", groups}}, n.name));
}

Status Importer::map_max_pool(const Node& n, Val x) {
  const int rank = shape(x).rank;
  if (rank != 4)
    return err(ErrorCode::kUnsupported, "MaxPool over ", rank - 2, " spatial dims (2 supported)");
  if (n.outputs.size() > 1 && !n.outputs[1].empty())
    return err(ErrorCode::kUnsupported, "MaxPool's Indices output is not supported");
  VRUN_ASSIGN_OR_RETURN(auto pads, spatial_pads(n, 2));
  return set_output(n, mb_.op(OpKind::max_pool2d, {x},
                              {{"kernel", attr_ints(n, "kernel_shape", {})},
                               {"stride", attr_ints(n, "strides", {1, 1})},
                               {"padding", pads},
                               {"dilation", attr_ints(n, "dilations", {1, 1})},
                               {"ceil_mode", attr_i(n, "ceil_mode", 0)}},
                              n.name));
}

Status Importer::map_global_pool(const Node& n, Val x) {
  const std::string& op = n.op_type;
  const int rank = shape(x).rank;
  std::vector<int64_t> axes;
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  return set_output(n, mb_.op(op == "GlobalAveragePool" ? OpKind::reduce_mean : OpKind::reduce_max, {x},
                              {{"axes", axes}, {"keepdim", 1}}, n.name));
}

Status Importer::map_reduce(const Node& n, Val x) {
  const std::string& op = n.op_type;
  VRUN_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, axes_of(n));
  if (axes.empty() && attr_i(n, "noop_with_empty_axes", 0)) return set_output(n, x);
  const OpKind k = op == "ReduceMean"  ? OpKind::reduce_mean
                   : op == "ReduceSum" ? OpKind::reduce_sum
                   : op == "ReduceMax" ? OpKind::reduce_max
                                       : OpKind::reduce_min;
  return set_output(n, mb_.op(k, {x}, {{"axes", axes}, {"keepdim", attr_i(n, "keepdims", 1)}}, n.name));
}

Status Importer::map_softmax(const Node& n, Val x) {
  const std::string& op = n.op_type;
  const int rank = shape(x).rank;
  const int64_t axis = attr_i(n, "axis", opset_ < 13 ? 1 : -1);
  if (opset_ < 13 && norm_axis(axis, rank) != rank - 1)
    return err(ErrorCode::kUnsupported, op, " before opset 13 over axis ", axis, " of a rank-", rank,
               " input (only the last axis)");
  return set_output(
      n, mb_.op(op == "Softmax" ? OpKind::softmax : OpKind::log_softmax, {x}, {{"axis", axis}}, n.name));
}

Status Importer::map_batch_norm(const Node& n, Val x) {
  VRUN_ASSIGN_OR_RETURN(const Tensor* sc, known_in(n, 1, "scale"));
  VRUN_ASSIGN_OR_RETURN(const Tensor* b, known_in(n, 2, "B"));
  VRUN_ASSIGN_OR_RETURN(const Tensor* mean, known_in(n, 3, "mean"));
  VRUN_ASSIGN_OR_RETURN(const Tensor* var, known_in(n, 4, "var"));
  return set_output(n, mb_.op(OpKind::batch_norm,
                              {x, constant(*mean, DType::f32), constant(*var, DType::f32),
                               constant(*sc, DType::f32), constant(*b, DType::f32)},
                              {{"eps", attr_f(n, "epsilon", 1e-5)}, {"axis", 1}}, n.name));
}

Status Importer::map_matmul(const Node& n, Val x) {
  const std::string& op = n.op_type;
  const Value* bvalue = in(n, 1);
  if (!bvalue) return err(ErrorCode::kInvalidProgram, "input 1 is missing");
  if (op == "Gemm" && attr_i(n, "transA", 0)) return err(ErrorCode::kUnsupported, "Gemm with transA = 1");
  if (bvalue->known && bvalue->t.dims.size() == 2) {
    // vrun's linear takes weight [N, K]: MatMul's B [K, N] transposed (Gemm's too unless transB).
    const Tensor& B = bvalue->t;
    const bool trans = op == "Gemm" && attr_i(n, "transB", 0);
    const int64_t K = trans ? B.dims[1] : B.dims[0], N = trans ? B.dims[0] : B.dims[1];
    const double alpha = op == "Gemm" ? attr_f(n, "alpha", 1.0) : 1.0;
    Tensor w;
    w.name = B.name;
    w.elem_type = 1;
    w.dims = {N, K};
    w.values.resize(static_cast<size_t>(N * K));
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < K; ++k)
        w.values[static_cast<size_t>(i * K + k)] =
            alpha * B.values[static_cast<size_t>(trans ? i * K + k : k * N + i)];
    if (trans || alpha != 1.0) w.name.clear();
    Val wv = constant(w, DType::f32);
    if (op == "Gemm" && in(n, 2)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* c, known_in(n, 2, "C"));
      if (c->numel() != N && c->numel() != 1)
        return err(ErrorCode::kUnsupported, "Gemm's C must hold N (", N, ") values or one, got ", c->numel());
      Tensor bias;
      bias.elem_type = 1;
      bias.dims = {N};
      const double beta = attr_f(n, "beta", 1.0);
      for (int64_t i = 0; i < N; ++i)
        bias.values.push_back(beta * c->values[c->numel() == 1 ? 0 : static_cast<size_t>(i)]);
      return set_output(n, mb_.op(OpKind::linear, {x, wv, constant(bias, DType::f32)}, {}, n.name));
    }
    linears_[n.outputs[0]] = {x, wv};
    return set_output(n, mb_.op(OpKind::linear, {x, wv}, {}, n.name));
  }
  if (op == "Gemm") return err(ErrorCode::kUnsupported, "Gemm with a B computed at run time");
  VRUN_ASSIGN_OR_RETURN(Val b, val_in(n, 1));
  return set_output(n, mb_.op(OpKind::bmm, {x, b}, {}, n.name));
}

Status Importer::map_lstm(const Node& n, Val x) {
  if (attr_s(n, "direction", "forward") != "forward" || attr_i(n, "layout", 0) != 0 || n.attr("clip") ||
      n.attr("activations") || attr_i(n, "input_forget", 0))
    return err(ErrorCode::kUnsupported, "LSTM: forward direction, layout 0, default activations only");
  if (in(n, 4)) return err(ErrorCode::kUnsupported, "LSTM: sequence_lens is not supported");
  VRUN_ASSIGN_OR_RETURN(const Tensor* W, known_in(n, 1, "W"));
  VRUN_ASSIGN_OR_RETURN(const Tensor* R, known_in(n, 2, "R"));
  if (W->dims.size() != 3 || R->dims.size() != 3 || W->dims[0] != 1 || R->dims[0] != 1 || W->dims[1] % 4 ||
      R->dims[1] != W->dims[1] || R->dims[2] * 4 != R->dims[1])
    return err(ErrorCode::kInvalidProgram, "LSTM: W and R must be [1, 4H, I] and [1, 4H, H]");
  const int64_t H = R->dims[2], I = W->dims[2];
  // ONNX gates (i, o, f, c) -> vrun's torch order (i, f, g, o).
  const int order[4] = {0, 2, 3, 1};
  auto regate = [&](const std::vector<double>& v, int64_t cols, int64_t offset) {
    Tensor t;
    t.elem_type = 1;
    t.dims = {4 * H, cols};
    if (cols == 1) t.dims = {4 * H};
    for (int g = 0; g < 4; ++g)
      for (int64_t r = 0; r < H * cols; ++r)
        t.values.push_back(v[static_cast<size_t>(offset + order[g] * H * cols + r)]);
    return t;
  };
  Val wih = constant(regate(W->values, I, 0), DType::f32),
      whh = constant(regate(R->values, H, 0), DType::f32);
  Val bih, bhh;
  if (in(n, 3)) {
    VRUN_ASSIGN_OR_RETURN(const Tensor* B, known_in(n, 3, "B"));
    if (B->numel() != 8 * H) return err(ErrorCode::kInvalidProgram, "LSTM: B must be [1, 8H]");
    bih = constant(regate(B->values, 1, 0), DType::f32);
    bhh = constant(regate(B->values, 1, 4 * H), DType::f32);
  }
  const Shape xs = shape(x);  // [T, B, I]
  if (xs.rank != 3) return err(ErrorCode::kInvalidProgram, "LSTM: X must be [T, B, I]");
  auto state = [&](size_t k) -> Result<Val> {
    if (!in(n, k)) {
      Tensor z;
      z.elem_type = 1;
      z.dims = {xs[1], H};
      z.values.assign(static_cast<size_t>(xs[1] * H), 0.0);
      if (mb_.symbolic_dims(x)[1])
        return err(ErrorCode::kUnsupported, "LSTM: a symbolic batch needs initial_h and initial_c");
      return constant(z, DType::f32);
    }
    VRUN_ASSIGN_OR_RETURN(Val s, val_in(n, k));
    return mb_.op(OpKind::select, {s}, {{"axis", 0}, {"index", 0}});
  };
  VRUN_ASSIGN_OR_RETURN(Val h0, state(5));
  VRUN_ASSIGN_OR_RETURN(Val c0, state(6));
  Val xb = mb_.op(OpKind::permute, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  auto ys = mb_.op_n(OpKind::lstm, {xb, h0, c0, wih, whh, bih, bhh}, {}, n.name);
  if (ys.size() != 3)
    return pb_.status().is_ok() ? err(ErrorCode::kInternal, "LSTM: expected 3 outputs") : pb_.status();
  // Y [T, 1, B, H], Y_h and Y_c [1, B, H].
  if (n.outputs.size() > 0 && !n.outputs[0].empty()) {
    Val y = mb_.op(OpKind::permute, {ys[0]}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    VRUN_ASSIGN_OR_RETURN(Val y4,
                          reshape_keep(mb_.op(OpKind::copy, {y}), {xs[0], 1, xs[1], H}, {0, -1, 1, -1}));
    set(n.outputs[0], y4);
  }
  for (size_t k = 1; k < 3 && k < n.outputs.size(); ++k) {
    if (n.outputs[k].empty()) continue;
    VRUN_ASSIGN_OR_RETURN(Val s, reshape_keep(ys[k], {1, xs[1], H}, {-1, 0, 1}));
    set(n.outputs[k], s);
  }
  return Status::ok();
}

}  // namespace vrun::onnx::detail
