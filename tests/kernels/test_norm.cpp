// layer_norm, rms_norm and batch_norm against float64 references computed here.
#include <cmath>
#include <string>

#include "tests/kernels/kernel_test_util.h"

namespace vrun::test {
namespace {

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const Layout kLayouts[] = {Layout::kDense, Layout::kPermuted, Layout::kBroadcast};

// Per row of the last dim: layer norm (rms = false) or rms norm.
std::vector<double> ref_row_norm(const TensorView& x, const std::vector<double>* w, const std::vector<double>* b,
                                 bool rms, double eps, double unit_offset) {
  std::vector<double> xs = to_doubles(x), y(xs.size());
  const int64_t d = x.shape[x.rank() - 1];
  for (size_t r = 0; r + d <= xs.size() && d > 0; r += d) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += xs[r + j];
    mean /= d;
    if (rms) {
      for (int64_t j = 0; j < d; ++j) var += xs[r + j] * xs[r + j];
      var /= d;
    } else {
      for (int64_t j = 0; j < d; ++j) var += (xs[r + j] - mean) * (xs[r + j] - mean);
      var /= d;
    }
    const double inv = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < d; ++j) {
      double v = rms ? xs[r + j] * inv : (xs[r + j] - mean) * inv;
      if (w) v *= (*w)[j] + (rms ? unit_offset : 0);
      if (b) v += (*b)[j];
      y[r + j] = v;
    }
  }
  return y;
}

void check_row_norm(OpKind op, DType dt, DType wt, const Shape& shape, Layout l, bool with_w, bool with_b,
                    std::mt19937& rng, ThreadPool* pool = nullptr) {
  const bool rms = op == OpKind::rms_norm;
  SCOPED_TRACE(std::string(op_name(op)) + " x " + dtype_name(dt) + " w " + dtype_name(wt) + " " + shape.str() + " " +
               layout_name(l) + (with_w ? " +w" : "") + (with_b ? " +b" : ""));
  // An offset mean checks that the variance is computed about the mean, not naively.
  HostTensor x = random_layout(dt, shape, l, rng, 1, 4);
  const int64_t d = shape[shape.rank - 1];
  HostTensor w = random_layout(wt, Shape{d}, Layout::kPermuted, rng, 0.5, 1.5);
  HostTensor b = random_tensor(wt, Shape{d}, rng, -1, 1);
  std::vector<TensorView> in = {x.view, with_w ? w.view : TensorView{}};
  if (!rms) in.push_back(with_b ? b.view : TensorView{});
  Attrs attrs(op);
  const double eps = 1e-3;
  attrs.set_f("eps", eps);
  if (rms) attrs.set_f("unit_offset", 0.25);
  RunResult r = run_cpu(op, in, attrs, pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].view.shape, shape);
  const std::vector<double> wv = to_doubles(w.view), bv = to_doubles(b.view);
  const std::vector<double> want =
      ref_row_norm(x.view, with_w ? &wv : nullptr, with_b && !rms ? &bv : nullptr, rms, eps, rms ? 0.25 : 0);
  const Tolerance tol = tolerance_for(dt);
  expect_close(to_doubles(r.outputs[0].view), want, tol.atol * 4, tol.rtol * 2, op_name(op));
}

TEST(RowNorm, LayerAndRmsNormOverShapesDtypesLayouts) {
  std::mt19937 rng(1);
  for (OpKind op : {OpKind::layer_norm, OpKind::rms_norm})
    for (DType dt : kFloatTypes)
      for (Layout l : kLayouts)
        for (const Shape& s : {Shape{7}, Shape{5, 33}, Shape{2, 3, 129}, Shape{2, 1, 3, 2, 17}}) {
          check_row_norm(op, dt, dt, s, l, true, true, rng);
          check_row_norm(op, dt, DType::f32, s, l, true, false, rng);
        }
}

TEST(RowNorm, OptionalParametersAndLongRows) {
  std::mt19937 rng(2);
  ThreadPool pool(3);
  for (OpKind op : {OpKind::layer_norm, OpKind::rms_norm}) {
    check_row_norm(op, DType::f32, DType::f32, Shape{4, 33}, Layout::kDense, false, false, rng);
    check_row_norm(op, DType::bf16, DType::f16, Shape{3, 4097}, Layout::kDense, true, true, rng);
    check_row_norm(op, DType::f32, DType::f32, Shape{512, 1031}, Layout::kDense, true, true, rng, &pool);
  }
  check_row_norm(OpKind::layer_norm, DType::f32, DType::f32, Shape{4, 33}, Layout::kDense, false, true, rng);
}

