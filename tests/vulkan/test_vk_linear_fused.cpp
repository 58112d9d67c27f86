// linear's x-reading attributes on the GPU: glu = silu gated inside the matvec kernels as x loads
// (1 to 8 rows, both reductions, the scalar path, q4_0's own single-row kernel staged and
// unstaged) and through a gated scratch copy for prefill shapes; x_dims = 2 over a permuted
// attention output. Against float64 gating and products on the same stored inputs.
#include <cmath>
#include <string>

#include "kernels/vulkan/ops_matvec.h"
#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkLinearFused : public VulkanTest {};

// y = xe W^T + b + r over rows of xe [M, K] (row-major doubles), and the largest sum of
// |products| (the scale of the f32 accumulation error).
std::vector<double> reference(const std::vector<double>& xe, const HostTensor& w, const HostTensor* b,
                              const HostTensor* r, int64_t M, double* mag) {
  const int64_t N = w.view.shape[0], K = w.view.shape[1];
  const auto wv = to_doubles(w.view);
  const std::vector<double> bv = b ? to_doubles(b->view) : std::vector<double>(static_cast<size_t>(N), 0.0);
  const std::vector<double> rv = r ? to_doubles(r->view) : std::vector<double>(static_cast<size_t>(M * N), 0.0);
  std::vector<double> y(static_cast<size_t>(M * N));
  *mag = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bv[n], sa = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += xe[m * K + k] * wv[n * K + k];
        sa += std::fabs(xe[m * K + k] * wv[n * K + k]);
      }
      y[m * N + n] = s + rv[m * N + n];
      *mag = std::max(*mag, sa);
    }
  return y;
}

std::vector<double> glu_rows(const std::vector<double>& x, int64_t M, int64_t K) {
  std::vector<double> out(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) out[m * K + k] = x[m * 2 * K + k] * silu_f64(x[m * 2 * K + K + k]);
  return out;
}

// [1, M, C] whose rows lie `pad` elements apart beyond C.
HostTensor padded_rows(DType dt, int64_t M, int64_t C, int64_t pad, std::mt19937& rng) {
  HostTensor t = random_tensor(dt, Shape{1, M, C + pad}, rng, -3, 3);
  t.view.shape = Shape{1, M, C};
  return t;
}

