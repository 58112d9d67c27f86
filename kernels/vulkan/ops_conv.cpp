// conv1d / conv2d, grouped and depthwise: one direct-convolution kernel (conv1d is H = 1), and
// tiled ones for the depthwise conv1d of conformer blocks (time-contiguous or channels-last x);
// max_pool2d.
#include <limits>

#include "kernels/ops/shapes/conv_params.h"
#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

// Outputs per workgroup and largest kernel of conv_dw.comp (one channel a workgroup) and
// conv_dw_cl.comp (channels-last x: 16 channels a workgroup).
constexpr int64_t kDepthwiseTile = 1024;  // 2048 for rows of at least that many outputs
constexpr int64_t kDepthwiseMaxTaps = 128;
constexpr int64_t kDepthwiseClTile = 128;
constexpr int64_t kDepthwiseClChannels = 16;
constexpr int64_t kDepthwiseClMaxTaps = 64;

// max_pool2d: one invocation per output, x read through its strides (NCHW, any layout).
Status record_max_pool2d(Recorder& rec, const DeviceView& x_in, const DeviceView& y, const Attrs& attrs) {
  int64_t stride[2], dil[2], plo[2], phi[2];
  VRUN_RETURN_IF_ERROR(conv_spatial_params("max_pool2d", attrs, 2, stride, dil, plo, phi));
  const auto& k = attrs.ints("kernel");
  if (k.empty() || k.size() > 2 || x_in.shape.rank != 4 || y.shape.rank != 4)
    return err(ErrorCode::kInvalidArgument, "vulkan: max_pool2d of ", x_in.shape.str(), " with ", k.size(),
               " kernel sizes");
  const int64_t kh = k[0], kw = k[k.size() == 1 ? 0 : 1];
  const int64_t total = y.numel();
  if (total == 0) return Status::ok();
  DeviceView x = x_in;
  int64_t span = 0;
  bool strided_ok = true;
  for (int d = 0; d < 4; ++d) {
    if (x.strides[d] < 0) strided_ok = false;
    span += (x.shape[d] - 1) * x.strides[d];
  }
  if (!strided_ok || span >= std::numeric_limits<int32_t>::max()) {
    VRUN_ASSIGN_OR_RETURN(x, rec.dense_view(x_in));
  }
  std::vector<Binding> bindings = {{&y, true}, {&x, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(total).u(x.shape[1]).u(x.shape[2]).u(x.shape[3]).u(y.shape[2]).u(y.shape[3]);
  for (int d = 0; d < 4; ++d) pw.u(x.strides[d]);
  pw.u(kh).u(kw).u(stride[0]).u(stride[1]).u(plo[0]).u(plo[1]).u(dil[0]).u(dil[1]);
  pw.u(offs[0]).u(offs[1]);
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(total) + 255) / 256, &gx, &gy);
  return rec.dispatch("max_pool2d", {dt_code(x.dtype), dt_code(y.dtype)}, bindings, pw.w, pw.bytes(), gx, gy, 1);
}

}  // namespace

bool supports_conv(const Context&, OpKind op, const std::vector<const TensorDesc*>& inputs,
                   const Attrs&) {
  const TensorDesc* x = inputs[0];
  if (op == OpKind::max_pool2d) return is_act(x->dtype) && x->shape.rank == 4;
  auto in = [&](size_t k) { return input_at(inputs, k); };
  const TensorDesc *w = in(1), *b = in(2);
  return w && is_act(x->dtype) && is_act(w->dtype) && (!b || is_act(b->dtype));
}

