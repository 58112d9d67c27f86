// linear against a float64 reference that dequantises the GGUF block layouts itself.
#include <strings.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/blas_core.h"
#include "runtime/base/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/quant_dot.h"

namespace vrun::test {
namespace {

// W [n, k] as doubles, read byte by byte from the GGUF layouts.
std::vector<double> ref_dequant(const TensorView& w) {
  const int64_t n = w.shape[0], k = w.shape[1];
  if (!is_quantized(w.dtype)) return to_doubles(w);
  std::vector<double> out(static_cast<size_t>(n * k));
  const auto* p = static_cast<const uint8_t*>(w.data);
  auto f16 = [](const uint8_t* b) {
    uint16_t h;
    std::memcpy(&h, b, 2);
    return static_cast<double>(f16_to_f32(h));
  };
  for (int64_t e = 0; e < n * k; e += 32) {
    double* o = out.data() + e;
    if (w.dtype == DType::q8_0) {
      const double d = f16(p);
      for (int j = 0; j < 32; ++j) o[j] = d * static_cast<int8_t>(p[2 + j]);
      p += 34;
    } else if (w.dtype == DType::q4_0) {
      const double d = f16(p);
      for (int j = 0; j < 16; ++j) {
        o[j] = d * ((p[2 + j] & 15) - 8);
        o[j + 16] = d * ((p[2 + j] >> 4) - 8);
      }
      p += 18;
    } else {
      const double d = f16(p), m = f16(p + 2);
      for (int j = 0; j < 16; ++j) {
        o[j] = d * (p[4 + j] & 15) + m;
        o[j + 16] = d * (p[4 + j] >> 4) + m;
      }
      p += 20;
    }
  }
  return out;
}

struct Case {
  DType wt;
  int64_t m, k, n;
  bool bias;
};

// Checks y against x @ W^T + b. For quantised weights the activation is rounded per block of 32
// to steps of amax / (127 * 128) (error <= amax / 32512 per element), so each output may be off
// by sum_blocks (amax_b / 32512) * sum_{k in b} |w_k|; the tolerance is that bound (+1e-4 for
// float summation). Float weights: 1e-4 absolute + 1e-4 relative (f32 accumulation over K <= 200).
void check_linear(const TensorView& x, const TensorView& w, const TensorView* b, ThreadPool* pool, const char* what) {
  std::vector<TensorView> in{x, w};
  if (b) in.push_back(*b);
  RunResult r = run_cpu(OpKind::linear, in, Attrs(OpKind::linear), pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  const int64_t k = w.shape[1], n = w.shape[0], m = x.numel() / k;
  const std::vector<double> xd = to_doubles(x), wd = ref_dequant(w);
  const std::vector<double> bd = b ? to_doubles(*b) : std::vector<double>(static_cast<size_t>(n), 0.0);
  const std::vector<double> got = to_doubles(r.outputs[0].view);
  ASSERT_EQ(got.size(), static_cast<size_t>(m * n));
  int bad = 0;
  const double out_eps = x.dtype == DType::f32 ? 0 : (x.dtype == DType::f16 ? 1e-3 : 8e-3);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = bd[j], bound = 1e-4;
      for (int64_t p = 0; p < k; ++p) want += xd[i * k + p] * wd[j * k + p];
      if (is_quantized(w.dtype)) {
        bound += quant_x_bound(&xd[i * k], &wd[j * k], k);
      } else {
        bound += 1e-4 * std::fabs(want);
      }
      bound += out_eps * std::fabs(want);
      const double g = got[i * n + j];
      if (!(std::fabs(g - want) <= bound) && ++bad <= 5)
        ADD_FAILURE() << what << " y[" << i << ", " << j << "] = " << g << ", want " << want << " +- " << bound;
    }
  EXPECT_EQ(bad, 0) << what;
}

TEST(Linear, EveryWeightDtypeAndRowCount) {
  std::mt19937 rng(1);
  ThreadPool pool2(2), pool1(1);
  for (DType wt : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1}) {
    for (int64_t m : {1, 5, 33, 130}) {
      const int64_t k = 96, n = 7;
      HostTensor x = random_tensor(DType::f32, Shape{m, k}, rng);
      HostTensor w = random_tensor(wt, Shape{n, k}, rng);
      HostTensor b = random_tensor(DType::f32, Shape{n}, rng);
      const std::string what = std::string(dtype_name(wt)) + " M=" + std::to_string(m);
      check_linear(x.view, w.view, &b.view, &pool2, what.c_str());
      check_linear(x.view, w.view, nullptr, &pool1, (what + " no bias, 1 thread").c_str());
    }
  }
}

TEST(Linear, WideOutputUsesEveryTileShape) {
  // N and M not multiples of the 4 x 4 tile, K long enough for several blocks per row.
  std::mt19937 rng(2);
  ThreadPool pool(2);
  for (DType wt : {DType::q4_1, DType::q4_0, DType::q8_0}) {
    HostTensor x = random_tensor(DType::f32, Shape{7, 320}, rng, -3, 3);
    HostTensor w = random_tensor(wt, Shape{67, 320}, rng);
    check_linear(x.view, w.view, nullptr, &pool, dtype_name(wt));
    // One row (decode): eight-block steps, with and without a tail of blocks.
    for (int64_t k : {256, 320}) {
      HostTensor x1 = random_tensor(DType::f32, Shape{1, k}, rng, -3, 3);
      HostTensor w1 = random_tensor(wt, Shape{37, k}, rng);
      check_linear(x1.view, w1.view, nullptr, &pool, (std::string(dtype_name(wt)) + " M=1 K=" + std::to_string(k)).c_str());
    }
  }
}

TEST(Linear, StridedOffsetAndHalfInputs) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  // x [3, 4, K] stored K-major (strides non-unit along K) with an offset.
  HostTensor xs = random_strided(DType::f32, Shape{3, 4, 64}, {2, 0, 1}, 5, rng);
  HostTensor w = random_tensor(DType::q4_1, Shape{9, 64}, rng);
  check_linear(xs.view, w.view, nullptr, &pool, "strided x");
  HostTensor wf = random_tensor(DType::f16, Shape{9, 64}, rng);
  check_linear(xs.view, wf.view, nullptr, &pool, "strided x, f16 W");
  for (DType xt : {DType::f16, DType::bf16}) {
    HostTensor xh = random_tensor(xt, Shape{2, 6, 64}, rng);
    HostTensor b = random_tensor(xt, Shape{9}, rng);
    check_linear(xh.view, w.view, &b.view, &pool, dtype_name(xt));
    check_linear(xh.view, wf.view, &b.view, &pool, dtype_name(xt));
  }
  // A broadcast x (0 stride over rows) exercises the packing path.
  HostTensor row = random_tensor(DType::f32, Shape{1, 64}, rng);
  check_linear(broadcast_view(row.view, Shape{6, 64}), w.view, nullptr, &pool, "broadcast x");
}

