// The decode-shape linear (matvec kernels) with a bias and a residual both added in its epilogue:
// every weight dtype, 1 to 8 rows of x, residuals dense, with padded rows, broadcast over rows,
// in f16, and the residual being the output buffer itself, against float64 math on the same
// rounded inputs.
#include <cmath>
#include <cstring>

#include "kernels/vulkan/matmul_tiles.h"
#include "kernels/vulkan/ops_matvec.h"
#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkMatvec : public VulkanTest {};

// y[m, n] = sum_k x[m, k] w[n, k] + b[n] + r[m, n], all from the stored (rounded/quantised) values.
std::vector<double> reference(const HostTensor& x, const HostTensor& w, const HostTensor* b, const HostTensor& r,
                              int64_t M, int64_t N, int64_t K) {
  const auto xv = to_doubles(x.view), wv = to_doubles(w.view), rv = to_doubles(r.view);
  const std::vector<double> bv = b ? to_doubles(b->view) : std::vector<double>();
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = b ? bv[n] : 0;
      for (int64_t k = 0; k < K; ++k) s += xv[m * K + k] * wv[n * K + k];
      y[m * N + n] = s + rv[m * N + n];
    }
  return y;
}

// [1, M, N] whose rows lie `pad` elements apart beyond N (a slice of a wider tensor).
HostTensor padded_rows(DType dt, int64_t M, int64_t N, int64_t pad, std::mt19937& rng) {
  HostTensor t = random_tensor(dt, Shape{1, M, N + pad}, rng);
  t.view.shape = Shape{1, M, N};
  return t;
}

// [1, M, N] reading one row of N values for every m (0 row stride).
HostTensor broadcast_rows(int64_t M, int64_t N, std::mt19937& rng) {
  HostTensor t = random_tensor(DType::f32, Shape{1, 1, N}, rng);
  t.view = broadcast_view(t.view, Shape{1, M, N});
  return t;
}

enum class ResidualLayout { kDense, kPadded, kBroadcast, kHalf };

TEST_F(VkMatvec, BiasAndResidualEveryWeightDtype) {
  std::mt19937 rng(21);
  struct Case {
    int64_t M, N, K;
    ResidualLayout layout;
    bool bias;
  };
  // N 4097: 4 weight rows per workgroup with a remainder; K 256: 8-element chunks and half-blocks
  // on 32 invocations; K 1056: a second step on 64. q4_0 with one row of x: N 8200 leaves the last
  // workgroup 8 of its 16 rows (two subgroups idle) over rows of 2 blocks (most lanes idle;
  // Q4ShapesPrefetchAndGate covers several passes per subgroup); K 7200 just fits x and its block sums into
  // 32 KiB of shared memory (unstaged on a device with less; Q4ShapesPrefetchAndGate turns staging off).
  const std::vector<Case> cases = {{1, 4097, 96, ResidualLayout::kDense, true},
                                   {1, 8200, 64, ResidualLayout::kDense, true},
                                   {1, 33, 7200, ResidualLayout::kPadded, true},
                                   {1, 37, 256, ResidualLayout::kPadded, true},
                                   {1, 40, 1056, ResidualLayout::kHalf, false},
                                   {3, 37, 256, ResidualLayout::kBroadcast, true},
                                   {8, 70, 96, ResidualLayout::kPadded, false},
                                   {5, 2050, 1056, ResidualLayout::kDense, true}};
  struct ResetReduction {
    ~ResetReduction() { vulkan::set_matvec_shared_reduce_for_testing(false); }
  } reset;
  for (bool shared_reduce : {false, true}) {
    vulkan::set_matvec_shared_reduce_for_testing(shared_reduce);
    for (DType wdt : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1})
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        if (shared_reduce && c.N > 100) continue;  // one reduction check per path is enough there
        // bf16 and q4_1 share their epilogue with f16 and q4_0: two shapes each keep CI time down.
        if ((wdt == DType::bf16 || wdt == DType::q4_1) && ci != 3 && ci != 5) continue;
        const std::string what = std::string("matvec+residual w=") + dtype_name(wdt) + " M=" + std::to_string(c.M) +
                                 " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " layout " +
                                 std::to_string(static_cast<int>(c.layout)) + (c.bias ? " bias" : "") +
                                 (shared_reduce ? " shared reduction" : "");
        SCOPED_TRACE(what);
        HostTensor x = random_tensor(DType::f32, Shape{1, c.M, c.K}, rng);
        HostTensor w = random_tensor(wdt, Shape{c.N, c.K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{c.N}, rng);
        HostTensor r = c.layout == ResidualLayout::kPadded      ? padded_rows(DType::f32, c.M, c.N, 5, rng)
                       : c.layout == ResidualLayout::kBroadcast ? broadcast_rows(c.M, c.N, rng)
                       : c.layout == ResidualLayout::kHalf      ? random_strided(DType::f16, Shape{1, c.M, c.N}, {0, 1, 2}, 3, rng)
                                                                : random_strided(DType::f32, Shape{1, c.M, c.N}, {0, 1, 2}, 2, rng);
        auto out = run_gpu(OpKind::linear, {&x, &w, c.bias ? &b : nullptr, &r}, Attrs(OpKind::linear));
        ASSERT_EQ(out[0].view.shape, (Shape{1, c.M, c.N}));
        expect_close(to_doubles(out[0].view), reference(x, w, c.bias ? &b : nullptr, r, c.M, c.N, c.K),
                     1e-5 * std::sqrt(static_cast<double>(c.K)), 1e-5, what.c_str());
      }
  }
}

