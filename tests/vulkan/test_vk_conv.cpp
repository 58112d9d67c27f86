// conv1d / conv2d: plain, strided, padded, dilated, grouped and depthwise, against float64 math.
#include <string>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkConv : public VulkanTest {};

// x [B, C, H, W], w [Co, C/g, Kh, Kw]: direct float64 convolution.
std::vector<double> conv_ref(const TensorView& x, const TensorView& w, const TensorView* b, const Shape& y, int64_t sh,
                             int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw, int64_t g, bool is1d) {
  std::vector<double> out;
  const int64_t Cin = x.shape[1], H = is1d ? 1 : x.shape[2], W = is1d ? x.shape[2] : x.shape[3];
  const int64_t Co = w.shape[0], Kh = is1d ? 1 : w.shape[2], Kw = is1d ? w.shape[2] : w.shape[3];
  const int64_t Ho = is1d ? 1 : y[2], Wo = is1d ? y[2] : y[3];
  const int64_t cig = Cin / g, cog = Co / g;
  for (int64_t bb = 0; bb < x.shape[0]; ++bb)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = 0;
          if (b) {
            int64_t bi[1] = {co};
            s = load_double(*b, bi);
          }
          for (int64_t ci = 0; ci < cig; ++ci)
            for (int64_t kh = 0; kh < Kh; ++kh)
              for (int64_t kw = 0; kw < Kw; ++kw) {
                const int64_t ih = oh * sh + kh * dh - pt, iw = ow * sw + kw * dw - pl;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t c = (co / cog) * cig + ci;
                if (is1d) {
                  int64_t xi[3] = {bb, c, iw}, wi[3] = {co, ci, kw};
                  s += load_double(x, xi) * load_double(w, wi);
                } else {
                  int64_t xi[4] = {bb, c, ih, iw}, wi[4] = {co, ci, kh, kw};
                  s += load_double(x, xi) * load_double(w, wi);
                }
              }
          out.push_back(s);
        }
  return out;
}

TEST_F(VkConv, Conv1dGroupedDepthwiseStrided) {
  std::mt19937 rng(50);
  struct Case {
    int64_t cin, cout, groups, k, stride, pad, dil;
  };
  for (const Case c : {Case{4, 6, 1, 3, 1, 1, 1}, Case{6, 6, 6, 31, 1, 15, 1}, Case{8, 4, 2, 5, 2, 3, 2}}) {
    for (DType dt : {DType::f32, DType::f16}) {
      // x stored as [B, L, C] (channels-last, a transposed view).
      HostTensor x = random_strided(dt, Shape{2, c.cin, 33}, {0, 2, 1}, 1, rng);
      HostTensor w = random_tensor(dt, Shape{c.cout, c.cin / c.groups, c.k}, rng);
      HostTensor b = random_tensor(dt, Shape{c.cout}, rng);
      Attrs a(OpKind::conv1d);
      a.set_i("stride", c.stride).set_ints("padding", {c.pad}).set_i("dilation", c.dil).set_i("groups", c.groups);
      auto out = run_gpu(OpKind::conv1d, {&x, &w, &b}, a);
      const auto want = conv_ref(x.view, w.view, &b.view, out[0].view.shape, 1, c.stride, 0, c.pad, 1, c.dil, c.groups, true);
      expect_close(to_doubles(out[0].view), want, 1e-5 * c.k, rtol_for(dt) + 1e-5, "conv1d");
    }
  }
}

// Depthwise conv1d with stride 1 runs tiled kernels, taps in chunks of 8: for time-contiguous x
// 1024 outputs of one channel a workgroup (2048 for rows of 2048 or more; up to 128 taps), for
// channels-last x 128 outputs of 16 channels (up to 64 taps). Several tiles with partial last
// ones in time and channels, taps not a multiple of 8, the largest kernels and one past them,
// outputs shorter than the kernel, no padding, every float dtype.
TEST_F(VkConv, Conv1dDepthwiseTiled) {
  std::mt19937 rng(52);
  struct Case {
    int64_t batch, channels, length, k, pad;
    DType dt;
    bool channels_last, bias;
  };
  for (const Case c : {Case{1, 3, 2500, 31, 15, DType::f16, false, true}, Case{2, 5, 1030, 9, 4, DType::f32, true, true},
                       Case{1, 2, 300, 128, 0, DType::f32, false, false}, Case{1, 4, 5, 7, 3, DType::bf16, false, true},
                       Case{2, 3, 1100, 4, 3, DType::f16, true, false}, Case{2, 37, 300, 31, 15, DType::f16, true, true},
                       Case{1, 17, 70, 64, 2, DType::f32, true, true}, Case{1, 3, 90, 65, 32, DType::f32, true, true},
                       Case{1, 2, 140, 129, 64, DType::f32, false, true}, Case{1, 2, 4500, 31, 15, DType::f16, false, true},
                       Case{2, 2, 1500, 9, 4, DType::f32, false, true}}) {
    HostTensor x = c.channels_last ? random_strided(c.dt, Shape{c.batch, c.channels, c.length}, {0, 2, 1}, 3, rng)
                                   : random_tensor(c.dt, Shape{c.batch, c.channels, c.length}, rng);
    HostTensor w = random_tensor(c.dt, Shape{c.channels, 1, c.k}, rng);
    HostTensor b = random_tensor(c.dt, Shape{c.channels}, rng);
    Attrs a(OpKind::conv1d);
    a.set_ints("padding", {c.pad}).set_i("groups", c.channels);
    auto out = run_gpu(OpKind::conv1d, {&x, &w, c.bias ? &b : nullptr}, a);
    ASSERT_EQ(out[0].view.shape, (Shape{c.batch, c.channels, c.length + 2 * c.pad - c.k + 1}));
    const auto want =
        conv_ref(x.view, w.view, c.bias ? &b.view : nullptr, out[0].view.shape, 1, 1, 0, c.pad, 1, 1, c.channels, true);
    const std::string what = "depthwise conv1d " + std::string(dtype_name(c.dt)) + " T=" + std::to_string(c.length) +
                             " K=" + std::to_string(c.k);
    expect_close(to_doubles(out[0].view), want, 1e-5 * c.k, rtol_for(c.dt) + 1e-5, what.c_str());
  }
}