TEST(Linear, ScalarAndVectorPathsAgree) {
  std::mt19937 rng(4);
  ThreadPool pool(1);
  for (DType wt : {DType::q4_1, DType::q4_0, DType::q8_0}) {
    for (int64_t m : {1, 6}) {
      HostTensor x = random_tensor(DType::f32, Shape{m, 352}, rng, -2, 2);
      HostTensor w = random_tensor(wt, Shape{11, 352}, rng);
      RunResult fast = run_cpu(OpKind::linear, {x.view, w.view}, Attrs(OpKind::linear), &pool);
      quant_dot_force_scalar(true);
      RunResult slow = run_cpu(OpKind::linear, {x.view, w.view}, Attrs(OpKind::linear), &pool);
      quant_dot_force_scalar(false);
      quant_dot_force_avx2(true);
      EXPECT_NE(std::string(quant_dot_isa()), "avx512vnni");
      RunResult avx2 = run_cpu(OpKind::linear, {x.view, w.view}, Attrs(OpKind::linear), &pool);
      quant_dot_force_avx2(false);
      ASSERT_TRUE(fast.status.is_ok() && slow.status.is_ok() && avx2.status.is_ok());
      // Same integer block sums; only the float summation order differs.
      const std::string what = std::string(dtype_name(wt)) + " M=" + std::to_string(m);
      expect_close(to_doubles(fast.outputs[0].view), to_doubles(slow.outputs[0].view), 1e-4, 1e-5, what.c_str());
      expect_close(to_doubles(avx2.outputs[0].view), to_doubles(slow.outputs[0].view), 1e-4, 1e-5,
                   (what + " (AVX2 cap)").c_str());
    }
  }
}

