// conv1d / conv2d against a float64 direct convolution.
#include "kernel_test_util.h"

namespace vrun::test {
namespace {

struct Params {
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pb = 0, pl = 0, pr = 0, groups = 1;
};

// x [B, C, H, W] (H = 1 for conv1d), w [Co, C / g, Kh, Kw].
std::vector<double> ref_conv(const TensorView& x, const TensorView& w, const TensorView* bias, const Params& p,
                             bool is1d) {
  const int64_t nb = x.shape[0], cin = x.shape[1], h = is1d ? 1 : x.shape[2], wd = x.shape[is1d ? 2 : 3];
  const int64_t co = w.shape[0], cg = w.shape[1], kh = is1d ? 1 : w.shape[2], kw = w.shape[is1d ? 2 : 3];
  const int64_t oh = (h + p.pt + p.pb - p.dh * (kh - 1) - 1) / p.sh + 1;
  const int64_t ow = (wd + p.pl + p.pr - p.dw * (kw - 1) - 1) / p.sw + 1;
  const int64_t cog = co / p.groups;
  (void)cin;
  std::vector<double> out;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double s = 0;
          if (bias) {
            const int64_t ib[1] = {o};
            s = load_double(*bias, ib);
          }
          const int64_t g = o / cog;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * p.sh - p.pt + ky * p.dh, ix = z * p.sw - p.pl + kx * p.dw;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const int64_t xi2[3] = {b, g * cg + c, ix}, xi4[4] = {b, g * cg + c, iy, ix};
                const int64_t wi2[3] = {o, c, kx}, wi4[4] = {o, c, ky, kx};
                s += load_double(x, is1d ? xi2 : xi4) * load_double(w, is1d ? wi2 : wi4);
              }
          out.push_back(s);
        }
  return out;
}

void check(const TensorView& x, const TensorView& w, const TensorView* bias, const Params& p, bool is1d,
           const std::vector<int64_t>& padding, double tol, const char* what) {
  const OpKind op = is1d ? OpKind::conv1d : OpKind::conv2d;
  Attrs at(op);
  if (is1d) {
    at.set_i("stride", p.sw).set_i("dilation", p.dw);
  } else {
    at.set_ints("stride", {p.sh, p.sw}).set_ints("dilation", {p.dh, p.dw});
  }
  at.set_ints("padding", padding).set_i("groups", p.groups);
  std::vector<TensorView> in{x, w};
  if (bias) in.push_back(*bias);
  ThreadPool pool(2);
  RunResult r = run_cpu(op, in, at, &pool);
  ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
  expect_close(to_doubles(r.outputs[0].view), ref_conv(x, w, bias, p, is1d), tol, tol, what);
}

TEST(Conv1d, StridePaddingDilationGroups) {
  std::mt19937 rng(1);
  HostTensor x = random_tensor(DType::f32, Shape{2, 6, 23}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{8, 6, 3}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{8}, rng);
  check(x.view, w.view, &b.view, Params{.pl = 1, .pr = 1}, true, {1}, 1e-5, "k3 p1 (whisper conv)");
  check(x.view, w.view, nullptr, Params{.sw = 2, .dw = 2, .pl = 2, .pr = 0}, true, {2, 0}, 1e-5, "stride 2, dilation 2, pad [2, 0]");
  HostTensor wg = random_tensor(DType::f32, Shape{4, 3, 5}, rng);
  const Params g{.pl = 0, .pr = 3, .groups = 2};
  check(x.view, wg.view, nullptr, g, true, {0, 3}, 1e-5, "groups 2");
  // Depthwise (Parakeet's conformer conv module): 6 channels, kernel 9, same padding.
  HostTensor wd = random_tensor(DType::f32, Shape{6, 1, 9}, rng);
  HostTensor bd = random_tensor(DType::f32, Shape{6}, rng);
  const Params d{.pl = 4, .pr = 4, .groups = 6};
  check(x.view, wd.view, &bd.view, d, true, {4}, 1e-5, "depthwise");
  // Depthwise with channel multiplier 2, stride 3.
  HostTensor wm = random_tensor(DType::f32, Shape{12, 1, 4}, rng);
  const Params dm{.sw = 3, .pl = 1, .pr = 2, .groups = 6};
  check(x.view, wm.view, nullptr, dm, true, {1, 2}, 1e-5, "depthwise x2, stride 3");
  // Pointwise (1x1) takes the no-im2col path.
  HostTensor wp = random_tensor(DType::f32, Shape{5, 6, 1}, rng);
  check(x.view, wp.view, nullptr, Params{}, true, {0}, 1e-5, "pointwise");
}

