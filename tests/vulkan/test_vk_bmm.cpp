// bmm shapes that attention builds (q k^T, relative-position terms): both operands run along K in
// memory, so on devices with cooperative matrices they take the tensor-core kernel (f32 operands
// rounded to halves); elsewhere the portable kernel. Checked against float64 math.
#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkBmm : public VulkanTest {
 protected:
  struct Dims {
    int64_t B, Bb, H, M, N, K;  // b has batch Bb on dim 0: B, or 1 (broadcast)
  };
  struct Case {
    DType dt;
    int64_t B, H, M, N, K;
    bool broadcast_b = false;  // b has batch 1 on dim 0, as a position table shared by every sequence
  };
  // Whether the tensor-core kernel, where the device has one, takes f32 operands as halves.
  bool tensor_cores_round(DType dt) {
    return ctx().coopmat() != vulkan::Context::CoopMat::kNone && !ctx().exact_f32() && dt == DType::f32;
  }
  // Runs bmm on a [B, H, M, K] and b [Bb, H, K, N] (any strides) and checks y against float64
  // math on the operands as given (rounded to halves first where the tensor cores would).
  void expect_product(HostTensor& a, HostTensor& b, const Dims& d, bool halves, const std::string& what) {
    if (halves) {
      round_to_halves(a);
      round_to_halves(b);
    }
    auto out = run_gpu(OpKind::bmm, {&a, &b}, Attrs(OpKind::bmm));
    ASSERT_EQ(out[0].view.shape, (Shape{d.B, d.H, d.M, d.N}));
    const auto av = to_doubles(a.view), bv = to_doubles(b.view);
    std::vector<double> want;
    for (int64_t i = 0; i < d.B; ++i)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t m = 0; m < d.M; ++m)
          for (int64_t n = 0; n < d.N; ++n) {
            double s = 0;
            const int64_t ib = d.Bb == 1 ? 0 : i;
            for (int64_t k = 0; k < d.K; ++k)
              s += av[static_cast<size_t>(((i * d.H + h) * d.M + m) * d.K + k)] *
                   bv[static_cast<size_t>(((ib * d.H + h) * d.K + k) * d.N + n)];
            want.push_back(s);
          }
    const DType dt = a.view.dtype;
    const double atol = (dt == DType::f16 || halves ? 2e-4 : 1e-5) * std::sqrt(static_cast<double>(d.K));
    expect_close(to_doubles(out[0].view), want, atol, rtol_for(dt) + 1e-5,
                 (what + " " + dtype_name(dt) + " M" + std::to_string(d.M) + " N" + std::to_string(d.N) + " K" +
                  std::to_string(d.K))
                     .c_str());
  }
};

TEST_F(VkBmm, OperandsAlongKBatchedAndBroadcast) {
  std::mt19937 rng(71);
  const std::vector<Case> cases = {
      {DType::f32, 2, 3, 70, 97, 64, true},    // partial tiles in M and N
      {DType::f32, 1, 2, 130, 129, 128, false},
      {DType::f16, 2, 2, 64, 33, 40, false},   // K not a multiple of 16
      {DType::f32, 1, 1, 63, 50, 16, false},   // M < 64: portable kernel everywhere
  };
  for (const Case& c : cases) {
    // a: q-like [B, H, M, K] permuted from [B, M, H, K]; b: [Bb, H, K, N] viewed from [Bb, H, N, K].
    HostTensor a = random_strided(c.dt, Shape{c.B, c.H, c.M, c.K}, {0, 2, 1, 3}, 8, rng);
    const int64_t Bb = c.broadcast_b ? 1 : c.B;
    HostTensor b = random_strided(c.dt, Shape{Bb, c.H, c.K, c.N}, {0, 1, 3, 2}, 16, rng);
    const bool halves = tensor_cores_round(c.dt) && c.M >= 64;
    expect_product(a, b, {c.B, Bb, c.H, c.M, c.N, c.K}, halves, "bmm");
  }
}

// Attention's second product, scores times V: a [B, H, M, K] dense, b the V view [B, H, K, N]
// of [B, K, H, N] (its rows run along N). On devices with cooperative matrices the tensor-core
// kernel gathers b through its strides and takes K of any length (Whisper's encoder: 1500 keys);
// elsewhere the portable kernel. K % 8 != 0, b at an odd offset, and a whole number of 8 too.
TEST_F(VkBmm, ScoresTimesValuesAnyLayoutAndLength) {
  std::mt19937 rng(73);
  const std::vector<Case> cases = {
      {DType::f32, 1, 2, 150, 64, 150},  // K % 8 == 6
      {DType::f16, 1, 2, 96, 40, 100},   // K % 8 == 4, partial tiles in N
      {DType::f32, 2, 1, 70, 33, 64},    // K % 8 == 0, b still along N
  };
  for (const Case& c : cases) {
    HostTensor a = random_strided(c.dt, Shape{c.B, c.H, c.M, c.K}, {0, 1, 2, 3}, 8, rng);
    HostTensor b = random_strided(c.dt, Shape{c.B, c.H, c.K, c.N}, {0, 2, 1, 3}, 3, rng);
    const bool halves = tensor_cores_round(c.dt);
    expect_product(a, b, {c.B, c.B, c.H, c.M, c.N, c.K}, halves, "scores x V bmm");
  }
}

// rel_shift = 1 (relative-position attention's position scores): y [B, H, M, M] keeps the
// full product's (2M - 1 columns) entry [i, j - i + M - 1]. The tensor cores compute only the
// window each tile row needs (M >= 64: 70 with partial tiles, 200 over several tile rows); the
// portable path computes the full product and copies the shifted view.
TEST_F(VkBmm, RelShiftWritesTheShiftedWindow) {
  std::mt19937 rng(72);
  for (DType dt : {DType::f16, DType::f32})
    for (int64_t M : {5, 70, 200}) {
      const int64_t B = 1, H = 2, K = 64, N = 2 * M - 1;
      HostTensor a = random_strided(dt, Shape{B, H, M, K}, {0, 2, 1, 3}, 8, rng);
      HostTensor b = random_strided(dt, Shape{B, H, K, N}, {0, 1, 3, 2}, 0, rng);
      const bool halves = tensor_cores_round(dt) && M >= 64;
      if (halves) {
        round_to_halves(a);
        round_to_halves(b);
      }
      Attrs at(OpKind::bmm);
      at.set_i("rel_shift", 1);
      at.set_s("dtype", "f32");  // f32 scores from halves too, as Parakeet's position term
      auto out = run_gpu(OpKind::bmm, {&a, &b}, at);
      ASSERT_EQ(out[0].view.shape, (Shape{B, H, M, M}));
      ASSERT_EQ(out[0].view.dtype, DType::f32);
      const auto av = to_doubles(a.view), bv = to_doubles(b.view);
      std::vector<double> want;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < M; ++j) {
            const int64_t n = j - i + M - 1;
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
              s += av[static_cast<size_t>((h * M + i) * K + k)] * bv[static_cast<size_t>((h * K + k) * N + n)];
            want.push_back(s);
          }
      const double atol = (dt == DType::f16 || halves ? 2e-4 : 1e-5) * std::sqrt(static_cast<double>(K));
      expect_close(to_doubles(out[0].view), want, atol, 2e-5,
                   (std::string("rel_shift bmm ") + dtype_name(dt) + " M" + std::to_string(M)).c_str());
    }
}

}  // namespace
}  // namespace vrun::test
