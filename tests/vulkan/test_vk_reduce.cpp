// reduce_sum, reduce_mean, reduce_max, reduce_min and max_pool2d against float64 math.
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkReduce : public VulkanTest {
 protected:
  // Runs op over `axes` of x and checks y against float64 sums and extremes of x's values.
  void check(OpKind op, const HostTensor& x, const std::vector<int64_t>& axes, bool keepdim, const std::string& what) {
    const Shape& s = x.view.shape;
    bool reduced[kMaxRank] = {};
    for (int d = 0; d < s.rank; ++d) reduced[d] = axes.empty();
    for (int64_t a : axes) reduced[a < 0 ? a + s.rank : a] = true;
    Shape want_shape;
    for (int d = 0; d < s.rank; ++d)
      if (!reduced[d] || keepdim) want_shape.dims[want_shape.rank++] = reduced[d] ? 1 : s[d];
    int64_t rows = 1, count = 1;
    for (int d = 0; d < s.rank; ++d) (reduced[d] ? count : rows) *= s[d];

    const bool is_max = op == OpKind::reduce_max, is_min = op == OpKind::reduce_min;
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> want(static_cast<size_t>(rows), is_max ? -inf : is_min ? inf : 0.0);
    const std::vector<double> xv = to_doubles(x.view);
    size_t flat = 0;
    for_each_index(s, [&](const int64_t* idx) {
      int64_t row = 0;
      for (int d = 0; d < s.rank; ++d)
        if (!reduced[d]) row = row * s[d] + idx[d];
      double& w = want[static_cast<size_t>(row)];
      const double v = xv[flat++];
      if (is_max) w = (v > w || std::isnan(v)) && !std::isnan(w) ? v : w;
      else if (is_min) w = (v < w || std::isnan(v)) && !std::isnan(w) ? v : w;
      else w += v;
    });
    if (op == OpKind::reduce_mean)
      for (double& w : want) w = count ? w / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();

    Attrs a(op);
    a.set_ints("axes", axes).set_i("keepdim", keepdim ? 1 : 0);
    auto out = run_gpu(op, {&x}, a);
    ASSERT_EQ(out.size(), 1u) << what;
    ASSERT_EQ(out[0].view.shape, want_shape) << what;
    ASSERT_EQ(out[0].view.dtype, x.view.dtype) << what;
    const DType dt = x.view.dtype;
    // f32 sums carry about one rounding per element added; extremes are exact before the
    // output's own rounding.
    const double atol = (is_max || is_min) ? 0 : 2e-7 * static_cast<double>(count) + 1e-6;
    expect_close(to_doubles(out[0].view), want, dt == DType::f32 ? atol : atol + 1e-3, rtol_for(dt),
                 (what + " " + op_name(op) + (keepdim ? " keepdim" : "") + " " + dtype_name(dt)).c_str());
  }
};

constexpr OpKind kReductions[] = {OpKind::reduce_sum, OpKind::reduce_mean, OpKind::reduce_max, OpKind::reduce_min};

std::string axes_name(const std::vector<int64_t>& axes) {
  std::string s = "axes{";
  for (int64_t a : axes) s += std::to_string(a) + ",";
  return s + "}";
}

// Every subset of the 4 axes (the empty list meaning all), keepdim both ways, dense and permuted
// x with a storage offset, f32 and f16.
TEST_F(VkReduce, EveryAxisSubsetOfARank4Tensor) {
  std::mt19937 rng(40);
  const Shape shape{3, 5, 7, 4};
  for (DType dt : {DType::f32, DType::f16}) {
    for (int layout = 0; layout < 2; ++layout) {
      HostTensor x = layout == 0 ? random_tensor(dt, shape, rng, -2, 2) : random_strided(dt, shape, {2, 0, 3, 1}, 3, rng);
      for (int mask = 0; mask < 16; ++mask) {
        std::vector<int64_t> axes;
        for (int d = 0; d < 4; ++d)
          if (mask & (1 << d)) axes.push_back(mask == 5 && d == 2 ? -2 : d);  // one negative axis
        for (OpKind op : kReductions)
          for (bool keep : {false, true})
            check(op, x, axes, keep, std::string(layout ? "permuted " : "dense ") + axes_name(axes));
      }
    }
  }
}

