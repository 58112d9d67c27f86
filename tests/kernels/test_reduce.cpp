// Reductions, argmax and softmax/log_softmax against float64 references computed here.
#include <cmath>
#include <limits>
#include <string>

#include "tests/kernels/kernel_test_util.h"

namespace vrun::test {
namespace {

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const Layout kLayouts[] = {Layout::kDense, Layout::kPermuted, Layout::kBroadcast};

// Reference reduction: visits x in row-major order and folds each element into its output slot.
std::vector<double> ref_reduce(OpKind op, const TensorView& x, const std::vector<bool>& reduced, Shape* out_shape) {
  Shape keep = x.shape;
  for (int d = 0; d < x.rank(); ++d)
    if (reduced[d]) keep[d] = 1;
  *out_shape = keep;
  const int64_t n = keep.numel();
  const double init = op == OpKind::reduce_max ? -INFINITY : op == OpKind::reduce_min ? INFINITY : 0;
  std::vector<double> acc(static_cast<size_t>(n), init);
  int64_t count = x.numel() / std::max<int64_t>(n, 1);
  for_each_index(x.shape, [&](const int64_t* i) {
    int64_t o = 0;
    for (int d = 0; d < x.rank(); ++d) o = o * keep[d] + (reduced[d] ? 0 : i[d]);
    const double v = load_double(x, i);
    double& a = acc[static_cast<size_t>(o)];
    if (op == OpKind::reduce_max) a = std::max(a, v);
    else if (op == OpKind::reduce_min) a = std::min(a, v);
    else a += v;
  });
  if (op == OpKind::reduce_mean)
    for (double& a : acc) a /= static_cast<double>(count);
  return acc;
}

void check_reduce(OpKind op, DType dt, const Shape& shape, const std::vector<int64_t>& axes, bool keepdim, Layout l,
                  std::mt19937& rng, ThreadPool* pool = nullptr) {
  std::string ax_str;
  for (int64_t a : axes) ax_str += std::to_string(a) + ",";
  SCOPED_TRACE(std::string(op_name(op)) + " " + dtype_name(dt) + " " + shape.str() + " axes {" + ax_str + "} keepdim " +
               std::to_string(keepdim) + " " + layout_name(l));
  HostTensor x = random_layout(dt, shape, l, rng, -2, 3);
  Attrs attrs(op);
  attrs.set_ints("axes", axes).set_i("keepdim", keepdim);
  RunResult r = run_cpu(op, {x.view}, attrs, pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  std::vector<bool> reduced(static_cast<size_t>(shape.rank), axes.empty());
  for (int64_t a : axes) reduced[normalize_axis(a, shape.rank)] = true;
  Shape keep;
  std::vector<double> want = ref_reduce(op, x.view, reduced, &keep);
  Shape want_shape;
  for (int d = 0; d < shape.rank; ++d)
    if (!reduced[d] || keepdim) want_shape.dims[want_shape.rank++] = keep[d];
  ASSERT_EQ(r.outputs[0].view.shape, want_shape);
  const Tolerance tol = tolerance_for(dt);
  // Sums of n terms: allow for the output's rounding plus f32 accumulation.
  const double count = static_cast<double>(shape.numel()) / std::max<int64_t>(keep.numel(), 1);
  const double atol = op == OpKind::reduce_sum ? tol.atol * std::sqrt(count) * 4 : tol.atol;
  expect_close(to_doubles(r.outputs[0].view), want, atol, tol.rtol, op_name(op));
}

TEST(Reduce, AxesKeepdimDtypesLayouts) {
  std::mt19937 rng(1);
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  const Case cases[] = {
      {Shape{33}, {}},          {Shape{7, 33}, {-1}},         {Shape{7, 33}, {0}},
      {Shape{3, 5, 7}, {0, 2}}, {Shape{3, 5, 7}, {1}},        {Shape{2, 3, 4, 5, 6}, {1, 3}},
      {Shape{2, 3, 4, 5, 6}, {-1, -2, 0}}, {Shape{129, 3}, {}}, {Shape{1, 7, 1}, {0, 2}},
  };
  for (OpKind op : {OpKind::reduce_sum, OpKind::reduce_mean, OpKind::reduce_max, OpKind::reduce_min})
    for (const Case& c : cases)
      for (DType dt : kFloatTypes)
        for (Layout l : kLayouts)
          for (bool keepdim : {false, true}) check_reduce(op, dt, c.shape, c.axes, keepdim, l, rng);
}

TEST(Reduce, LongRowsAndParallel) {
  std::mt19937 rng(2);
  ThreadPool pool(3);
  check_reduce(OpKind::reduce_sum, DType::f32, Shape{64, 4099}, {-1}, false, Layout::kDense, rng, &pool);
  check_reduce(OpKind::reduce_mean, DType::bf16, Shape{4099, 64}, {0}, true, Layout::kPermuted, rng, &pool);
  check_reduce(OpKind::reduce_max, DType::f16, Shape{300, 301}, {1}, false, Layout::kDense, rng, &pool);
  check_reduce(OpKind::reduce_sum, DType::f32, Shape{100000}, {}, false, Layout::kDense, rng, &pool);
}

TEST(Reduce, ScalarAndEmpty) {
  std::mt19937 rng(3);
  check_reduce(OpKind::reduce_sum, DType::f32, Shape{}, {}, false, Layout::kDense, rng);
  HostTensor e = make_tensor(DType::f32, Shape{3, 0});
  RunResult r = run_cpu(OpKind::reduce_sum, {e.view}, Attrs(OpKind::reduce_sum).set_ints("axes", {1}));
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_EQ(to_doubles(r.outputs[0].view), std::vector<double>(3, 0.0));
  r = run_cpu(OpKind::reduce_max, {e.view}, Attrs(OpKind::reduce_max).set_ints("axes", {1}));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
}

TEST(Reduce, Errors) {
  std::mt19937 rng(4);
  HostTensor x = random_tensor(DType::f32, Shape{3, 4}, rng);
  RunResult r = run_cpu(OpKind::reduce_sum, {x.view}, Attrs(OpKind::reduce_sum).set_ints("axes", {2}));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("axis 2"), std::string::npos) << r.status.message();
  EXPECT_EQ(run_cpu(OpKind::reduce_sum, {x.view}, Attrs(OpKind::reduce_sum).set_ints("axes", {1, -1})).status.code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_cpu(OpKind::reduce_mean, {x.view}, Attrs(OpKind::reduce_mean).set_i("keepdim", 2)).status.code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_cpu(OpKind::softmax, {x.view}, Attrs(OpKind::softmax).set_i("axis", -3)).status.code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_cpu(OpKind::argmax, {x.view}, Attrs(OpKind::argmax).set_i("axis", 5)).status.code(),
            ErrorCode::kInvalidArgument);
  HostTensor xi = random_tensor(DType::i64, Shape{3, 4}, rng, 0, 9);
  EXPECT_EQ(run_cpu(OpKind::reduce_sum, {xi.view}, Attrs(OpKind::reduce_sum)).status.code(), ErrorCode::kUnsupported);
}

// ---- argmax

void check_argmax(DType dt, const Shape& shape, int64_t axis, bool keepdim, Layout l, std::mt19937& rng,
                  ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape.str() + " axis " + std::to_string(axis) + " " + layout_name(l));
  // Few distinct values so that ties are common: the first maximum must win.
  HostTensor x = random_layout(dt, shape, l, rng, -3, 3);
  for_each_index(x.view.shape, [&](const int64_t* i) { store_double(x.view, i, std::round(load_double(x.view, i))); });
  RunResult r = run_cpu(OpKind::argmax, {x.view}, Attrs(OpKind::argmax).set_i("axis", axis).set_i("keepdim", keepdim), pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].view.dtype, DType::i32);
  const int ax = normalize_axis(axis, shape.rank);
  Shape outer = shape;
  outer[ax] = 1;
  std::vector<double> want;
  for_each_index(outer, [&](const int64_t* i) {
    int64_t idx[kMaxRank];
    std::copy(i, i + shape.rank, idx);
    double best = -INFINITY;
    int64_t best_j = -1;
    for (int64_t j = 0; j < shape[ax]; ++j) {
      idx[ax] = j;
      const double v = load_double(x.view, idx);
      if (v > best) best = v, best_j = j;
    }
    want.push_back(static_cast<double>(best_j));
  });
  Shape ws;
  for (int d = 0; d < shape.rank; ++d)
    if (d != ax || keepdim) ws.dims[ws.rank++] = outer[d];
  ASSERT_EQ(r.outputs[0].view.shape, ws);
  expect_close(to_doubles(r.outputs[0].view), want, 0, 0, "argmax");
}