// The executor may hand the residual's own buffer over as the output: y = x W^T + b + y.
TEST_F(VkMatvec, ResidualInPlace) {
  std::mt19937 rng(22);
  for (DType wdt : {DType::f16, DType::q4_0, DType::q8_0})
    for (int64_t M : {1, 4}) {
      SCOPED_TRACE(std::string(dtype_name(wdt)) + " M=" + std::to_string(M));
      const int64_t N = 300, K = 512;
      HostTensor x = random_tensor(DType::f32, Shape{1, M, K}, rng);
      HostTensor w = random_tensor(wdt, Shape{N, K}, rng);
      HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
      HostTensor r = random_tensor(DType::f32, Shape{1, M, N}, rng);
      const std::vector<double> want = reference(x, w, &b, r, M, N, K);
      DeviceTensor dx = to_device(x), dw = to_device(w), db = to_device(b), dr = to_device(r);
      auto rec = vulkan::Recorder::create(ctx());
      ASSERT_TRUE(rec.is_ok());
      Status s = (*rec)->record(OpKind::linear, {dx.view, dw.view, db.view, dr.view}, {dr.view}, Attrs(OpKind::linear));
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      s = (*rec)->submit_and_wait();
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      expect_close(to_doubles(to_host(dr.view).view), want, 1e-5 * std::sqrt(static_cast<double>(K)), 1e-5,
                   "matvec with the residual as its output");
    }
}