// A batched decode step's rows (linear's decode = 1) each have the bits of the row alone, at any
// row count and on every vector path the CPU has: a served sequence's logits must be those of
// the sequence alone (the VNNI one-row q4_1 kernel once summed in another order than its
// many-row kernels).
TEST(Linear, DecodeRowsHaveTheBitsOfEachRowAlone) {
  std::mt19937 rng(8);
  ThreadPool pool(1);
  Attrs decode(OpKind::linear);
  decode.set_i("decode", 1);
  for (int cap = 0; cap < 3; ++cap) {  // 0 the best the CPU has, 1 AVX2, 2 scalar
    quant_dot_force_scalar(false);  // the detected vector unit
    if (cap == 1) quant_dot_force_avx2(true);
    if (cap == 2) quant_dot_force_scalar(true);
    for (DType wt : {DType::q4_1, DType::q4_0, DType::q8_0, DType::f16, DType::f32}) {
      HostTensor w = random_tensor(wt, Shape{37, 576}, rng);
      for (int64_t m : {2, 5, 9, 17}) {
        HostTensor x = random_tensor(DType::f32, Shape{m, 576}, rng, -2, 2);
        RunResult all = run_cpu(OpKind::linear, {x.view, w.view}, decode, &pool);
        ASSERT_TRUE(all.status.is_ok()) << all.status.to_string();
        for (int64_t i = 0; i < m; ++i) {
          HostTensor row = make_tensor(DType::f32, Shape{1, 576});
          std::memcpy(row.view.data, static_cast<const float*>(x.view.data) + i * 576, 576 * sizeof(float));
          RunResult one = run_cpu(OpKind::linear, {row.view, w.view}, Attrs(OpKind::linear), &pool);
          ASSERT_TRUE(one.status.is_ok());
          EXPECT_EQ(std::memcmp(static_cast<const float*>(all.outputs[0].view.data) + i * 37, one.outputs[0].view.data, 37 * sizeof(float)), 0)
              << dtype_name(wt) << " row " << i << " of " << m << ", " << quant_dot_isa();
        }
      }
    }
  }
  quant_dot_force_scalar(false);
}

TEST(Linear, ActivationBlocksReconstructTheirInput) {
  // Each block: x ~= d * (128 * hi + lo) within half a step, s = the block's sum, and the vector
  // and portable quantisers give the same quants.
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> dist(-5, 5);
  std::vector<float> x(320);
  for (auto& v : x) v = dist(rng);
  std::fill(x.begin() + 64, x.begin() + 96, 0.f);  // an all-zero block
  x[100] = 1e-30f;                                  // a tiny value among normal ones
  std::vector<BlockQ8Act> fast(10), slow(10);
  quantize_act_row(x.data(), fast.data(), 320);
  quant_dot_force_scalar(true);
  quantize_act_row(x.data(), slow.data(), 320);
  quant_dot_force_scalar(false);
  for (int b = 0; b < 10; ++b) {
    double amax = 0, sum = 0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
      sum += x[b * 32 + j];
    }
    EXPECT_NEAR(fast[b].s, sum, 1e-4) << "block " << b;
    EXPECT_FLOAT_EQ(fast[b].d, slow[b].d) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      EXPECT_EQ(fast[b].qs[j], slow[b].qs[j]) << "block " << b << " element " << j;
      EXPECT_EQ(fast[b].ql[j], slow[b].ql[j]) << "block " << b << " element " << j;
      EXPECT_LE(std::abs(fast[b].ql[j]), 64);
      const double got = static_cast<double>(fast[b].d) * (128 * fast[b].qs[j] + fast[b].ql[j]);
      EXPECT_NEAR(got, x[b * 32 + j], amax / 32512 * 1.01 + 1e-30) << "block " << b << " element " << j;
    }
  }
}

