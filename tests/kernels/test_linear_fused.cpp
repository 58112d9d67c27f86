// linear's x-reading attributes: glu = silu (the projection of x[..., :K] * silu(x[..., K:]))
// and x_dims (K spread over x's trailing dims, read from a permuted view without a copy), with
// bias and residual, against float64 gating and products.
#include <cmath>
#include <string>

#include "kernel_test_util.h"

namespace vrun::test {
namespace {

// x [m, 2k] row-major doubles -> the gated rows [m, k].
std::vector<double> ref_glu_rows(const std::vector<double>& x, int64_t m, int64_t k) {
  std::vector<double> out(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) out[i * k + j] = x[i * 2 * k + j] * silu_f64(x[i * 2 * k + k + j]);
  return out;
}

// y = xe W^T (+ b) (+ r) in float64, and per output the bound its f32 computation must meet:
// quantised weights with few rows quantise x per block of 32 (error <= amax / 32512 per element,
// see test_linear.cpp), everything else 1e-5 of the sum of |products| plus f32 rounding.
struct Want {
  std::vector<double> y, bound;
};
Want ref_linear(const std::vector<double>& xe, const TensorView& w, const TensorView* b, const TensorView* r,
                int64_t m) {
  const int64_t n = w.shape[0], k = w.shape[1];
  const std::vector<double> wd = to_doubles(w);
  const std::vector<double> bd = b ? to_doubles(*b) : std::vector<double>(static_cast<size_t>(n), 0.0);
  const std::vector<double> rd = r ? to_doubles(*r) : std::vector<double>(static_cast<size_t>(m * n), 0.0);
  Want out{std::vector<double>(static_cast<size_t>(m * n)), std::vector<double>(static_cast<size_t>(m * n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bd[j], mag = 0, bound = 1e-5;
      for (int64_t p = 0; p < k; ++p) {
        s += xe[i * k + p] * wd[j * k + p];
        mag += std::fabs(xe[i * k + p] * wd[j * k + p]);
      }
      if (is_quantized(w.dtype)) bound += quant_x_bound(&xe[i * k], &wd[j * k], k);
      out.y[i * n + j] = s + rd[i * n + j];
      out.bound[i * n + j] = bound + 1e-5 * mag + 1e-6 * std::fabs(out.y[i * n + j]);
    }
  return out;
}

void expect_within(const std::vector<double>& got, const Want& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.y.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = want.bound[i] + rel * std::fabs(want.y[i]);
    if (!(std::fabs(got[i] - want.y[i]) <= tol) && ++bad <= 5)
      ADD_FAILURE() << what << " y[" << i << "] = " << got[i] << ", want " << want.y[i] << " +- " << tol;
  }
  EXPECT_EQ(bad, 0) << what;
}

// glu = silu over 1, 3 and 40 rows (dot-product, integer and sgemm paths) of a K-major strided x,
// with and without bias and residual; an f16 x (y rounded to f16).
TEST(LinearGlu, SiluGatesTheSecondHalf) {
  std::mt19937 rng(31);
  ThreadPool pool(2);
  const int64_t K = 64, N = 13;
  for (DType wt : {DType::f32, DType::f16, DType::q8_0, DType::q4_0})
    for (int64_t M : {1, 3, 40})
      for (bool extras : {false, true}) {
        const std::string what = std::string("glu w=") + dtype_name(wt) + " M=" + std::to_string(M) + (extras ? " bias+residual" : "");
        SCOPED_TRACE(what);
        HostTensor x = random_strided(DType::f32, Shape{1, M, 2 * K}, {0, 2, 1}, 3, rng);
        fill_uniform(x.view, rng, -3, 3);
        HostTensor w = random_tensor(wt, Shape{N, K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
        HostTensor r = random_tensor(DType::f16, Shape{1, M, N}, rng);
        Attrs a(OpKind::linear);
        a.set_s("glu", "silu");
        RunResult got = run_cpu(OpKind::linear, {x.view, w.view, extras ? b.view : TensorView{}, extras ? r.view : TensorView{}}, a, &pool);
        ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
        ASSERT_EQ(got.outputs[0].view.shape, (Shape{1, M, N}));
        const std::vector<double> xe = ref_glu_rows(to_doubles(x.view), M, K);
        expect_within(to_doubles(got.outputs[0].view), ref_linear(xe, w.view, extras ? &b.view : nullptr, extras ? &r.view : nullptr, M),
                      0, what);
      }
  for (int64_t M : {1, 6}) {
    HostTensor x = random_tensor(DType::f16, Shape{M, 2 * K}, rng, -3, 3);
    HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng);
    Attrs a(OpKind::linear);
    a.set_s("glu", "silu");
    RunResult got = run_cpu(OpKind::linear, {x.view, w.view}, a, &pool);
    ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
    EXPECT_EQ(got.outputs[0].view.dtype, DType::f16);
    const std::vector<double> xe = ref_glu_rows(to_doubles(x.view), M, K);
    expect_within(to_doubles(got.outputs[0].view), ref_linear(xe, w.view, nullptr, nullptr, M), 1e-3,
                  "glu f16 x M=" + std::to_string(M));
  }
}

// x_dims = 2: attention's output as a permuted view [B, L, H, D] of [B, H, L, D] (strided unless
// L = 1) and a dense [2, 3, H, D]; y is [.., N] with K = H * D.
TEST(LinearXDims, TrailingDimsFormK) {
  std::mt19937 rng(32);
  ThreadPool pool(2);
  const int64_t H = 4, D = 16, K = H * D, N = 11;
  for (DType wt : {DType::f16, DType::q8_0})
    for (int64_t L : {1, 5, 20})
      for (bool extras : {false, true}) {
        const std::string what = std::string("x_dims=2 w=") + dtype_name(wt) + " L=" + std::to_string(L) + (extras ? " bias+residual" : "");
        SCOPED_TRACE(what);
        HostTensor x = random_strided(DType::f32, Shape{1, L, H, D}, {0, 2, 1, 3}, 0, rng);
        HostTensor w = random_tensor(wt, Shape{N, K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
        HostTensor r = random_strided(DType::f32, Shape{1, L, N}, {0, 2, 1}, 2, rng);
        Attrs a(OpKind::linear);
        a.set_i("x_dims", 2);
        RunResult got = run_cpu(OpKind::linear, {x.view, w.view, extras ? b.view : TensorView{}, extras ? r.view : TensorView{}}, a, &pool);
        ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
        ASSERT_EQ(got.outputs[0].view.shape, (Shape{1, L, N}));
        // Row-major doubles of the [1, L, H, D] view are the [L, K] rows.
        expect_within(to_doubles(got.outputs[0].view),
                      ref_linear(to_doubles(x.view), w.view, extras ? &b.view : nullptr, extras ? &r.view : nullptr, L), 0, what);
      }
  HostTensor x = random_tensor(DType::f32, Shape{2, 3, H, D}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{N, K}, rng);
  Attrs a(OpKind::linear);
  a.set_i("x_dims", 2);
  RunResult got = run_cpu(OpKind::linear, {x.view, w.view}, a, &pool);
  ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
  ASSERT_EQ(got.outputs[0].view.shape, (Shape{2, 3, N}));
  expect_within(to_doubles(got.outputs[0].view), ref_linear(to_doubles(x.view), w.view, nullptr, nullptr, 6), 0, "dense x_dims=2");
}

// act = gelu / silu: y = act(x W^T + bias) + residual, alone and after a layer norm prologue
// (Whisper's fc1, Parakeet's feed-forward), over 1, 3 and 40 rows. Both slopes stay below 1.13,
// so the pre-activation bound carries over with that factor.
TEST(LinearAct, AfterBiasBeforeResidual) {
  std::mt19937 rng(34);
  ThreadPool pool(2);
  const int64_t K = 64, N = 21;
  for (const char* act : {"gelu", "silu"})
  for (DType wt : {DType::f16, DType::q8_0})
    for (int64_t M : {1, 3, 40})
      for (bool norm : {false, true}) {
        const std::string what = std::string(act) + " w=" + dtype_name(wt) + " M=" + std::to_string(M) + (norm ? " layer norm" : "");
        SCOPED_TRACE(what);
        const GeluLinearCase c = make_gelu_linear_case(wt, M, N, K, norm, rng, act);
        std::vector<TensorView> in = {c.x.view, c.w.view, c.b.view, c.r.view};
        if (norm) in.insert(in.end(), {c.g.view, c.be.view});
        RunResult got = run_cpu(OpKind::linear, in, c.attrs, &pool);
        ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
        Want want = ref_linear(c.rows, c.w.view, &c.b.view, nullptr, M);
        const std::vector<double> rd = to_doubles(c.r.view);
        for (size_t i = 0; i < want.y.size(); ++i) {
          want.y[i] = act_f64(act, want.y[i]) + rd[i];
          want.bound[i] = 1.13 * want.bound[i] + 1e-6 * (1 + std::fabs(want.y[i]));
        }
        expect_within(to_doubles(got.outputs[0].view), want, norm ? 1e-5 : 0, what);
      }
  Attrs bad(OpKind::linear);
  bad.set_s("act", "relu");
  HostTensor x = random_tensor(DType::f32, Shape{2, K}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{N, K}, rng);
  RunResult r = run_cpu(OpKind::linear, {x.view, w.view}, bad);
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("act must be none, gelu or silu, got 'relu'"), std::string::npos) << r.status.message();
  Attrs bad_dtype(OpKind::linear);
  bad_dtype.set_s("dtype", "i32");
  r = run_cpu(OpKind::linear, {x.view, w.view}, bad_dtype);
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("dtype must be f32, f16 or bf16"), std::string::npos) << r.status.message();
}

// dtype: y stored in another dtype than x's, rounded once after act and the residual: f32 rows
// into halves (silu, as Parakeet's feed-forward hidden rows), halves into f32 with an f32
// residual (the projection back into the residual stream).
TEST(LinearAct, OutputDtype) {
  std::mt19937 rng(35);
  ThreadPool pool(2);
  const int64_t K = 48, N = 19;
  for (int64_t M : {1, 40}) {
    HostTensor x = random_tensor(DType::f32, Shape{M, K}, rng, -2, 2);
    HostTensor w = random_tensor(DType::f16, Shape{N, K}, rng);
    HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
    Attrs a(OpKind::linear);
    a.set_s("act", "silu").set_s("dtype", "f16");
    RunResult got = run_cpu(OpKind::linear, {x.view, w.view, b.view}, a, &pool);
    ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
    ASSERT_EQ(got.outputs[0].view.dtype, DType::f16);
    Want want = ref_linear(to_doubles(x.view), w.view, &b.view, nullptr, M);
    for (size_t i = 0; i < want.y.size(); ++i) {
      want.y[i] = silu_f64(want.y[i]);
      want.bound[i] = 1.13 * want.bound[i] + 1e-3 * (1e-3 + std::fabs(want.y[i]));  // one rounding to f16
    }
    expect_within(to_doubles(got.outputs[0].view), want, 0, "f32 x -> f16 y, silu");

    HostTensor xh = random_tensor(DType::f16, Shape{M, K}, rng, -2, 2);
    HostTensor r = random_tensor(DType::f32, Shape{M, N}, rng);
    Attrs back(OpKind::linear);
    back.set_s("dtype", "f32");
    got = run_cpu(OpKind::linear, {xh.view, w.view, b.view, r.view}, back, &pool);
    ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
    ASSERT_EQ(got.outputs[0].view.dtype, DType::f32);
    expect_within(to_doubles(got.outputs[0].view), ref_linear(to_doubles(xh.view), w.view, &b.view, &r.view, M), 0,
                  "f16 x -> f32 y, residual");
  }
}

TEST(LinearGlu, RefusesBadCombinations) {
  std::mt19937 rng(33);
  HostTensor x = random_tensor(DType::f32, Shape{2, 64}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{8, 32}, rng);
  HostTensor g = random_tensor(DType::f32, Shape{32}, rng);
  Attrs both(OpKind::linear);
  both.set_s("glu", "silu").set_s("norm", "rms");
  RunResult r = run_cpu(OpKind::linear, {x.view, w.view, TensorView{}, TensorView{}, g.view}, both);
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("glu = silu and norm = rms cannot be combined"), std::string::npos) << r.status.message();

  Attrs glu(OpKind::linear);
  glu.set_s("glu", "silu");
  HostTensor w40 = random_tensor(DType::f32, Shape{8, 40}, rng);
  r = run_cpu(OpKind::linear, {x.view, w40.view}, glu);
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("needs x's last dim = 2 * K = 80"), std::string::npos) << r.status.message();

  Attrs bad(OpKind::linear);
  bad.set_s("glu", "gelu");
  r = run_cpu(OpKind::linear, {x.view, w.view}, bad);
  EXPECT_NE(r.status.message().find("glu must be none or silu, got 'gelu'"), std::string::npos) << r.status.message();

  HostTensor x4 = random_tensor(DType::f32, Shape{1, 2, 4, 16}, rng);
  HostTensor w64 = random_tensor(DType::f32, Shape{8, 64}, rng);
  Attrs glu2(OpKind::linear);
  glu2.set_s("glu", "silu").set_i("x_dims", 2);
  r = run_cpu(OpKind::linear, {x4.view, w64.view}, glu2);
  EXPECT_NE(r.status.message().find("needs x_dims = 1, got x_dims = 2"), std::string::npos) << r.status.message();

  Attrs d2(OpKind::linear);
  d2.set_i("x_dims", 2);
  r = run_cpu(OpKind::linear, {x4.view, w.view}, d2);
  EXPECT_NE(r.status.message().find("disagree on K (64 vs 32) with x_dims > 1"), std::string::npos) << r.status.message();
  Attrs d5(OpKind::linear);
  d5.set_i("x_dims", 5);
  r = run_cpu(OpKind::linear, {x4.view, w64.view}, d5);
  EXPECT_NE(r.status.message().find("x_dims must be in 1..4 (x's rank), got 5"), std::string::npos) << r.status.message();
}

}  // namespace
}  // namespace vrun::test