TEST(RowNorm, Errors) {
  std::mt19937 rng(3);
  HostTensor x = random_tensor(DType::f32, Shape{3, 8}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{7}, rng);
  RunResult r = run_cpu(OpKind::layer_norm, {x.view, w.view}, Attrs(OpKind::layer_norm));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("[8]"), std::string::npos) << r.status.message();
  EXPECT_EQ(run_cpu(OpKind::rms_norm, {x.view, w.view}, Attrs(OpKind::rms_norm)).status.code(),
            ErrorCode::kInvalidArgument);
  HostTensor s = make_tensor(DType::f32, Shape{});
  EXPECT_EQ(run_cpu(OpKind::rms_norm, {s.view}, Attrs(OpKind::rms_norm)).status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_cpu(OpKind::rms_norm, {x.view}, Attrs(OpKind::rms_norm).set_f("eps", -1)).status.code(),
            ErrorCode::kInvalidArgument);
  HostTensor wi = random_tensor(DType::i32, Shape{8}, rng, 1, 3);
  EXPECT_EQ(run_cpu(OpKind::rms_norm, {x.view, wi.view}, Attrs(OpKind::rms_norm)).status.code(), ErrorCode::kUnsupported);
}

// ---- batch_norm

void check_batch_norm(DType dt, const Shape& shape, int64_t axis, Layout l, bool affine, std::mt19937& rng,
                      ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape.str() + " axis " + std::to_string(axis) + " " + layout_name(l));
  const int ax = normalize_axis(axis, shape.rank);
  const int64_t c = shape[ax];
  HostTensor x = random_layout(dt, shape, l, rng, -2, 2);
  HostTensor mean = random_tensor(DType::f32, Shape{c}, rng, -1, 1);
  HostTensor var = random_layout(DType::f32, Shape{c}, Layout::kPermuted, rng, 0.2, 2);
  HostTensor w = random_tensor(dt, Shape{c}, rng, 0.5, 1.5);
  HostTensor b = random_tensor(dt, Shape{c}, rng, -1, 1);
  std::vector<TensorView> in = {x.view, mean.view, var.view};
  if (affine) in.insert(in.end(), {w.view, b.view});
  const double eps = 1e-4;
  RunResult r = run_cpu(OpKind::batch_norm, in, Attrs(OpKind::batch_norm).set_i("axis", axis).set_f("eps", eps), pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  const std::vector<double> mv = to_doubles(mean.view), vv = to_doubles(var.view), wv = to_doubles(w.view),
                            bv = to_doubles(b.view);
  std::vector<double> want;
  for_each_index(shape, [&](const int64_t* i) {
    const int64_t ch = i[ax];
    double v = (load_double(x.view, i) - mv[ch]) / std::sqrt(vv[ch] + eps);
    if (affine) v = v * wv[ch] + bv[ch];
    want.push_back(v);
  });
  const Tolerance tol = tolerance_for(dt);
  expect_close(to_doubles(r.outputs[0].view), want, tol.atol * 4, tol.rtol * 2, "batch_norm");
}

TEST(BatchNorm, ChannelAxesDtypesLayouts) {
  std::mt19937 rng(4);
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts) {
      check_batch_norm(dt, Shape{2, 7, 33}, 1, l, true, rng);
      check_batch_norm(dt, Shape{2, 5, 3, 4}, 1, l, false, rng);
      check_batch_norm(dt, Shape{3, 9, 16}, -1, l, true, rng);
      check_batch_norm(dt, Shape{16}, 0, l, true, rng);
      check_batch_norm(dt, Shape{2, 3, 4, 5, 6}, 3, l, true, rng);
    }
  ThreadPool pool(3);
  check_batch_norm(DType::f32, Shape{4, 256, 1000}, 1, Layout::kDense, true, rng, &pool);
}

TEST(BatchNorm, Errors) {
  std::mt19937 rng(5);
  HostTensor x = random_tensor(DType::f32, Shape{2, 4, 5}, rng);
  HostTensor m = random_tensor(DType::f32, Shape{5}, rng);
  HostTensor v = random_tensor(DType::f32, Shape{4}, rng, 0.5, 1);
  RunResult r = run_cpu(OpKind::batch_norm, {x.view, m.view, v.view}, Attrs(OpKind::batch_norm));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("mean"), std::string::npos) << r.status.message();
  EXPECT_EQ(run_cpu(OpKind::batch_norm, {x.view, v.view, v.view}, Attrs(OpKind::batch_norm).set_i("axis", 3)).status.code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_cpu(OpKind::batch_norm, {x.view, v.view}, Attrs(OpKind::batch_norm)).status.code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vrun::test