// Sliced, broadcast and transposed views: the kernel reads them through their strides.
TEST_F(VkReduce, StridedViews) {
  std::mt19937 rng(41);
  for (DType dt : {DType::f32, DType::f16}) {
    // Every other row and column of a [4, 10, 22] tensor, offset by one row.
    HostTensor big = random_tensor(dt, Shape{4, 10, 22}, rng);
    HostTensor sliced = big;
    sliced.view.shape = Shape{4, 4, 11};
    sliced.view.strides = Strides{220, 44, 2};
    sliced.view.data = static_cast<uint8_t*>(big.view.data) + 22 * dtype_elem_size(dt);
    // [6, 9, 8] broadcast from [6, 1, 8].
    HostTensor small = random_tensor(dt, Shape{6, 1, 8}, rng);
    HostTensor bcast = small;
    bcast.view = broadcast_view(small.view, Shape{6, 9, 8});
    // A [2, 40, 33] tensor seen as [2, 33, 40] (channels last read as channels first).
    HostTensor tr = random_strided(dt, Shape{2, 33, 40}, {0, 2, 1}, 1, rng);
    for (const auto& [x, name] : {std::pair{&sliced, "sliced"}, std::pair{&bcast, "broadcast"}, std::pair{&tr, "transposed"}})
      for (const auto& axes : std::vector<std::vector<int64_t>>{{2}, {1}, {0, 2}, {1, 2}, {}})
        for (OpKind op : kReductions) check(op, *x, axes, axes.size() == 1, std::string(name) + " " + axes_name(axes));
  }
}

// Rows of 1, 7 and over 1000 elements, a global average pool, reductions over a strided channel
// axis with many rows, one long row, bf16.
TEST_F(VkReduce, RowLengths) {
  std::mt19937 rng(42);
  for (DType dt : {DType::f32, DType::f16}) {
    for (int64_t n : {1, 7, 1000, 1031, 4099}) {
      HostTensor x = random_tensor(dt, Shape{3, n}, rng, -1, 3);
      for (OpKind op : kReductions) check(op, x, {1}, false, "row of " + std::to_string(n));
    }
    HostTensor gap = random_tensor(dt, Shape{4, 96, 7, 7}, rng);
    check(OpKind::reduce_mean, gap, {2, 3}, true, "global average pool 7x7");
    HostTensor gap56 = random_tensor(dt, Shape{2, 16, 56, 56}, rng);
    check(OpKind::reduce_mean, gap56, {-2, -1}, true, "global average pool 56x56");
    HostTensor chans = random_tensor(dt, Shape{2, 37, 33, 40}, rng);
    for (OpKind op : kReductions) check(op, chans, {1}, true, "channels");
    HostTensor deep = random_tensor(dt, Shape{1, 300, 1000}, rng);
    check(OpKind::reduce_sum, deep, {1}, false, "300 strided rows");
  }
  HostTensor one = random_tensor(DType::f32, Shape{70001}, rng);
  for (OpKind op : kReductions) check(op, one, {}, false, "one long row");
  HostTensor bf = random_tensor(DType::bf16, Shape{5, 6, 129}, rng);
  for (OpKind op : kReductions) check(op, bf, {0, 2}, true, "bf16");
}