// linear's norm prologue (layer with and without its bias, rms): up to 4 rows (8 with rms) are
// normalised inside the matvec kernels (both reductions, the scalar path at K = 100; q4_0 with
// one row in its own kernel), more through a normalised scratch copy (matvec, tiled matmul);
// against float64 normalisation and products.
TEST_F(VkMatvec, NormPrologue) {
  std::mt19937 rng(25);
  struct Case {
    int64_t M, N, K;
  };
  const std::vector<Case> cases = {{1, 300, 256}, {3, 37, 1056}, {8, 70, 96}, {9, 33, 64}, {1, 20, 100}};
  struct ResetReduction {
    ~ResetReduction() { vulkan::set_matvec_shared_reduce_for_testing(false); }
  } reset;
  for (bool shared_reduce : {false, true})
    for (const char* norm : {"layer", "layer+bias", "rms"})
      for (DType wdt : {DType::f32, DType::f16, DType::q8_0, DType::q4_0})
        for (const Case& c : cases) {
          if (is_quantized(wdt) && c.K % 32) continue;
          if (shared_reduce && (wdt != DType::f16 || c.M > 8)) continue;
          if (wdt == DType::f32 && c.M != 3) continue;  // f32 weights share every other path's epilogue
          vulkan::set_matvec_shared_reduce_for_testing(shared_reduce);
          const bool rms = std::string(norm) == "rms", nbias = std::string(norm) == "layer+bias";
          const std::string what = std::string(norm) + " w=" + dtype_name(wdt) + " M=" + std::to_string(c.M) + " N=" +
                                   std::to_string(c.N) + " K=" + std::to_string(c.K) + (shared_reduce ? " shared reduction" : "");
          SCOPED_TRACE(what);
          // x with a common offset (the mean the statistics must take off) in a strided view.
          HostTensor x = random_strided(DType::f32, Shape{1, c.M, c.K}, {0, 1, 2}, 3, rng);
          fill_uniform(x.view, rng, 1, 3);
          HostTensor w = random_tensor(wdt, Shape{c.N, c.K}, rng);
          HostTensor b = random_tensor(DType::f32, Shape{c.N}, rng);
          HostTensor g = random_tensor(DType::f16, Shape{c.K}, rng, 0.5, 1.5);
          HostTensor nb = random_tensor(DType::f32, Shape{c.K}, rng);
          Attrs a(OpKind::linear);
          a.set_s("norm", rms ? "rms" : "layer").set_f("eps", 1e-5);
          auto out = run_gpu(OpKind::linear, {&x, &w, &b, nullptr, &g, nbias ? &nb : nullptr}, a);
          const std::vector<double> xn = ref_norm_rows(to_doubles(x.view), c.M, c.K, rms, 1e-5, to_doubles(g.view),
                                                       nbias ? to_doubles(nb.view) : std::vector<double>());
          const std::vector<double> wv = to_doubles(w.view), bv = to_doubles(b.view);
          std::vector<double> want(static_cast<size_t>(c.M * c.N));
          double mag = 0;
          for (int64_t m = 0; m < c.M; ++m)
            for (int64_t n = 0; n < c.N; ++n) {
              double s = bv[n], sa = 0;
              for (int64_t k = 0; k < c.K; ++k) {
                s += xn[m * c.K + k] * wv[n * c.K + k];
                sa += std::fabs(xn[m * c.K + k] * wv[n * c.K + k]);
              }
              want[m * c.N + n] = s;
              mag = std::max(mag, sa);
            }
          // f32 statistics and sums; 9 rows go through the tiled matmul, which may round x to
          // halves (tensor cores): 1e-3 of the sum of |products| covers that.
          const double atol = (c.M > 8 ? 1e-3 : 2e-5) * mag;
          expect_close(to_doubles(out[0].view), want, atol, 1e-4, what.c_str());
        }
}

// The q4_0 kernel's shapes (rows per workgroup and per pass, invocations, x staged up to the
// device's shared memory or not, the next block's loads issued early) and the SwiGLU gate it
// applies to x of 2K, against float64 products; a row of 8192 has 256 blocks, so every lane of a
// subgroup takes several and prefetches.
TEST_F(VkMatvec, Q4ShapesPrefetchAndGate) {
  std::mt19937 rng(23);
  struct ResetTuning {
    ~ResetTuning() { vulkan::set_q4_0_tuning_for_bench(nullptr); }
  } reset;
  const std::vector<vulkan::Q4Tuning> tunings = {
      {}, {16, 4, 1, 128, 16384, 1}, {8, 2, 0, 64, 16384, 1}, {64, 4, 1, 128, 16384, 0}, {4, 1, 1, 32, 16384, 1}};
  for (bool glu : {false, true})
    for (int64_t K : {int64_t{2048}, int64_t{8192}}) {
      const int64_t N = 150;
      HostTensor x = random_tensor(DType::f32, Shape{1, 1, glu ? 2 * K : K}, rng);
      HostTensor w = random_tensor(DType::q4_0, Shape{N, K}, rng);
      const auto xv = to_doubles(x.view), wv = to_doubles(w.view);
      std::vector<double> want(static_cast<size_t>(N), 0.0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          const double g = glu ? xv[k] * (xv[K + k] / (1 + std::exp(-xv[K + k]))) : xv[k];
          want[n] += g * wv[n * K + k];
        }
      Attrs lin(OpKind::linear);
      if (glu) lin.set_s("glu", "silu");
      for (const vulkan::Q4Tuning& t : tunings) {
        const std::string what = std::string(glu ? "glu " : "") + "K=" + std::to_string(K) + " rows " +
                                 std::to_string(t.rows) + " per pass " + std::to_string(t.rows_per_pass) + " stage " +
                                 std::to_string(t.stage_x) + " invocations " + std::to_string(t.invocations) +
                                 " prefetch " + std::to_string(t.prefetch);
        SCOPED_TRACE(what);
        vulkan::set_q4_0_tuning_for_bench(t.rows != 0 ? &t : nullptr);
        auto out = run_gpu(OpKind::linear, {&x, &w, nullptr}, lin);
        ASSERT_EQ(out[0].view.shape, (Shape{1, 1, N}));
        expect_close(to_doubles(out[0].view), want, 1e-5 * std::sqrt(static_cast<double>(K)), 1e-4, what.c_str());
      }
    }
}