TEST_F(VkConv, Conv2dPaddedGrouped) {
  std::mt19937 rng(51);
  HostTensor x = random_tensor(DType::f32, Shape{1, 4, 9, 11}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{8, 2, 3, 3}, rng);
  Attrs a(OpKind::conv2d);
  a.set_ints("stride", {2, 1}).set_ints("padding", {1, 1, 2, 0}).set_ints("dilation", {1, 2}).set_i("groups", 2);
  auto out = run_gpu(OpKind::conv2d, {&x, &w, nullptr}, a);
  const auto want = conv_ref(x.view, w.view, nullptr, out[0].view.shape, 2, 1, 1, 2, 1, 2, 2, false);
  expect_close(to_doubles(out[0].view), want, 1e-5, 1e-5, "conv2d");
}

// The direct kernel computes up to 16 output channels of a group per invocation: one input
// channel to 32 outputs (a subsampling stem, 16 per invocation), two groups of 24 (8), 12 (4),
// strided and padded, with a bias, f32 and f16 weights.
TEST_F(VkConv, Conv2dOutputChannelBlocks) {
  std::mt19937 rng(57);
  struct Case {
    int64_t cin, cout, groups;
    DType wdt;
  };
  for (const Case c : {Case{1, 32, 1, DType::f32}, Case{4, 48, 2, DType::f16}, Case{3, 12, 1, DType::f32}}) {
    HostTensor x = random_tensor(DType::f32, Shape{2, c.cin, 13, 10}, rng);
    HostTensor w = random_tensor(c.wdt, Shape{c.cout, c.cin / c.groups, 3, 3}, rng);
    HostTensor b = random_tensor(DType::f32, Shape{c.cout}, rng);
    Attrs a(OpKind::conv2d);
    a.set_ints("stride", {2, 2}).set_ints("padding", {1, 1}).set_i("groups", c.groups);
    auto out = run_gpu(OpKind::conv2d, {&x, &w, &b}, a);
    ASSERT_EQ(out[0].view.shape, (Shape{2, c.cout, 7, 5}));
    const auto want = conv_ref(x.view, w.view, &b.view, out[0].view.shape, 2, 2, 1, 1, 1, 1, c.groups, false);
    expect_close(to_doubles(out[0].view), want, 1e-5 * static_cast<double>(c.cin / c.groups * 9), 1e-5,
                 ("conv2d " + std::to_string(c.cin) + " -> " + std::to_string(c.cout)).c_str());
  }
}

// Pointwise convolutions (1 x 1, stride 1, one group, no padding) run as a batched matmul plus a
// broadcast bias: channel-major and channels-last x, a batch of two, f32 and f16, conv1d too.
TEST_F(VkConv, PointwiseRunsAsMatmul) {
  std::mt19937 rng(53);
  struct Case {
    int64_t cin, cout, h, w;
    DType dt;
    bool channels_last, bias, is1d;
  };
  for (const Case c : {Case{37, 70, 9, 13, DType::f32, false, true, false}, Case{64, 96, 5, 17, DType::f16, true, true, false},
                       Case{16, 8, 1, 130, DType::f32, true, false, true}, Case{3, 5, 1, 7, DType::f16, false, true, true}}) {
    const Shape xs = c.is1d ? Shape{2, c.cin, c.w} : Shape{2, c.cin, c.h, c.w};
    HostTensor x = !c.channels_last ? random_tensor(c.dt, xs, rng)
                   : c.is1d         ? random_strided(c.dt, xs, {0, 2, 1}, 1, rng)
                                    : random_strided(c.dt, xs, {0, 2, 3, 1}, 1, rng);
    HostTensor w = random_tensor(c.dt, c.is1d ? Shape{c.cout, c.cin, 1} : Shape{c.cout, c.cin, 1, 1}, rng);
    HostTensor b = random_tensor(c.dt, Shape{c.cout}, rng);
    const OpKind op = c.is1d ? OpKind::conv1d : OpKind::conv2d;
    Attrs a(op);
    auto out = run_gpu(op, {&x, &w, c.bias ? &b : nullptr}, a);
    ASSERT_EQ(out[0].view.shape, c.is1d ? (Shape{2, c.cout, c.w}) : (Shape{2, c.cout, c.h, c.w}));
    const auto want = conv_ref(x.view, w.view, c.bias ? &b.view : nullptr, out[0].view.shape, 1, 1, 0, 0, 1, 1, 1, c.is1d);
    const std::string what = "pointwise conv " + std::string(dtype_name(c.dt)) + " " + xs.str();
    // An f16 y is rounded twice (the product, then with the bias): half an f16 step of the
    // product's magnitude (about 1-4 here) can stay where the bias cancels it.
    const double atol = c.dt == DType::f16 ? 4.0 / 2048 : 1e-5 * static_cast<double>(c.cin);
    expect_close(to_doubles(out[0].view), want, atol, rtol_for(c.dt) + 1e-5, what.c_str());
  }
}

}  // namespace
}  // namespace vrun::test
