// linear (matvec and tiled paths, every weight dtype, bias, strided x) and bmm (strided,
// broadcast batch) against float64 math on the same rounded inputs.
#include <cmath>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkLinalg : public VulkanTest {};

// y[m, n] = sum_k x[m, k] w[n, k] + b[n], all from the stored (rounded/quantised) values.
std::vector<double> linear_ref(const HostTensor& x, const HostTensor& w, const HostTensor* b, int64_t M, int64_t N,
                               int64_t K) {
  const auto xv = to_doubles(x.view), wv = to_doubles(w.view);
  std::vector<double> bv = b ? to_doubles(b->view) : std::vector<double>();
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = b ? bv[n] : 0;
      for (int64_t k = 0; k < K; ++k) s += xv[m * K + k] * wv[n * K + k];
      y[m * N + n] = s;
    }
  return y;
}

TEST_F(VkLinalg, LinearEveryWeightDtypeBothPaths) {
  std::mt19937 rng(10);
  for (DType wdt : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1}) {
    for (DType xdt : {DType::f32, DType::f16}) {
      // M = 1 and 7 take the matvec kernel, 33 and 70 the tiled one.
      for (int64_t M : {1, 7, 33, 70}) {
        if (xdt == DType::f16 && (M == 7 || M == 33)) continue;  // f16 x: one size per kernel keeps CI time down
        const int64_t N = 37, K = is_quantized(wdt) ? 96 : 45;
        HostTensor x = random_tensor(xdt, Shape{M, K}, rng);
        HostTensor w = random_tensor(wdt, Shape{N, K}, rng);
        HostTensor b = random_tensor(xdt, Shape{N}, rng);
        const bool with_bias = M != 33;
        auto out = run_gpu(OpKind::linear, {&x, &w, with_bias ? &b : nullptr}, Attrs(OpKind::linear));
        ASSERT_EQ(out[0].view.shape, (Shape{M, N}));
        const std::string what = std::string("linear w=") + dtype_name(wdt) + " x=" + dtype_name(xdt) + " M=" +
                                 std::to_string(M);
        expect_close(to_doubles(out[0].view), linear_ref(x, w, with_bias ? &b : nullptr, M, N, K),
                     1e-5 * std::sqrt(static_cast<double>(K)), rtol_for(xdt) + 1e-5, what.c_str());
      }
    }
  }
}

TEST_F(VkLinalg, LinearStridedAndBatchedInput) {
  std::mt19937 rng(11);
  const int64_t K = 64, N = 33;
  for (int64_t M : {3, 65}) {
    // x [2, M, K] stored as [K, 2, M]: not row-collapsible, so it goes through a scratch copy.
    HostTensor x = random_strided(DType::f32, Shape{2, M, K}, {2, 0, 1}, 7, rng);
    HostTensor w = random_tensor(DType::q8_0, Shape{N, K}, rng);
    auto out = run_gpu(OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
    ASSERT_EQ(out[0].view.shape, (Shape{2, M, N}));
    HostTensor xd = make_tensor(DType::f32, Shape{2 * M, K});
    const auto xv = to_doubles(x.view);
    for (int64_t i = 0; i < 2 * M * K; ++i) xd.view.ptr<float>()[i] = static_cast<float>(xv[i]);
    expect_close(to_doubles(out[0].view), linear_ref(xd, w, nullptr, 2 * M, N, K), 1e-4, 1e-5, "linear strided x");
  }
  // Row-strided view (every other row of a larger matrix) is read in place.
  HostTensor big = random_tensor(DType::f16, Shape{10, K}, rng);
  HostTensor x = big;
  x.view.shape = Shape{5, K};
  x.view.strides[0] = 2 * K;
  HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng);
  auto out = run_gpu(OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
  HostTensor xd = make_tensor(DType::f32, Shape{5, K});
  const auto xv = to_doubles(x.view);
  for (int64_t i = 0; i < 5 * K; ++i) xd.view.ptr<float>()[i] = static_cast<float>(xv[i]);
  expect_close(to_doubles(out[0].view), linear_ref(xd, w, nullptr, 5, N, K), 1e-4, 2e-3, "linear row-strided x");
}

// f16 x f16 with M >= 64 and K % 16 == 0 takes the cooperative-matrix kernel where the device
// has one (tensor cores); elsewhere the tiled kernel. Both must match.
TEST_F(VkLinalg, LinearPrefillShapeF16) {
  std::mt19937 rng(13);
  std::printf("cooperative matrix: %s\n", ctx().coopmat() == vulkan::Context::CoopMat::kKhr  ? "KHR"
                                          : ctx().coopmat() == vulkan::Context::CoopMat::kNv ? "NV"
                                                                                            : "none");
  for (int64_t K : {96, 4096 + 32}) {
    const int64_t M = 130, N = 70;
    HostTensor x = random_tensor(DType::f16, Shape{M, K}, rng);
    HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng);
    HostTensor b = random_tensor(DType::f16, Shape{N}, rng);
    auto out = run_gpu(OpKind::linear, {&x, &w, &b}, Attrs(OpKind::linear));
    expect_close(to_doubles(out[0].view), linear_ref(x, w, &b, M, N, K), 1e-5 * std::sqrt(static_cast<double>(K)), 2e-3,
                 "linear f16 prefill");
  }
}

TEST_F(VkLinalg, BmmStridedBroadcast) {
  std::mt19937 rng(12);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    // a [2, 3, 7, 33] permuted storage, b [3, 33, 65] broadcast over the leading 2 (rank 3).
    HostTensor a = random_strided(dt, Shape{2, 3, 7, 33}, {1, 3, 0, 2}, 2, rng);
    HostTensor b = random_strided(dt, Shape{3, 33, 65}, {0, 2, 1}, 0, rng);
    auto out = run_gpu(OpKind::bmm, {&a, &b}, Attrs(OpKind::bmm));
    ASSERT_EQ(out[0].view.shape, (Shape{2, 3, 7, 65}));
    const auto av = to_doubles(a.view), bv = to_doubles(b.view);
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int h = 0; h < 3; ++h)
        for (int m = 0; m < 7; ++m)
          for (int n = 0; n < 65; ++n) {
            double s = 0;
            for (int k = 0; k < 33; ++k) s += av[((i * 3 + h) * 7 + m) * 33 + k] * bv[(h * 33 + k) * 65 + n];
            want.push_back(s);
          }
    expect_close(to_doubles(out[0].view), want, 1e-4, rtol_for(dt) + 1e-5, (std::string("bmm ") + dtype_name(dt)).c_str());
  }
  // Large-ish M and N with a single batch, plain rank 2.
  HostTensor a = random_tensor(DType::f32, Shape{129, 17}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{17, 70}, rng);
  auto out = run_gpu(OpKind::bmm, {&a, &b}, Attrs(OpKind::bmm));
  const auto av = to_doubles(a.view), bv = to_doubles(b.view);
  std::vector<double> want;
  for (int m = 0; m < 129; ++m)
    for (int n = 0; n < 70; ++n) {
      double s = 0;
      for (int k = 0; k < 17; ++k) s += av[m * 17 + k] * bv[k * 70 + n];
      want.push_back(s);
    }
  expect_close(to_doubles(out[0].view), want, 1e-5, 1e-5, "bmm 2d");
}

}  // namespace
}  // namespace vrun::test