// A batched decode step's rows (linear's decode attribute, more than 8 of them: the rows kernel,
// matmul_rows.comp) against float64 products: every weight dtype; rows filling whole and partial
// 32-row tiles; N with partial 64-row tiles; K of 3, 8 and 32 blocks (no split, split in 2 and in
// 4, and 8 forced through VRUN_MATMUL_ROWS); bias, silu and a padded, broadcast or f16
// residual; f32 and f16 y; f16 x. Then the claim the serving path rests on: a row's values do not
// depend on how many rows share the step (the first 9 of 70 rows, bit for bit).
// (The tensor cores' exact mode, which takes such rows where the device has it, is kept off here:
// DecodeRowsOnTensorCores tests it.)
TEST_F(VkMatvec, DecodeRowsKernel) {
  std::mt19937 rng(26);
  struct Unset {
    ~Unset() {
      unsetenv("VRUN_MATMUL_ROWS");
      unsetenv("VRUN_MM_EXACT_ROWS");
      vulkan::set_matmul_rows_for_bench(0, false);
    }
  } unset;
  setenv("VRUN_MM_EXACT_ROWS", "0", 1);
  struct Case {
    int64_t M, N, K;
    ResidualLayout layout;
  };
  // Tiles of 16 rows (9, 12, 16; q4_0's 6 where one q4_0 row has a kernel of its own) and 32 (32
  // and more).
  const std::vector<Case> cases = {{9, 37, 96, ResidualLayout::kPadded},
                                   {32, 130, 256, ResidualLayout::kBroadcast},
                                   {70, 130, 1024, ResidualLayout::kDense},
                                   {40, 64, 256, ResidualLayout::kHalf},
                                   {12, 70, 256, ResidualLayout::kDense},
                                   {16, 130, 256, ResidualLayout::kPadded},
                                   {6, 70, 256, ResidualLayout::kDense}};
  for (DType wdt : {DType::q4_0, DType::q8_0, DType::q4_1, DType::f16, DType::bf16, DType::f32})
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& c = cases[ci];
      // Every dtype's loads through the first two shapes; the other shapes (tile heights, splits,
      // residual layouts) with q4_0 and f16 alone.
      if (wdt != DType::q4_0 && wdt != DType::f16 && ci >= 2) continue;
      for (DType xdt : {DType::f32, DType::f16}) {
        if (xdt == DType::f16 && ci != 1) continue;
        HostTensor x = random_tensor(xdt, Shape{1, c.M, c.K}, rng);
        HostTensor w = random_tensor(wdt, Shape{c.N, c.K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{c.N}, rng);
        HostTensor r = c.layout == ResidualLayout::kPadded      ? padded_rows(DType::f32, c.M, c.N, 5, rng)
                       : c.layout == ResidualLayout::kBroadcast ? broadcast_rows(c.M, c.N, rng)
                       : c.layout == ResidualLayout::kHalf      ? random_tensor(DType::f16, Shape{1, c.M, c.N}, rng)
                                                                : random_tensor(DType::f32, Shape{1, c.M, c.N}, rng);
        const auto rv = to_doubles(r.view);
        const std::vector<double> lin = reference(x, w, &b, r, c.M, c.N, c.K);
        std::vector<double> want(lin.size());
        for (size_t i = 0; i < lin.size(); ++i) {
          const double v = lin[i] - rv[i];
          want[i] = v / (1 + std::exp(-v)) + rv[i];
        }
        // The default splits K of 96, 256 and 1024 in 1, 2 and 8 parts; 4 forced once.
        for (const char* split : {"", "4"}) {
          if (*split && (ci != 2 || wdt != DType::q4_0)) continue;
          if (*split) setenv("VRUN_MATMUL_ROWS", split, 1);
          else unsetenv("VRUN_MATMUL_ROWS");
          for (DType ydt : {DType::f32, DType::f16}) {
            if (ydt == DType::f16 && (*split || ci != 1)) continue;  // f16 y: one shape
            const std::string what = std::string("rows w=") + dtype_name(wdt) + " x=" + dtype_name(xdt) + " y=" +
                                     dtype_name(ydt) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
                                     " K=" + std::to_string(c.K) + " split " + (*split ? split : "default");
            SCOPED_TRACE(what);
            Attrs a(OpKind::linear);
            a.set_i("decode", 1).set_s("act", "silu");
            a.set_s("dtype", ydt == DType::f16 ? "f16" : "f32");
            auto out = run_gpu(OpKind::linear, {&x, &w, &b, &r}, a);
            ASSERT_EQ(out[0].view.dtype, ydt);
            expect_close(to_doubles(out[0].view), want, 1e-5 * std::sqrt(static_cast<double>(c.K)),
                         ydt == DType::f16 ? 2e-3 : 1e-5, what.c_str());
          }
        }
      }
    }
  // Row independence: 9 and 16 rows alone (tiles of 16 rows) against the same rows among 70
  // (tiles of 32), split or not; 6 q4_0 rows too where they take the rows kernel.
  unsetenv("VRUN_MATMUL_ROWS");
  for (int64_t K : {int64_t{96}, int64_t{1024}}) {
    HostTensor x = random_tensor(DType::f32, Shape{70, K}, rng);
    HostTensor w = random_tensor(DType::q4_0, Shape{300, K}, rng);
    Attrs a(OpKind::linear);
    a.set_i("decode", 1);
    auto all = run_gpu(OpKind::linear, {&x, &w, nullptr}, a);
    for (int64_t m : {int64_t{6}, int64_t{9}, int64_t{16}}) {
      if (m == 6 && !vulkan::subgroup_reduce(ctx())) continue;
      HostTensor xm = x;
      xm.view.shape = Shape{m, K};
      auto few = run_gpu(OpKind::linear, {&xm, &w, nullptr}, a);
      ASSERT_EQ(few[0].view.shape, (Shape{m, 300}));
      EXPECT_EQ(std::memcmp(all[0].view.data, few[0].view.data, static_cast<size_t>(m) * 300 * sizeof(float)), 0)
          << "K " << K << ", " << m << " rows";
    }
  }
  // 16-byte loads of float W and f32 x (the default where rows are aligned) and one load an
  // element give the same bits, at 70 rows and at 9; so do tiles of 128 columns (eight an
  // invocation; N = 300 ends in a partial one) against the default 64.
  for (DType wdt : {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q8_0, DType::q4_1}) {
    const int64_t K = 256;
    HostTensor x = random_tensor(DType::f32, Shape{70, K}, rng);
    HostTensor w = random_tensor(wdt, Shape{300, K}, rng);
    Attrs a(OpKind::linear);
    a.set_i("decode", 1);
    HostTensor x9 = x;
    x9.view.shape = Shape{9, K};
    auto vec = run_gpu(OpKind::linear, {&x, &w, nullptr}, a), vec9 = run_gpu(OpKind::linear, {&x9, &w, nullptr}, a);
    vulkan::set_matmul_rows_for_bench(0, true);
    auto one = run_gpu(OpKind::linear, {&x, &w, nullptr}, a), one9 = run_gpu(OpKind::linear, {&x9, &w, nullptr}, a);
    vulkan::set_matmul_rows_for_bench(0, false, 8);
    auto wide = run_gpu(OpKind::linear, {&x, &w, nullptr}, a), wide9 = run_gpu(OpKind::linear, {&x9, &w, nullptr}, a);
    vulkan::set_matmul_rows_for_bench(0, false);
    EXPECT_EQ(std::memcmp(vec[0].view.data, wide[0].view.data, static_cast<size_t>(70) * 300 * sizeof(float)), 0)
        << dtype_name(wdt) << " W, 70 rows, 128-column tiles";
    EXPECT_EQ(std::memcmp(vec9[0].view.data, wide9[0].view.data, static_cast<size_t>(9) * 300 * sizeof(float)), 0)
        << dtype_name(wdt) << " W, 9 rows, 128-column tiles";
    EXPECT_EQ(std::memcmp(vec[0].view.data, one[0].view.data, static_cast<size_t>(70) * 300 * sizeof(float)), 0)
        << dtype_name(wdt) << " W, 70 rows";
    EXPECT_EQ(std::memcmp(vec9[0].view.data, one9[0].view.data, static_cast<size_t>(9) * 300 * sizeof(float)), 0)
        << dtype_name(wdt) << " W, 9 rows";
    // And both are the float64 products, to the kernel's f32 rounding.
    const auto xv = to_doubles(x.view), wv = to_doubles(w.view);
    std::vector<double> want(static_cast<size_t>(70 * 300), 0.0);
    for (int64_t m = 0; m < 70; ++m)
      for (int64_t n = 0; n < 300; ++n)
        for (int64_t k = 0; k < K; ++k)
          want[static_cast<size_t>(m * 300 + n)] += xv[static_cast<size_t>(m * K + k)] * wv[static_cast<size_t>(n * K + k)];
    expect_close(to_doubles(vec[0].view), want, 1e-5 * std::sqrt(static_cast<double>(K)), 1e-4,
                 (std::string(dtype_name(wdt)) + " W, 16-byte loads").c_str());
  }
  // The SwiGLU gate and an rms norm over 12 rows: passes first, then the rows kernel.
  const int64_t K = 256, N = 70, M = 12;
  HostTensor x2 = random_tensor(DType::f32, Shape{M, 2 * K}, rng);
  HostTensor w = random_tensor(DType::q4_0, Shape{N, K}, rng);
  const auto xv = to_doubles(x2.view), wv = to_doubles(w.view);
  std::vector<double> want(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double g = xv[m * 2 * K + K + k];
        want[m * N + n] += xv[m * 2 * K + k] * (g / (1 + std::exp(-g))) * wv[n * K + k];
      }
  Attrs glu(OpKind::linear);
  glu.set_i("decode", 1).set_s("glu", "silu");
  auto out = run_gpu(OpKind::linear, {&x2, &w, nullptr}, glu);
  expect_close(to_doubles(out[0].view), want, 1e-5 * std::sqrt(static_cast<double>(K)), 1e-4, "rows kernel after the gate");
  HostTensor x = random_tensor(DType::f32, Shape{M, K}, rng);
  HostTensor g = random_tensor(DType::f16, Shape{K}, rng, 0.5, 1.5);
  const std::vector<double> xn = ref_norm_rows(to_doubles(x.view), M, K, true, 1e-5, to_doubles(g.view), {});
  std::vector<double> want_n(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) want_n[m * N + n] += xn[m * K + k] * wv[n * K + k];
  Attrs rms(OpKind::linear);
  rms.set_i("decode", 1).set_s("norm", "rms").set_f("eps", 1e-5);
  auto outn = run_gpu(OpKind::linear, {&x, &w, nullptr, nullptr, &g}, rms);
  expect_close(to_doubles(outn[0].view), want_n, 2e-5 * std::sqrt(static_cast<double>(K)), 1e-4, "rows kernel after the norm");
}