TEST(Conv1d, StridedAndHalfInputs) {
  std::mt19937 rng(2);
  HostTensor xs = random_strided(DType::f32, Shape{2, 4, 17}, {2, 0, 1}, 3, rng);  // [B, C, L] from [L, B, C]
  HostTensor w = random_tensor(DType::f32, Shape{3, 4, 3}, rng);
  const Params p{.pl = 1, .pr = 1};
  check(xs.view, w.view, nullptr, p, true, {1}, 1e-5, "strided x");
  HostTensor xh = random_tensor(DType::f16, Shape{1, 4, 17}, rng);
  HostTensor wh = random_tensor(DType::f16, Shape{3, 4, 3}, rng);
  check(xh.view, wh.view, nullptr, p, true, {1}, 3e-3, "f16");
  // A conformer's depthwise convolution over its [B, T, C] rows seen as [B, C, T]: rows and
  // columns past the gather's 16 x 64 tiles, both partial at the end.
  HostTensor xt = random_strided(DType::f32, Shape{2, 37, 150}, {0, 2, 1}, 5, rng);
  HostTensor wd = random_tensor(DType::f32, Shape{37, 1, 9}, rng);
  HostTensor bd = random_tensor(DType::f32, Shape{37}, rng);
  const Params dp{.pl = 4, .pr = 4, .groups = 37};
  check(xt.view, wd.view, &bd.view, dp, true, {4}, 1e-5, "depthwise over a [B, T, C] view");
}

TEST(Conv2d, GeneralGroupedAndDepthwise) {
  std::mt19937 rng(3);
  HostTensor x = random_tensor(DType::f32, Shape{2, 4, 11, 9}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{6, 4, 3, 3}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{6}, rng);
  const Params p{.sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1};
  check(x.view, w.view, &b.view, p, false, {1, 1}, 1e-5, "3x3 s2 p1 (subsampling)");
  const Params a{.sh = 1, .sw = 2, .dh = 2, .dw = 1, .pt = 0, .pb = 2, .pl = 1, .pr = 0, .groups = 2};
  HostTensor wg = random_tensor(DType::f32, Shape{4, 2, 2, 3}, rng);
  check(x.view, wg.view, nullptr, a, false, {0, 2, 1, 0}, 1e-5, "asymmetric padding, dilation, groups 2");
  HostTensor wd = random_tensor(DType::f32, Shape{4, 1, 3, 3}, rng);
  const Params d{.sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .groups = 4};
  check(x.view, wd.view, nullptr, d, false, {1}, 1e-5, "depthwise s2");
  // One in-channel feeding many output channels (Parakeet's first subsampling layer over the
  // spectrogram), and a depthwise convolution with two output channels per in-channel.
  HostTensor x1 = random_tensor(DType::f32, Shape{2, 1, 13, 10}, rng);
  HostTensor w1 = random_tensor(DType::f32, Shape{5, 1, 3, 3}, rng);
  HostTensor b1 = random_tensor(DType::f32, Shape{5}, rng);
  check(x1.view, w1.view, &b1.view, p, false, {1, 1}, 1e-5, "one in-channel, five out, 3x3 s2 p1");
  HostTensor wm = random_tensor(DType::f32, Shape{8, 1, 3, 3}, rng);
  HostTensor bm = random_tensor(DType::f32, Shape{8}, rng);
  check(x.view, wm.view, &bm.view, d, false, {1}, 1e-5, "depthwise with multiplier 2");
}

TEST(Conv, RejectsBadShapes) {
  std::mt19937 rng(4);
  HostTensor x = random_tensor(DType::f32, Shape{1, 6, 5}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{4, 4, 3}, rng);
  Attrs at(OpKind::conv1d);
  at.set_i("groups", 2);
  RunResult r = run_cpu(OpKind::conv1d, {x.view, w.view}, at);
  EXPECT_NE(r.status.message().find("expects 8 in channels"), std::string::npos) << r.status.message();
  at.set_i("groups", 4);
  r = run_cpu(OpKind::conv1d, {x.view, w.view}, at);
  EXPECT_NE(r.status.message().find("multiples of groups"), std::string::npos) << r.status.message();
  HostTensor wbig = random_tensor(DType::f32, Shape{2, 6, 4}, rng);
  Attrs dil(OpKind::conv1d);
  dil.set_i("dilation", 2);
  r = run_cpu(OpKind::conv1d, {x.view, wbig.view}, dil);
  EXPECT_NE(r.status.message().find("exceeds padded input"), std::string::npos) << r.status.message();
  Attrs pad(OpKind::conv2d);
  pad.set_ints("padding", {1, 1, 1});
  HostTensor x4 = random_tensor(DType::f32, Shape{1, 2, 5, 5}, rng);
  HostTensor w4 = random_tensor(DType::f32, Shape{2, 2, 3, 3}, rng);
  r = run_cpu(OpKind::conv2d, {x4.view, w4.view}, pad);
  EXPECT_NE(r.status.message().find("padding needs"), std::string::npos) << r.status.message();
  r = run_cpu(OpKind::conv2d, {x.view, w4.view}, Attrs(OpKind::conv2d));
  EXPECT_NE(r.status.message().find("x must be rank 4"), std::string::npos) << r.status.message();
}

}  // namespace
}  // namespace vrun::test