// residual: y = x W^T + b + r, r strided (a permuted view), for one row (decode) and many.
TEST(Linear, ResidualIsAddedToEveryOutput) {
  std::mt19937 rng(23);
  const int64_t K = 64, N = 24;
  for (int64_t M : {1, 5, 40})
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE("M " + std::to_string(M) + (with_bias ? " with bias" : ""));
      HostTensor x = random_tensor(DType::f32, Shape{1, M, K}, rng);
      HostTensor w = random_tensor(DType::q8_0, Shape{N, K}, rng);
      HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
      HostTensor r = random_strided(DType::f16, Shape{1, M, N}, {0, 2, 1}, 3, rng);
      RunResult got = run_cpu(OpKind::linear, {x.view, w.view, with_bias ? b.view : TensorView{}, r.view}, Attrs(OpKind::linear));
      ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
      const std::vector<double> xd = to_doubles(x.view), wd = ref_dequant(w.view), bd = to_doubles(b.view), rd = to_doubles(r.view);
      std::vector<double> want(static_cast<size_t>(M * N));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = rd[i * N + j] + (with_bias ? bd[j] : 0.0);
          for (int64_t k = 0; k < K; ++k) s += xd[i * K + k] * wd[j * K + k];
          want[i * N + j] = s;
        }
      // M = 1 quantises x to 15-bit blocks (decode path): a few 1e-4 of the dot's magnitude.
      expect_close(to_doubles(got.outputs[0].view), want, 2e-3, 1e-3, "linear + residual");
    }
  HostTensor x = random_tensor(DType::f32, Shape{2, 32}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{8, 32}, rng);
  HostTensor bad = random_tensor(DType::f32, Shape{2, 9}, rng);
  EXPECT_FALSE(run_cpu(OpKind::linear, {x.view, w.view, TensorView{}, bad.view}, Attrs(OpKind::linear)).status.is_ok());
}

// norm prologue: y = norm(x) W^T + b (+ r) with norm layer (with and without its bias) and rms,
// against float64 normalisation and products. x carries a common offset of 3 (a mean that
// one-pass statistics would lose precision to) and is strided; M = 1 takes the decode path.
TEST(Linear, NormPrologueMatchesLayerAndRmsNorm) {
  std::mt19937 rng(24);
  ThreadPool pool(2);
  const int64_t K = 96, N = 13;
  for (const char* norm : {"layer", "rms"})
    for (bool norm_bias : {false, true})
      for (int64_t M : {1, 6, 40})
        for (DType wt : {DType::f16, DType::q8_0}) {
          if (norm_bias && std::string(norm) == "rms") continue;
          SCOPED_TRACE(std::string(norm) + (norm_bias ? " with bias" : "") + " M " + std::to_string(M) + " " + dtype_name(wt));
          HostTensor x = random_strided(DType::f32, Shape{M, K}, {1, 0}, 3, rng);
          fill_uniform(x.view, rng, 2, 4);
          HostTensor w = random_tensor(wt, Shape{N, K}, rng);
          HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
          HostTensor g = random_tensor(DType::f32, Shape{K}, rng, 0.5, 1.5);
          HostTensor nb = random_tensor(DType::f16, Shape{K}, rng);
          HostTensor r = random_tensor(DType::f32, Shape{M, N}, rng);
          Attrs a(OpKind::linear);
          a.set_s("norm", norm).set_f("eps", 1e-5);
          RunResult got = run_cpu(OpKind::linear, {x.view, w.view, b.view, r.view, g.view, norm_bias ? nb.view : TensorView{}}, a, &pool);
          ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
          const std::vector<double> xn = ref_norm_rows(to_doubles(x.view), M, K, std::string(norm) == "rms", 1e-5, to_doubles(g.view),
                                                       norm_bias ? to_doubles(nb.view) : std::vector<double>());
          const std::vector<double> wd = ref_dequant(w.view), bd = to_doubles(b.view), rd = to_doubles(r.view);
          std::vector<double> want(static_cast<size_t>(M * N));
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double s = bd[j] + rd[i * N + j];
              for (int64_t k = 0; k < K; ++k) s += xn[i * K + k] * wd[j * K + k];
              want[i * N + j] = s;
            }
          // Quantised weights with few rows quantise the normalised x per block (about 1e-4 of a
          // product of sums of ~10); float paths stay near f32 rounding.
          const double tol = is_quantized(wt) ? 3e-3 : 2e-4;
          expect_close(to_doubles(got.outputs[0].view), want, tol, tol, "linear with a norm prologue");
        }
  // norm_bias without a layer norm, and an unknown norm, are refused by name.
  HostTensor x = random_tensor(DType::f32, Shape{2, 32}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{8, 32}, rng);
  HostTensor g = random_tensor(DType::f32, Shape{32}, rng);
  Attrs rms(OpKind::linear);
  rms.set_s("norm", "rms");
  RunResult r = run_cpu(OpKind::linear, {x.view, w.view, TensorView{}, TensorView{}, g.view, g.view}, rms);
  EXPECT_NE(r.status.message().find("norm_bias given with norm = rms"), std::string::npos) << r.status.message();
  Attrs bad(OpKind::linear);
  bad.set_s("norm", "batch");
  r = run_cpu(OpKind::linear, {x.view, w.view, TensorView{}, TensorView{}, g.view}, bad);
  EXPECT_NE(r.status.message().find("norm must be none, layer or rms"), std::string::npos) << r.status.message();
}