// A batched decode step's rows on the tensor cores' exact mode (matmul_wa_cm2.comp, EXACT: x and
// W split into two halves each; for q4_0 and q8_0 by default W's integers with each block's sums
// scaled): against float64 products to f32's rounding, for every W it takes; 6 to 70 rows (tiles of
// 16, 32 and 64 rows, and two of 64); N ending in a partial tile of 128; K of 64 to 128 blocks,
// split or not; bias, silu and residual in the epilogue; x over six decades (its low halves
// matter). f32 sums in any order are off from the float64 ones by about 2^-24 sqrt(K) times the
// size of the products (their root sum of squares, which x over six decades makes far larger
// than the result), so each element is held to 8 times that; x rounded to halves (2^-12 relative
// an element, about 2^-13 of that size in all) would be 4 to 7 times over it at these K. Then the serving path's claim: a row's values do not depend
// on how many rows share the step. Every W from 5 rows and 2,048 rows of W (VRUN_MM_EXACT_ROWS=5,
// VRUN_MM_EXACT_WIDE=2048: block-quantised W would start at 17 rows and 8,192 of W).
TEST_F(VkMatvec, DecodeRowsOnTensorCores) {
  if (!vulkan::cm2_exact_tile(ctx(), 32, DType::q4_0)) GTEST_SKIP() << "no workgroup-scope tensor-core kernels here";
  struct Unset {
    ~Unset() {
      unsetenv("VRUN_MM_EXACT_ROWS");
      unsetenv("VRUN_MM_EXACT_Q");
      unsetenv("VRUN_MM_EXACT_WIDE");
    }
  } unset;
  setenv("VRUN_MM_EXACT_ROWS", "5", 1);
  setenv("VRUN_MM_EXACT_WIDE", "2048", 1);
  // Both forms for q4_0 and q8_0: W's integers with each block's sums scaled (the default), and W
  // split into halves (VRUN_MM_EXACT_Q=split, the only form for f16 and q4_1).
  for (const char* form : {"", "split"}) {
    setenv("VRUN_MM_EXACT_Q", form, 1);
    SCOPED_TRACE(std::string("VRUN_MM_EXACT_Q=") + form);
    std::mt19937 rng(27);
    struct Case {
      int64_t M, K;
    };
    const int64_t N = 2118;
    ASSERT_TRUE(vulkan::exact_wide_enough(N));
    const std::vector<Case> cases = {{6, 2048}, {9, 2080}, {16, 2048}, {32, 4096}, {40, 2112}, {70, 2048}};
    std::uniform_real_distribution<double> decade(-3.0, 3.0);
    for (DType wdt : {DType::q4_0, DType::q8_0, DType::q4_1, DType::f16})
      for (const Case& c : cases) {
        if (*form && wdt != DType::q4_0 && wdt != DType::q8_0) continue;  // the same run as ""
        HostTensor x = random_tensor(DType::f32, Shape{1, c.M, c.K}, rng);
        float* xp = static_cast<float*>(x.view.data);
        for (int64_t i = 0; i < c.M * c.K; ++i) xp[i] *= static_cast<float>(std::pow(10.0, decade(rng)) / 30.0);
        HostTensor w = random_tensor(wdt, Shape{N, c.K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
        HostTensor r = random_tensor(DType::f32, Shape{1, c.M, N}, rng);
        const std::string what = std::string("exact w=") + dtype_name(wdt) + " M=" + std::to_string(c.M) +
                                 " K=" + std::to_string(c.K);
        SCOPED_TRACE(what);
        const auto rv = to_doubles(r.view);
        const auto xv = to_doubles(x.view), wv = to_doubles(w.view), bv = to_doubles(b.view);
        std::vector<double> got = to_doubles(run_gpu(OpKind::linear, {&x, &w, &b, &r}, [] {
                                               Attrs a(OpKind::linear);
                                               a.set_i("decode", 1).set_s("act", "silu");
                                               return a;
                                             }())[0].view),
                            want(got.size());
        for (int64_t m = 0; m < c.M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const size_t i = static_cast<size_t>(m * N + n);
            // The float64 result and the products' size (silu's slope is at most 1.1), both
            // elements then measured in units of that size.
            double lin = bv[n], sq = bv[n] * bv[n] + rv[i] * rv[i];
            for (int64_t k = 0; k < c.K; ++k) {
              const double p = xv[m * c.K + k] * wv[n * c.K + k];
              lin += p;
              sq += p * p;
            }
            want[i] = lin / (1 + std::exp(-lin)) + rv[i];
            const double size = std::sqrt(sq) + 1e-30;
            got[i] /= size;
            want[i] /= size;
          }
        expect_close(got, want, 8 * std::ldexp(1.0, -24) * std::sqrt(static_cast<double>(c.K)), 0, what.c_str());
      }
    // Row independence: 6, 9, 16, 33, 64 and 70 rows alone against the same rows among 128.
    for (DType wdt : {DType::q4_0, DType::f16})
      for (int64_t K : {int64_t{2048}, int64_t{2080}}) {
        if (*form && wdt != DType::q4_0) continue;  // f16: the same run as ""
        HostTensor x = random_tensor(DType::f32, Shape{128, K}, rng);
        HostTensor w = random_tensor(wdt, Shape{N, K}, rng);
        Attrs a(OpKind::linear);
        a.set_i("decode", 1);
        auto all = run_gpu(OpKind::linear, {&x, &w, nullptr}, a);
        for (int64_t m : {int64_t{6}, int64_t{9}, int64_t{16}, int64_t{33}, int64_t{64}, int64_t{70}}) {
          HostTensor xm = x;
          xm.view.shape = Shape{m, K};
          auto few = run_gpu(OpKind::linear, {&xm, &w, nullptr}, a);
          ASSERT_EQ(few[0].view.shape, (Shape{m, N}));
          EXPECT_EQ(std::memcmp(all[0].view.data, few[0].view.data, static_cast<size_t>(m * N) * sizeof(float)), 0)
              << dtype_name(wdt) << " W, K " << K << ", " << m << " rows";
        }
      }
  }
}

}  // namespace
}  // namespace vrun::test