TEST_F(VkLinearFused, GluSilu) {
  std::mt19937 rng(41);
  struct Case {
    int64_t M, N, K;
    bool extras;  // bias and residual
  };
  // K 256: 8-element and half-block loads; K 100: the scalar path (float weights); 40 rows: the
  // gated scratch copy and the tiled matmul.
  const std::vector<Case> cases = {{1, 300, 256, true}, {2, 37, 256, false}, {3, 37, 256, true}, {5, 70, 96, false},
                                   {8, 70, 256, true},  {1, 20, 100, true},  {40, 33, 64, true}};
  struct ResetReduction {
    ~ResetReduction() { vulkan::set_matvec_shared_reduce_for_testing(false); }
  } reset;
  for (bool shared_reduce : {false, true})
    for (DType wdt : {DType::f32, DType::f16, DType::q8_0, DType::q4_0})
      for (const Case& c : cases) {
        if (is_quantized(wdt) && c.K % 32) continue;
        if (shared_reduce && (wdt != DType::f16 || c.M > 8)) continue;
        // f32 and q8_0 weights share the gated loads with f16 and q4_0: fewer shapes keep CI time down.
        if (wdt == DType::f32 && c.M != 3) continue;
        if (wdt == DType::q8_0 && (c.M == 2 || c.M == 5 || c.M == 40)) continue;
        vulkan::set_matvec_shared_reduce_for_testing(shared_reduce);
        const std::string what = std::string("glu w=") + dtype_name(wdt) + " M=" + std::to_string(c.M) + " N=" +
                                 std::to_string(c.N) + " K=" + std::to_string(c.K) + (c.extras ? " bias+residual" : "") +
                                 (shared_reduce ? " shared reduction" : "");
        SCOPED_TRACE(what);
        HostTensor x = padded_rows(DType::f32, c.M, 2 * c.K, 8, rng);
        HostTensor w = random_tensor(wdt, Shape{c.N, c.K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{c.N}, rng);
        HostTensor r = random_tensor(DType::f32, Shape{1, c.M, c.N}, rng);
        Attrs a(OpKind::linear);
        a.set_s("glu", "silu");
        auto out = run_gpu(OpKind::linear, {&x, &w, c.extras ? &b : nullptr, c.extras ? &r : nullptr}, a);
        ASSERT_EQ(out[0].view.shape, (Shape{1, c.M, c.N}));
        double mag = 0;
        const auto want = reference(glu_rows(to_doubles(x.view), c.M, c.K), w, c.extras ? &b : nullptr,
                                    c.extras ? &r : nullptr, c.M, &mag);
        // f32 gating and sums; 40 rows may round x to halves on tensor cores: 1e-3 of the sum of
        // |products| covers that.
        expect_close(to_doubles(out[0].view), want, (c.M > 8 ? 1e-3 : 2e-5) * mag, 1e-4, what.c_str());
      }
}

// act = gelu / silu in the matvec epilogue (1 and 3 rows, alone and after a layer norm folded
// into the kernel, float and quantised weights, q4_0's single-row kernel), after the tiled matmul
// for 40 rows and in the tensor-core kernel's epilogue for 100 (where the device has one):
// y = act(x W^T + b) + r.
TEST_F(VkLinearFused, ActEpilogue) {
  std::mt19937 rng(43);
  const int64_t N = 70, K = 256;
  for (const char* act : {"gelu", "silu"})
  for (DType wdt : {DType::f16, DType::q8_0, DType::q4_0})
    for (int64_t M : {1, 3, 40, 100})
      for (bool norm : {false, true}) {
        if (M >= 40 && wdt != DType::f16) continue;
        const std::string what = std::string(act) + " w=" + dtype_name(wdt) + " M=" + std::to_string(M) + (norm ? " layer norm" : "");
        SCOPED_TRACE(what);
        const GeluLinearCase c = make_gelu_linear_case(wdt, M, N, K, norm, rng, act);
        std::vector<const HostTensor*> in = {&c.x, &c.w, &c.b, &c.r};
        if (norm) in.insert(in.end(), {&c.g, &c.be});
        auto out = run_gpu(OpKind::linear, in, c.attrs);
        double mag = 0;
        std::vector<double> want = reference(c.rows, c.w, &c.b, nullptr, M, &mag);
        const auto rv = to_doubles(c.r.view);
        for (size_t i = 0; i < want.size(); ++i) want[i] = act_f64(act, want[i]) + rv[i];
        expect_close(to_doubles(out[0].view), want, (M > 8 ? 1e-3 : 3e-5) * mag, 1e-4, what.c_str());
      }
}

// dtype: f32 rows projected into halves with silu (Parakeet's feed-forward hidden rows), and
// halves projected into an f32 residual stream (bias and an f32 residual): decode rows, the
// tiled matmul (40) and the tensor cores (100).
TEST_F(VkLinearFused, OutputDtype) {
  std::mt19937 rng(44);
  const int64_t N = 72, K = 128;
  for (int64_t M : {3, 40, 100}) {
    const std::string what = "M=" + std::to_string(M);
    SCOPED_TRACE(what);
    HostTensor x = random_tensor(DType::f32, Shape{1, M, K}, rng, -2, 2);
    HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng);
    HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
    Attrs a(OpKind::linear);
    a.set_s("act", "silu").set_s("dtype", "f16");
    auto out = run_gpu(OpKind::linear, {&x, &w, &b}, a);
    ASSERT_EQ(out[0].view.dtype, DType::f16);
    double mag = 0;
    std::vector<double> want = reference(to_doubles(x.view), w, &b, nullptr, M, &mag);
    for (double& v : want) v = silu_f64(v);
    expect_close(to_doubles(out[0].view), want, (M > 8 ? 1e-3 : 3e-5) * mag + 1e-3, 2e-3, ("f16 y " + what).c_str());

    HostTensor xh = random_tensor(DType::f16, Shape{1, M, K}, rng, -2, 2);
    HostTensor r = random_tensor(DType::f32, Shape{1, M, N}, rng);
    Attrs back(OpKind::linear);
    back.set_s("dtype", "f32");
    out = run_gpu(OpKind::linear, {&xh, &w, &b, &r}, back);
    ASSERT_EQ(out[0].view.dtype, DType::f32);
    want = reference(to_doubles(xh.view), w, &b, &r, M, &mag);
    expect_close(to_doubles(out[0].view), want, 3e-5 * mag, 1e-4, ("f32 y from halves " + what).c_str());
  }
}