Status record_conv(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                   const Attrs& attrs) {
  const DeviceView& y = out[0];
  if (op == OpKind::max_pool2d) return record_max_pool2d(rec, in[0], y, attrs);
  DeviceView x = in[0];
  VRUN_ASSIGN_OR_RETURN(DeviceView w, rec.dense_view(in[1]));
  DeviceView b;
  if (in.size() > 2 && in[2].present()) {
    VRUN_ASSIGN_OR_RETURN(b, rec.dense_view(in[2]));
  }
  const bool is1d = op == OpKind::conv1d;
  int64_t sh = 1, sw, dh = 1, dw, pt = 0, pl;
  int64_t H = 1, Wd, Kh = 1, Kw, Ho = 1, Wo;
  int64_t xsh = 0, xsw;
  const auto& pad = attrs.ints("padding");
  if (is1d) {
    sw = attrs.i("stride");
    dw = attrs.i("dilation");
    pl = pad.empty() ? 0 : pad[0];
    Wd = x.shape[2];
    Kw = w.shape[2];
    Wo = y.shape[2];
    xsw = x.strides[2];
  } else {
    const auto& st = attrs.ints("stride");
    const auto& dl = attrs.ints("dilation");
    sh = st.at(0);
    sw = st.size() > 1 ? st[1] : st[0];
    dh = dl.at(0);
    dw = dl.size() > 1 ? dl[1] : dl[0];
    // [h, w] or [top, bottom, left, right]
    pt = pad.empty() ? 0 : pad[0];
    pl = pad.size() == 4 ? pad[2] : pad.size() > 1 ? pad[1] : pt;
    H = x.shape[2];
    Wd = x.shape[3];
    Kh = w.shape[2];
    Kw = w.shape[3];
    Ho = y.shape[2];
    Wo = y.shape[3];
    xsh = x.strides[2];
    xsw = x.strides[3];
  }
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  const int64_t groups = attrs.i("groups");
  if (groups <= 0 || x.shape[1] % groups || w.shape[0] % groups)
    return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " groups ", groups, " do not divide channels of x ",
               x.shape.str(), " and weight ", w.shape.str());
  const int64_t C = x.shape[1];
  // A pointwise convolution over channel-major x is a matrix product per batch, W [Cout, Cin]
  // times x [Cin, H W]: the matmul kernels run it (the direct kernel reads every weight once per
  // output: 9 ms against well under 1 for Parakeet's 256 -> 256 subsampling convolution at a
  // 150-s chunk on an H100); the bias follows as a broadcast add.
  const bool spatial_regular = is1d || xsh == Wd * xsw;
  if (groups == 1 && Kh == 1 && Kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && Ho == H && Wo == Wd &&
      spatial_regular && y.is_contiguous()) {
    const int64_t B = x.shape[0], Co = w.shape[0], HW = H * Wd;
    DeviceView a = w, bx = x, yv = y;
    a.shape = Shape{B, Co, C};
    a.strides = Strides{0, C, 1};
    bx.shape = Shape{B, C, HW};
    bx.strides = Strides{x.strides[0], x.strides[1], xsw};
    yv.shape = Shape{B, Co, HW};
    yv.strides = Strides{Co * HW, HW, 1};
    VRUN_RETURN_IF_ERROR(record_linalg(rec, OpKind::bmm, {a, bx}, {yv}, Attrs(OpKind::bmm)));
    if (!b.present()) return Status::ok();
    DeviceView bb = b;
    bb.shape = yv.shape;
    bb.strides = Strides{0, 1, 0};
    return record_eltwise(rec, OP_ADD, yv, &yv, &bb, nullptr);
  }
  std::vector<Binding> bindings = {{&y, true}, {&x, false}, {&w, false}, {&b, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  const bool depthwise = is1d && groups == C && w.shape[0] == C && sw == 1 && dw == 1;
  if (depthwise && x.strides[1] == 1 && C > 1 && Kw <= kDepthwiseClMaxTaps) {
    const int64_t ntiles = (Wo + kDepthwiseClTile - 1) / kDepthwiseClTile;
    const int64_t nctiles = (C + kDepthwiseClChannels - 1) / kDepthwiseClChannels;
    PushWords pw;
    pw.u(x.shape[0]).u(C).u(Wd).u(Wo).u(Kw).u(pl).u(ntiles).u(nctiles);
    pw.u(x.strides[0]).u(x.strides[1]).u(xsw);
    pw.u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]);
    uint32_t gx, gy;
    rec.grid_1d(static_cast<uint64_t>(x.shape[0] * nctiles * ntiles), &gx, &gy);
    return rec.dispatch("conv_dw_cl", {dt_code(x.dtype), dt_code(w.dtype), dt_code(b), dt_code(y.dtype)}, bindings,
                        pw.w, pw.bytes(), gx, gy, 1);
  }
  if (depthwise && Kw <= kDepthwiseMaxTaps) {
    const int64_t tile = Wo >= 2 * kDepthwiseTile ? 2 * kDepthwiseTile : kDepthwiseTile;
    const int64_t ntiles = (Wo + tile - 1) / tile;
    PushWords pw;
    pw.u(x.shape[0]).u(C).u(Wd).u(Wo).u(Kw).u(pl).u(ntiles);
    pw.u(x.strides[0]).u(x.strides[1]).u(xsw);
    pw.u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]);
    uint32_t gx, gy;
    rec.grid_1d(static_cast<uint64_t>(x.shape[0] * C * ntiles), &gx, &gy);
    return rec.dispatch("conv_dw",
                        {dt_code(x.dtype), dt_code(w.dtype), dt_code(b), dt_code(y.dtype),
                         static_cast<int32_t>(tile / 128)},
                        bindings, pw.w, pw.bytes(), gx, gy, 1);
  }
  // Output channels per invocation: as many of a group's as divide it, up to 16.
  const int64_t cog = w.shape[0] / groups;
  const int64_t co_blk = cog % 16 == 0 ? 16 : cog % 8 == 0 ? 8 : cog % 4 == 0 ? 4 : 1;
  const int64_t inv = n / co_blk;
  PushWords pw;
  pw.u(inv).u(x.shape[1]).u(H).u(Wd).u(w.shape[0]).u(Ho).u(Wo).u(Kh).u(Kw);
  pw.u(sh).u(sw).u(pt).u(pl).u(dh).u(dw).u(groups);
  pw.u(x.strides[0]).u(x.strides[1]).u(xsh).u(xsw);
  pw.u(offs[0]).u(offs[1]).u(offs[2]).u(offs[3]);
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(inv) + 255) / 256, &gx, &gy);
  return rec.dispatch("conv",
                      {dt_code(x.dtype), dt_code(w.dtype), dt_code(b), dt_code(y.dtype), static_cast<int32_t>(co_blk)},
                      bindings, pw.w, pw.bytes(), gx, gy, 1);
}

}  // namespace vrun::vulkan