// nan wins max and min; an empty sum is 0 and an empty mean nan (max and min refuse an empty
// axis when shapes are inferred).
TEST_F(VkReduce, NanAndEmpty) {
  std::mt19937 rng(43);
  HostTensor x = random_tensor(DType::f32, Shape{4, 300}, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  static_cast<float*>(x.view.data)[1 * 300 + 17] = nan;
  static_cast<float*>(x.view.data)[3 * 300 + 299] = nan;
  for (OpKind op : kReductions) check(op, x, {1}, false, "nan");
  HostTensor empty = make_tensor(DType::f32, Shape{3, 0});
  for (OpKind op : {OpKind::reduce_sum, OpKind::reduce_mean}) check(op, empty, {1}, false, "empty");
}

// The GPU takes the reductions of every float dtype.
TEST_F(VkReduce, Supported) {
  const TensorDesc f16{DType::f16, Shape{2, 8, 5, 5}}, i32{DType::i32, Shape{2, 8}};
  for (OpKind op : kReductions) {
    Attrs a(op);
    a.set_ints("axes", {2, 3});
    EXPECT_TRUE(vulkan::supports(ctx(), op, {&f16}, a)) << op_name(op);
    EXPECT_FALSE(vulkan::supports(ctx(), op, {&i32}, a)) << op_name(op) << " of i32";
  }
}

// ---- max_pool2d

struct PoolCase {
  int64_t kh, kw, sh, sw, dh, dw;
  std::vector<int64_t> padding;  // 1, 2 or 4 values, as the op takes them
  bool ceil;
  int64_t H, W;
};

// torch's output size: windows over the padded input, ceil_mode rounding up unless the last
// window would start in the trailing padding.
int64_t pool_out(int64_t n, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi, bool ceil) {
  const int64_t span = d * (k - 1) + 1;
  int64_t o = (n + lo + hi - span + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (o - 1) * s >= n + lo) --o;
  return o;
}

TEST_F(VkReduce, MaxPool2d) {
  std::mt19937 rng(44);
  const std::vector<PoolCase> cases = {
      {5, 5, 1, 1, 1, 1, {2}, false, 13, 13},        // SPPF
      {2, 2, 2, 2, 1, 1, {0}, false, 9, 8},          // odd height, the last row dropped
      {3, 3, 2, 2, 1, 1, {1}, true, 10, 7},          // ceil_mode with padding
      {2, 3, 2, 3, 1, 1, {0}, true, 5, 11},          // ceil_mode, partial last windows
      {3, 2, 1, 2, 2, 3, {2, 1}, false, 8, 9},       // dilation, per-dim padding
      {3, 3, 2, 1, 1, 1, {0, 2, 1, 0}, true, 7, 6},  // asymmetric padding
      {2, 2, 1, 1, 3, 3, {2}, false, 1, 1},          // every window only padding
      {2, 2, 1, 1, 3, 1, {2, 0}, false, 1, 4},       // rows of windows only padding
  };
  for (DType dt : {DType::f32, DType::f16}) {
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const PoolCase& c = cases[ci];
      for (int layout = 0; layout < 2; ++layout) {
        const Shape shape{2, 3, c.H, c.W};
        HostTensor x = layout == 0 ? random_tensor(dt, shape, rng, -3, 3) : random_strided(dt, shape, {0, 2, 3, 1}, 2, rng);
        if (ci == 0 && dt == DType::f32) store_double(x.view, std::array<int64_t, 4>{1, 2, 6, 6}.data(), NAN);
        int64_t plo[2], phi[2];
        for (int i = 0; i < 2; ++i) {
          const auto& p = c.padding;
          plo[i] = p.size() == 4 ? p[2 * i] : p[p.size() == 1 ? 0 : i];
          phi[i] = p.size() == 4 ? p[2 * i + 1] : plo[i];
        }
        const int64_t oh = pool_out(c.H, c.kh, c.sh, c.dh, plo[0], phi[0], c.ceil);
        const int64_t ow = pool_out(c.W, c.kw, c.sw, c.dw, plo[1], phi[1], c.ceil);
        std::vector<double> want;
        for (int64_t n = 0; n < 2; ++n)
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t oy = 0; oy < oh; ++oy)
              for (int64_t ox = 0; ox < ow; ++ox) {
                double m = -std::numeric_limits<double>::infinity();
                for (int64_t ky = 0; ky < c.kh; ++ky)
                  for (int64_t kx = 0; kx < c.kw; ++kx) {
                    const int64_t iy = oy * c.sh - plo[0] + ky * c.dh, ix = ox * c.sw - plo[1] + kx * c.dw;
                    if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W || std::isnan(m)) continue;
                    const int64_t idx[4] = {n, ch, iy, ix};
                    const double v = load_double(x.view, idx);
                    if (v > m || std::isnan(v)) m = v;
                  }
                want.push_back(m);
              }
        Attrs a(OpKind::max_pool2d);
        a.set_ints("kernel", {c.kh, c.kw}).set_ints("stride", {c.sh, c.sw}).set_ints("dilation", {c.dh, c.dw});
        a.set_ints("padding", c.padding).set_i("ceil_mode", c.ceil ? 1 : 0);
        auto out = run_gpu(OpKind::max_pool2d, {&x}, a);
        const std::string what = "max_pool2d case " + std::to_string(ci) + (layout ? " permuted " : " dense ") + dtype_name(dt);
        ASSERT_EQ(out[0].view.shape, (Shape{2, 3, oh, ow})) << what;
        // The maximum is one of the inputs: exact.
        expect_close(to_doubles(out[0].view), want, 0, 0, what.c_str());
      }
    }
  }
}

}  // namespace
}  // namespace vrun::test