// One row of q4_0 (its own kernel): x staged in shared memory (K 256) or read in place (K 8192,
// past the staging limit), f32 and f16 x, 16-byte-aligned or not.
TEST_F(VkLinearFused, GluSiluQ4SingleRow) {
  std::mt19937 rng(42);
  for (int64_t K : {256, 8192})
    for (DType xdt : {DType::f32, DType::f16})
      for (int64_t lead : {0, 1}) {
        const std::string what = "q4_0 glu K=" + std::to_string(K) + " x " + dtype_name(xdt) + " offset " + std::to_string(lead);
        SCOPED_TRACE(what);
        const int64_t N = 40;
        HostTensor xs = random_tensor(xdt, Shape{2 * K + lead}, rng, -3, 3);
        HostTensor x = xs;
        x.view.data = static_cast<uint8_t*>(xs.view.data) + lead * dtype_elem_size(xdt);
        x.view.shape = Shape{1, 2 * K};
        x.view.strides = contiguous_strides(x.view.shape);
        HostTensor w = random_tensor(DType::q4_0, Shape{N, K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
        HostTensor r = random_tensor(xdt, Shape{1, N}, rng);
        Attrs a(OpKind::linear);
        a.set_s("glu", "silu");
        auto out = run_gpu(OpKind::linear, {&x, &w, &b, &r}, a);
        double mag = 0;
        const auto want = reference(glu_rows(to_doubles(x.view), 1, K), w, &b, &r, 1, &mag);
        expect_close(to_doubles(out[0].view), want, 2e-5 * mag, rtol_for(xdt), what.c_str());
      }
}

// x_dims = 2 over attention's output permuted to [1, L, H, D] (dense for L = 1, copied for L > 1;
// 20 rows take the tiled matmul) and a dense [2, 3, H, D].
TEST_F(VkLinearFused, XDimsTwo) {
  std::mt19937 rng(43);
  const int64_t H = 4, D = 32, K = H * D, N = 45;
  for (DType wdt : {DType::f16, DType::q4_0, DType::q8_0})
    for (int64_t L : {1, 3, 20}) {
      const std::string what = std::string("x_dims=2 w=") + dtype_name(wdt) + " L=" + std::to_string(L);
      SCOPED_TRACE(what);
      HostTensor x = random_strided(DType::f32, Shape{1, L, H, D}, {0, 2, 1, 3}, 4, rng);
      HostTensor w = random_tensor(wdt, Shape{N, K}, rng);
      HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
      HostTensor r = random_tensor(DType::f32, Shape{1, L, N}, rng);
      Attrs a(OpKind::linear);
      a.set_i("x_dims", 2);
      auto out = run_gpu(OpKind::linear, {&x, &w, &b, &r}, a);
      ASSERT_EQ(out[0].view.shape, (Shape{1, L, N}));
      double mag = 0;
      const auto want = reference(to_doubles(x.view), w, &b, &r, L, &mag);
      expect_close(to_doubles(out[0].view), want, (L > 8 ? 1e-3 : 2e-5) * mag, 1e-4, what.c_str());
    }
  HostTensor x = random_tensor(DType::f32, Shape{2, 3, H, D}, rng);
  HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng);
  Attrs a(OpKind::linear);
  a.set_i("x_dims", 2);
  auto out = run_gpu(OpKind::linear, {&x, &w}, a);
  ASSERT_EQ(out[0].view.shape, (Shape{2, 3, N}));
  double mag = 0;
  const auto want = reference(to_doubles(x.view), w, nullptr, nullptr, 6, &mag);
  expect_close(to_doubles(out[0].view), want, 2e-5 * mag, 1e-4, "dense x_dims=2");
}

}  // namespace
}  // namespace vrun::test