TEST(Argmax, FirstMaximumWinsAcrossAxesAndLayouts) {
  std::mt19937 rng(5);
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts) {
      check_argmax(dt, Shape{33}, 0, false, l, rng);
      check_argmax(dt, Shape{7, 33}, -1, true, l, rng);
      check_argmax(dt, Shape{7, 33}, 0, false, l, rng);
      check_argmax(dt, Shape{2, 3, 4, 5, 7}, 2, false, l, rng);
    }
  ThreadPool pool(3);
  check_argmax(DType::f32, Shape{2000, 129}, -1, false, Layout::kDense, rng, &pool);
  // Dense f32 rows of 64 and more take the eight-lane path (a language model's logits).
  for (int64_t n : {64, 65, 71, 4096, 49157}) check_argmax(DType::f32, Shape{3, n}, -1, false, Layout::kDense, rng);
}

TEST(Argmax, NanCountsAsMaximum) {
  HostTensor x = make_tensor(DType::f32, Shape{4});
  const float v[] = {1.f, std::numeric_limits<float>::quiet_NaN(), 5.f, std::numeric_limits<float>::quiet_NaN()};
  std::copy(v, v + 4, x.view.ptr<float>());
  RunResult r = run_cpu(OpKind::argmax, {x.view}, Attrs(OpKind::argmax));
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[0], 1);
  // The same on the eight-lane path: the first NaN anywhere in a row, 0 for a row of NaNs.
  HostTensor y = make_tensor(DType::f32, Shape{3, 100});
  float* p = y.view.ptr<float>();
  for (int i = 0; i < 300; ++i) p[i] = static_cast<float>(i % 100);
  p[37] = p[90] = std::numeric_limits<float>::quiet_NaN();
  p[100] = std::numeric_limits<float>::quiet_NaN();
  for (int i = 200; i < 300; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  r = run_cpu(OpKind::argmax, {y.view}, Attrs(OpKind::argmax));
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[0], 37);
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[1], 0);
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[2], 0);
  // nan_flag: -1 for every row holding a NaN, on both paths; other rows as before.
  Attrs flag(OpKind::argmax);
  flag.set_i("nan_flag", 1);
  r = run_cpu(OpKind::argmax, {y.view}, flag);
  ASSERT_TRUE(r.status.is_ok());
  for (int row = 0; row < 3; ++row) EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[row], -1) << "row " << row;
  r = run_cpu(OpKind::argmax, {x.view}, flag);
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[0], -1);
  p[37] = p[90] = 1000.f;
  r = run_cpu(OpKind::argmax, {y.view}, flag);
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[0], 37);
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[1], -1);
  const float w[] = {1.f, 5.f, 2.f, 5.f};
  std::copy(w, w + 4, x.view.ptr<float>());
  r = run_cpu(OpKind::argmax, {x.view}, flag);
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[0], 1);
  flag.set_i("nan_flag", 2);
  EXPECT_FALSE(run_cpu(OpKind::argmax, {x.view}, flag).status.is_ok());
}