TEST(Linear, RejectsBadShapes) {
  std::mt19937 rng(5);
  HostTensor x = random_tensor(DType::f32, Shape{2, 40}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{3, 48}, rng);
  RunResult r = run_cpu(OpKind::linear, {x.view, w.view}, Attrs(OpKind::linear));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("disagree on K (40 vs 48)"), std::string::npos) << r.status.message();

  HostTensor wq = random_tensor(DType::f32, Shape{3, 40}, rng);
  wq.view.dtype = DType::q4_0;  // shape check runs before any data is read
  r = run_cpu(OpKind::linear, {x.view, wq.view}, Attrs(OpKind::linear));
  EXPECT_NE(r.status.message().find("K % 32"), std::string::npos) << r.status.message();

  HostTensor w40 = random_tensor(DType::f32, Shape{3, 40}, rng);
  HostTensor b = random_tensor(DType::f32, Shape{4}, rng);
  r = run_cpu(OpKind::linear, {x.view, w40.view, b.view}, Attrs(OpKind::linear));
  EXPECT_NE(r.status.message().find("bias must be [3]"), std::string::npos) << r.status.message();

  HostTensor w3 = random_tensor(DType::f32, Shape{3, 40, 1}, rng);
  r = run_cpu(OpKind::linear, {x.view, w3.view}, Attrs(OpKind::linear));
  EXPECT_NE(r.status.message().find("weight must be [N, K]"), std::string::npos) << r.status.message();
}

// OpenBLAS that picked kernels older than the CPU when it loaded (a CPU model newer than the
// library: Emerald Rapids under Debian 12's 0.3.21 got SSE3 "Prescott" kernels) is made to choose
// again before the first product; the product then runs on the wider kernels and stays right.
TEST(Blas, KernelsUseTheCpusVectorUnits) {
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE chooses the kernels here";
  const BlasCore core = blas_core();
  if (core.now.empty()) GTEST_SKIP() << "built without OpenBLAS";
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const char* old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge"})
    EXPECT_NE(strcasecmp(core.now.c_str(), old), 0)
        << "OpenBLAS runs its " << core.now << " kernels on an AVX2 CPU (it picked " << core.at_load << " at load)";
  // A product large enough for OpenBLAS, A [67, 257] times B [130, 257] transposed, against float64.
  const int64_t m = 67, n = 130, k = 257;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> a(m * k), b(n * k), c(m * n, 0.f);
  for (float& v : a) v = nd(rng);
  for (float& v : b) v = nd(rng);
  sgemm(m, n, k, a.data(), k, b.data(), k, true, c.data(), n, false, nullptr);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * b[j * k + p];
      ASSERT_NEAR(c[i * n + j], want, 1e-4 * std::sqrt(static_cast<double>(k)) * 4) << "C[" << i << ", " << j << "]";
    }
}

}  // namespace
}  // namespace vrun::test
