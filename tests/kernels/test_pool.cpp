// max_pool2d against a float64 loop over the windows.
#include "kernel_test_util.h"

namespace vrun::test {
namespace {

struct Pool {
  int64_t kh, kw, sh, sw, pt, pb, pl, pr, dh = 1, dw = 1;
  bool ceil_mode = false;
};

int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t lo, int64_t hi, int64_t d, bool ceil_mode) {
  const double span = static_cast<double>(d * (k - 1) + 1);
  const double q = (static_cast<double>(n + lo + hi) - span) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil_mode && (o - 1) * s >= n + lo) --o;
  return o;
}

std::vector<double> ref_pool(const TensorView& x, const Pool& p, Shape* shape) {
  const int64_t b = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t oh = out_size(h, p.kh, p.sh, p.pt, p.pb, p.dh, p.ceil_mode);
  const int64_t ow = out_size(w, p.kw, p.sw, p.pl, p.pr, p.dw, p.ceil_mode);
  *shape = Shape{b, c, oh, ow};
  std::vector<double> out;
  for (int64_t n = 0; n < b; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double m = -INFINITY;
          for (int64_t ky = 0; ky < p.kh; ++ky)
            for (int64_t kx = 0; kx < p.kw; ++kx) {
              const int64_t iy = y * p.sh - p.pt + ky * p.dh, ix = z * p.sw - p.pl + kx * p.dw;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const int64_t idx[4] = {n, ch, iy, ix};
              m = std::max(m, load_double(x, idx));
            }
          out.push_back(m);
        }
  return out;
}

void check(const TensorView& x, const Pool& p, const char* what) {
  Attrs at(OpKind::max_pool2d);
  at.set_ints("kernel", {p.kh, p.kw}).set_ints("stride", {p.sh, p.sw}).set_ints("dilation", {p.dh, p.dw});
  at.set_ints("padding", {p.pt, p.pb, p.pl, p.pr}).set_i("ceil_mode", p.ceil_mode ? 1 : 0);
  ThreadPool pool(2);
  RunResult r = run_cpu(OpKind::max_pool2d, {x}, at, &pool);
  ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
  Shape want_shape;
  const std::vector<double> want = ref_pool(x, p, &want_shape);
  EXPECT_EQ(r.outputs[0].view.shape.str(), want_shape.str()) << what;
  expect_close(to_doubles(r.outputs[0].view), want, 0, 0, what);
}

TEST(MaxPool2d, SppfStrideCeilDilation) {
  std::mt19937 rng(7);
  HostTensor x = random_tensor(DType::f32, Shape{2, 3, 13, 11}, rng);
  check(x.view, {5, 5, 1, 1, 2, 2, 2, 2}, "SPPF k5 s1 p2");
  check(x.view, {3, 3, 2, 2, 1, 1, 1, 1}, "k3 s2 p1 (ResNet stem)");
  check(x.view, {2, 2, 2, 2, 0, 0, 0, 0}, "k2 s2, odd sizes drop the last row");
  check(x.view, {3, 2, 2, 2, 0, 1, 1, 0, 1, 1, true}, "ceil mode, uneven padding");
  check(x.view, {3, 3, 1, 2, 2, 2, 2, 2, 2, 2}, "dilation 2");
  HostTensor xs = random_strided(DType::f32, Shape{1, 4, 9, 8}, {0, 2, 3, 1}, 5, rng);
  check(xs.view, {3, 3, 1, 1, 1, 1, 1, 1}, "channels-last strided input");
}

TEST(MaxPool2d, RejectsPaddingAsWideAsTheWindow) {
  std::mt19937 rng(8);
  HostTensor x = random_tensor(DType::f32, Shape{1, 1, 6, 6}, rng);
  Attrs at(OpKind::max_pool2d);
  at.set_ints("kernel", {2, 2}).set_ints("padding", {2, 2});
  ThreadPool pool(1);
  RunResult r = run_cpu(OpKind::max_pool2d, {x.view}, at, &pool);
  EXPECT_FALSE(r.status.is_ok());
}

}  // namespace
}  // namespace vrun::test