// ---- softmax / log_softmax

void check_softmax(OpKind op, DType dt, const Shape& shape, int64_t axis, Layout l, std::mt19937& rng, double lo = -4,
                   double hi = 4, ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(op_name(op)) + " " + dtype_name(dt) + " " + shape.str() + " axis " + std::to_string(axis) +
               " " + layout_name(l));
  HostTensor x = random_layout(dt, shape, l, rng, lo, hi);
  RunResult r = run_cpu(op, {x.view}, Attrs(op).set_i("axis", axis), pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].view.shape, shape);
  const int ax = normalize_axis(axis, shape.rank);
  std::vector<double> xs = to_doubles(x.view), want(xs.size());
  const Strides st = contiguous_strides(shape);
  Shape outer = shape;
  outer[ax] = 1;
  for_each_index(outer, [&](const int64_t* i) {
    int64_t base = 0;
    for (int d = 0; d < shape.rank; ++d) base += i[d] * st[d];
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < shape[ax]; ++j) m = std::max(m, xs[base + j * st[ax]]);
    for (int64_t j = 0; j < shape[ax]; ++j) s += std::exp(xs[base + j * st[ax]] - m);
    for (int64_t j = 0; j < shape[ax]; ++j) {
      const double v = xs[base + j * st[ax]];
      want[base + j * st[ax]] = op == OpKind::softmax ? std::exp(v - m) / s : v - m - std::log(s);
    }
  });
  const Tolerance tol = tolerance_for(dt);
  expect_close(to_doubles(r.outputs[0].view), want, tol.atol, tol.rtol * 2, op_name(op));
}

TEST(Softmax, AxesDtypesLayouts) {
  std::mt19937 rng(6);
  for (OpKind op : {OpKind::softmax, OpKind::log_softmax})
    for (DType dt : kFloatTypes)
      for (Layout l : kLayouts) {
        check_softmax(op, dt, Shape{1}, 0, l, rng);
        check_softmax(op, dt, Shape{7, 33}, -1, l, rng);
        check_softmax(op, dt, Shape{7, 33}, 0, l, rng);
        check_softmax(op, dt, Shape{2, 3, 5, 1, 129}, -1, l, rng);
        check_softmax(op, dt, Shape{2, 3, 5, 4, 6}, 2, l, rng);
      }
}

TEST(Softmax, LargeValuesAreStable) {
  std::mt19937 rng(7);
  for (OpKind op : {OpKind::softmax, OpKind::log_softmax}) {
    check_softmax(op, DType::f32, Shape{5, 1000}, -1, Layout::kDense, rng, 1000, 1050);
    check_softmax(op, DType::f32, Shape{5, 1000}, -1, Layout::kDense, rng, -3e4, 3e4);
  }
  ThreadPool pool(3);
  check_softmax(OpKind::softmax, DType::f32, Shape{64, 32003}, -1, Layout::kDense, rng, -10, 10, &pool);
}

TEST(Softmax, MinusInfinityMasksOut) {
  HostTensor x = make_tensor(DType::f32, Shape{3});
  const float v[] = {0.f, -std::numeric_limits<float>::infinity(), 0.f};
  std::copy(v, v + 3, x.view.ptr<float>());
  RunResult r = run_cpu(OpKind::softmax, {x.view}, Attrs(OpKind::softmax));
  ASSERT_TRUE(r.status.is_ok());
  expect_close(to_doubles(r.outputs[0].view), {0.5, 0.0, 0.5}, 1e-7, 1e-6, "masked softmax");
}

}  // namespace
}  // namespace vrun::test
