// linear (matvec and tiled paths, every weight dtype, bias, strided x) and bmm (strided,
// broadcast batch) against float64 math on the same rounded inputs.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/vulkan/matmul_tiles.h"
#include "kernels/vulkan/ops_matvec.h"
#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

struct TileCase;

class VkLinalg : public VulkanTest {
 protected:
  void check_tiles(const TileCase& c, const std::string& name);
  HostTensor check_silu_residual(const HostTensor& x, const HostTensor& w, const HostTensor& b, const HostTensor& res,
                                 const std::vector<double>& want, double atol, double rtol, const std::string& name);
};

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
        // With cooperative matrices, enough rows (vulkan::tensor_core_rows, or
        // VRUN_MM_QROWS) and whole blocks put quantised W (expanded to halves) and an
        // f32 x (rounded to f16) on the tensor cores.
        const bool rounded = ctx().coopmat() != vulkan::Context::CoopMat::kNone && !ctx().exact_f32() &&
                             M >= vulkan::tensor_core_rows(ctx(), is_quantized(wdt)) && is_quantized(wdt) && K % 32 == 0;
        expect_close(to_doubles(out[0].view), linear_ref(x, w, with_bias ? &b : nullptr, M, N, K),
                     (rounded ? 6e-4 : 1e-5) * std::sqrt(static_cast<double>(K)),
                     rounded ? 4e-3 : rtol_for(xdt) + 1e-5, what.c_str());
      }
    }
  }
}

// Rows [first, first + n) of a [rows, K] weight: the view starts inside the buffer (for block
// dtypes at a 2-byte but not 4-byte aligned byte offset when a row is, e.g., 54 bytes).
HostTensor weight_rows(const HostTensor& t, int64_t first, int64_t n) {
  HostTensor r = t;
  const int64_t K = t.view.shape[1];
  r.view.data = static_cast<uint8_t*>(t.view.data) + dtype_bytes(t.view.dtype, first * K);
  r.view.shape = Shape{n, K};
  return r;
}

// The decode kernel splits K over a workgroup of 32, 64 or 128 invocations in 8-element chunks or
// half-blocks, two per invocation per step, and puts 1, 2 or 4 weight rows in a workgroup
// (N >= 4096 for 4): K below, at and past one step, N with every remainder, weights and x at
// aligned and unaligned offsets, and both the subgroup and the shared-memory reduction.
TEST_F(VkLinalg, MatvecTailsOffsetsAndReductions) {
  std::mt19937 rng(14);
  struct Case {
    DType wdt, xdt;
    int64_t M, N, K, w_first, x_offset;
    bool bias;
  };
  std::vector<Case> cases;
  for (DType wdt : {DType::q4_0, DType::q4_1, DType::q8_0}) {
    cases.push_back({wdt, DType::f16, 1, 4097, 64, 0, 0, true});   // 4 rows a group, N % 4 == 1
    cases.push_back({wdt, DType::f32, 8, 4099, 32, 1, 0, false});  // 2 rows a group, one block
    cases.push_back({wdt, DType::f32, 3, 7, 8224, 1, 1, true});    // 514 half-blocks: a second step
    cases.push_back({wdt, DType::bf16, 2, 33, 96, 0, 8, false});
    cases.push_back({wdt, DType::f16, 2, 9, 1568, 1, 0, true});    // 98 half-blocks on 64 invocations
  }
  // One row of x with q4_0 weights has its own kernel: x staged in shared memory up to K 7168,
  // read from memory (4-element loads when aligned) beyond.
  cases.push_back({DType::q4_0, DType::f32, 1, 130, 7168, 0, 0, false});
  cases.push_back({DType::q4_0, DType::f16, 1, 70, 7200, 1, 0, true});
  cases.push_back({DType::q4_0, DType::f32, 1, 7, 8224, 1, 1, true});
  cases.push_back({DType::q4_0, DType::bf16, 1, 33, 96, 0, 8, false});
  for (DType wdt : {DType::f16, DType::bf16, DType::f32}) {
    cases.push_back({wdt, DType::f16, 1, 4097, 16, 0, 0, true});
    cases.push_back({wdt, DType::f32, 1, 7, 2056, 1, 0, true});    // 257 chunks: a second step
    cases.push_back({wdt, DType::f16, 5, 2050, 2056, 0, 3, false}); // unaligned x, 2 rows a group
    cases.push_back({wdt, DType::f32, 8, 1, 2049, 1, 0, true});    // K % 8 != 0: element loop
    cases.push_back({wdt, DType::f16, 1, 9, 1000, 0, 0, false});   // 125 chunks on 64 invocations
  }
  struct ResetReduction {
    ~ResetReduction() { vulkan::set_matvec_shared_reduce_for_testing(false); }
  } reset;
  for (bool shared_reduce : {false, true}) {
    vulkan::set_matvec_shared_reduce_for_testing(shared_reduce);
    for (const Case& c : cases) {
      if (shared_reduce && c.N > 64) continue;  // one reduction check per path is enough there
      HostTensor wall = random_tensor(c.wdt, Shape{c.N + c.w_first, c.K}, rng);
      HostTensor w = weight_rows(wall, c.w_first, c.N);
      HostTensor x = random_strided(c.xdt, Shape{c.M, c.K}, {0, 1}, c.x_offset, rng);
      HostTensor b = random_tensor(c.xdt, Shape{c.N}, rng);
      auto out = run_gpu(OpKind::linear, {&x, &w, c.bias ? &b : nullptr}, Attrs(OpKind::linear));
      ASSERT_EQ(out[0].view.shape, (Shape{c.M, c.N}));
      HostTensor xd = make_tensor(DType::f64, Shape{c.M, c.K});
      const auto xv = to_doubles(x.view);
      std::copy(xv.begin(), xv.end(), xd.view.ptr<double>());
      const std::string what = std::string("matvec w=") + dtype_name(c.wdt) + " x=" + dtype_name(c.xdt) +
                               " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" +
                               std::to_string(c.K) + (shared_reduce ? " shared reduction" : "");
      expect_close(to_doubles(out[0].view), linear_ref(xd, w, c.bias ? &b : nullptr, c.M, c.N, c.K),
                   1e-5 * std::sqrt(static_cast<double>(c.K)), rtol_for(c.xdt) + 1e-5, what.c_str());
    }
  }
}

// The residual input: decode rows (M <= 8) add it in the matvec's epilogue; else it is added
// after the projection.
TEST_F(VkLinalg, LinearResidual) {
  std::mt19937 rng(14);
  const int64_t K = 96, N = 40;
  for (int64_t M : {1, 3, 70})
    for (bool with_bias : {false, true})
      for (DType wdt : {DType::f16, DType::q4_0}) {
        SCOPED_TRACE("M " + std::to_string(M) + (with_bias ? " bias " : " ") + dtype_name(wdt));
        HostTensor x = random_tensor(DType::f32, Shape{1, M, K}, rng);
        HostTensor w = random_tensor(wdt, Shape{N, K}, rng);
        HostTensor b = random_tensor(DType::f32, Shape{N}, rng);
        // Strided f32 residuals, and dense f16 ones (read in place by the tensor-core epilogue).
        HostTensor r = with_bias ? random_strided(DType::f32, Shape{1, M, N}, {0, 2, 1}, 2, rng)
                                 : random_tensor(DType::f16, Shape{1, M, N}, rng);
        auto out = run_gpu(OpKind::linear, {&x, &w, with_bias ? &b : nullptr, &r}, Attrs(OpKind::linear));
        std::vector<double> want = linear_ref(x, w, with_bias ? &b : nullptr, M, N, K);
        const auto rv = to_doubles(r.view);
        for (size_t i = 0; i < want.size(); ++i) want[i] += rv[i];
        const bool rounded = ctx().coopmat() != vulkan::Context::CoopMat::kNone && !ctx().exact_f32() && M >= 64;
        expect_close(to_doubles(out[0].view), want, rounded ? 5e-3 : 1e-4, rounded ? 4e-3 : 1e-5, "linear + residual");
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
    // M = 65 with whole q8_0 blocks runs on the tensor cores where the device has them: x rounded
    // to f16 on the way in.
    const bool rounded = ctx().coopmat() != vulkan::Context::CoopMat::kNone && !ctx().exact_f32() && 2 * M >= 64;
    expect_close(to_doubles(out[0].view), linear_ref(xd, w, nullptr, 2 * M, N, K), rounded ? 6e-4 * 8 : 1e-4,
                 rounded ? 4e-3 : 1e-5, "linear strided x");
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
    // An f32 x with f16 W takes the tensor cores too, x rounded to f16 on the way in (relative
    // 2^-12 on average per element, so the error grows like sqrt(K); the bound is ~5 standard
    // deviations, measured on an H100); elsewhere it stays exact.
    HostTensor x32 = random_tensor(DType::f32, Shape{M, K}, rng);
    auto out32 = run_gpu(OpKind::linear, {&x32, &w, &b}, Attrs(OpKind::linear));
    const bool rounded = ctx().coopmat() != vulkan::Context::CoopMat::kNone && !ctx().exact_f32();
    expect_close(to_doubles(out32[0].view), linear_ref(x32, w, &b, M, N, K),
                 (rounded ? 6e-4 : 1e-5) * std::sqrt(static_cast<double>(K)), rounded ? 4e-3 : 2e-3, "linear f32 x prefill");
    if (K % 32) continue;
    // Quantised W over many K steps: blocks expanded to halves in the tensor-core tiles.
    for (DType wdt : {DType::q8_0, DType::q4_0, DType::q4_1}) {
      HostTensor wq = random_tensor(wdt, Shape{N, K}, rng);
      auto outq = run_gpu(OpKind::linear, {&x32, &wq, &b}, Attrs(OpKind::linear));
      expect_close(to_doubles(outq[0].view), linear_ref(x32, wq, &b, M, N, K),
                   (rounded ? 6e-4 : 1e-5) * std::sqrt(static_cast<double>(K)), rounded ? 4e-3 : 2e-3,
                   (std::string("linear prefill w=") + dtype_name(wdt)).c_str());
    }
  }
}

// One M x K x N tensor-core case: f16 W and bias with f16 and with f32 x (rounded to f16 as the
// tiles load: the bound of LinearPrefillShapeF16), and their float64 results.
struct TileCase {
  int64_t M, N, K;
  HostTensor x, w, b, x32;
  std::vector<double> want, want32;
  TileCase(std::mt19937& rng, int64_t m, int64_t n, int64_t k)
      : M(m), N(n), K(k), x(random_tensor(DType::f16, Shape{m, k}, rng)), w(random_tensor(DType::f16, Shape{n, k}, rng)),
        b(random_tensor(DType::f16, Shape{n}, rng)), x32(random_tensor(DType::f32, Shape{m, k}, rng)),
        want(linear_ref(x, w, &b, m, n, k)), want32(linear_ref(x32, w, &b, m, n, k)) {}
  double atol() const { return 1e-5 * std::sqrt(static_cast<double>(K)); }
  double atol32() const { return 6e-4 * std::sqrt(static_cast<double>(K)); }
};

// x W^T + b of a TileCase for both x dtypes, with whatever kernel the environment selects.
void VkLinalg::check_tiles(const TileCase& c, const std::string& name) {
  auto out = run_gpu(OpKind::linear, {&c.x, &c.w, &c.b}, Attrs(OpKind::linear));
  expect_close(to_doubles(out[0].view), c.want, c.atol(), 2e-3, name.c_str());
  auto out32 = run_gpu(OpKind::linear, {&c.x32, &c.w, &c.b}, Attrs(OpKind::linear));
  expect_close(to_doubles(out32[0].view), c.want32, c.atol32(), 4e-3, ("f32 x " + name).c_str());
}

// x W^T + b against `want` (its float64 result), then silu(x W^T + b) + res into f16 y against the
// same in float64, with whatever kernel the environment selects. Returns the first output.
HostTensor VkLinalg::check_silu_residual(const HostTensor& x, const HostTensor& w, const HostTensor& b, const HostTensor& res,
                                         const std::vector<double>& want, double atol, double rtol, const std::string& name) {
  const auto rv = to_doubles(res.view);
  std::vector<double> want_act(want.size());
  for (size_t i = 0; i < want.size(); ++i) want_act[i] = want[i] / (1.0 + std::exp(-want[i])) + rv[i];
  auto out = run_gpu(OpKind::linear, {&x, &w, &b}, Attrs(OpKind::linear));
  expect_close(to_doubles(out[0].view), want, atol, rtol, name.c_str());
  Attrs act(OpKind::linear);
  act.set_s("act", "silu");
  act.set_s("dtype", "f16");
  auto outa = run_gpu(OpKind::linear, {&x, &w, &b, &res}, act);
  EXPECT_EQ(outa[0].view.dtype, DType::f16);
  if (outa[0].view.dtype == DType::f16)
    expect_close(to_doubles(outa[0].view), want_act, atol, rtol, ("silu + residual, f16 y, " + name).c_str());
  return std::move(out[0]);
}

// Every tile shape and stage count the tensor-core matmul takes (VRUN_MM_TILE forces one), with
// an odd and a partial number of K steps and edges in both M and N, against float64. Only where
// the device has cooperative matrices; a tile over the device's shared memory is refused and the
// shape's own tile runs instead, which must be right too.
TEST_F(VkLinalg, LinearTensorCoreTiles) {
  if (ctx().coopmat() == vulkan::Context::CoopMat::kNone) GTEST_SKIP() << "no cooperative matrices on this device";
  std::mt19937 rng(21);
  for (int64_t K : {96, 1048}) {
    const TileCase c(rng, 200, 300, K);
    for (const char* tile : {"2x4x4x4x32", "2x4x4x2x16x2", "4x4x2x4x32", "4x4x2x2x32", "2x4x2x2x32", "2x4x4x4x16x2",
                             "2x4x2x2x32x2", "2x2x2x2x16x2", "4x2x4x4x32x2"}) {
      setenv("VRUN_MM_TILE", tile, 1);
      check_tiles(c, std::string("linear tile ") + tile + " K " + std::to_string(K));
    }
    unsetenv("VRUN_MM_TILE");
  }
}

// The workgroup-scope tensor-core linear (VK_NV_cooperative_matrix2, matmul_cm2.comp) at every tile
// the host chooses between and a few more (forced with VRUN_MM_CM2), against float64: f16 and
// f32 x; tiles inside M x N with whole K steps (unclamped loads) and edge tiles (clamped loads, a
// partial last K step, a store cut at M and N); the epilogue's bias, act and residual with f32 and
// f16 y. Only where the device has the extension (not lavapipe).
TEST_F(VkLinalg, LinearWorkgroupScopeTiles) {
  if (!ctx().coopmat2().on) GTEST_SKIP() << "no VK_NV_cooperative_matrix2 on this device";
  std::mt19937 rng(22);
  for (int64_t K : {96, 1048}) {
    const TileCase c(rng, 200, 300, K);
    HostTensor res = random_tensor(DType::f32, Shape{c.M, c.N}, rng);
    const auto rv = to_doubles(res.view);
    // silu(x W^T + b) + res, in float64.
    std::vector<double> want_act(c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) want_act[i] = c.want[i] / (1.0 + std::exp(-c.want[i])) + rv[i];
    for (const char* tile : {"128x256x32x256", "128x128x32x128", "128x128x64x128", "64x128x32x128", "256x128x64x256",
                             "128x64x16x64"}) {
      setenv("VRUN_MM_CM2", tile, 1);
      const std::string name = std::string("cm2 tile ") + tile + " K " + std::to_string(K);
      check_tiles(c, name);
      Attrs act(OpKind::linear);
      act.set_s("act", "silu");
      auto outa = run_gpu(OpKind::linear, {&c.x, &c.w, &c.b, &res}, act);
      expect_close(to_doubles(outa[0].view), want_act, c.atol(), 2e-3, ("silu + residual " + name).c_str());
      act.set_s("dtype", "f16");
      auto outh = run_gpu(OpKind::linear, {&c.x, &c.w, &c.b, &res}, act);
      ASSERT_EQ(outh[0].view.dtype, DType::f16);
      expect_close(to_doubles(outh[0].view), want_act, c.atol(), 2e-3, ("f16 y " + name).c_str());
    }
    unsetenv("VRUN_MM_CM2");
  }
  // A Llama-sized projection, which the shape rule gives the kernel: f16 and f32 x, edge rows
  // (on a device with many multiprocessors f16 x takes 128 x 64 tiles, f32 x 64 x 128).
  const int64_t Ml = 100, Kl = 2048, Nl = 2080;
  HostTensor w = random_tensor(DType::f16, Shape{Nl, Kl}, rng);
  for (DType xdt : {DType::f16, DType::f32}) {
    HostTensor x = random_tensor(xdt, Shape{Ml, Kl}, rng);
    auto out = run_gpu(OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
    expect_close(to_doubles(out[0].view), linear_ref(x, w, nullptr, Ml, Nl, Kl),
                 (xdt == DType::f16 ? 1e-5 : 6e-4) * std::sqrt(static_cast<double>(Kl)), xdt == DType::f16 ? 2e-3 : 4e-3,
                 (std::string("cm2 by shape, x ") + dtype_name(xdt)).c_str());
  }
}

// The workgroup-scope linear with W as the A matrix (matmul_wa_cm2.comp: block-quantised W through
// decode functions that expand its blocks as the driver loads them; f16 W too, forced with
// VRUN_MM_CM2_WA=1) at the default tile and forced ones, against float64 from the stored values:
// q8_0, q4_0, q4_1, f16; f16 and f32 x; whole tiles and edge tiles (clamped loads, K not a whole
// number of 64-element steps, stores cut at M and N); W starting one row into its tensor; bias,
// silu and residual with f32 and f16 y. Only where the device has block loads.
TEST_F(VkLinalg, LinearWorkgroupScopeWeightsAsA) {
  if (!ctx().coopmat2().block_loads)
    GTEST_SKIP() << "no VK_NV_cooperative_matrix2 block loads on this device";
  // The switches below are cleared however the test ends.
  struct Unset {
    ~Unset() {
      unsetenv("VRUN_MM_CM2");
      unsetenv("VRUN_MM_CM2_WA");
      unsetenv("VRUN_MM_DEQUANT");
      unsetenv("VRUN_MM_QROWS");
    }
  } unset;
  setenv("VRUN_MM_DEQUANT", "0", 1);  // W's blocks expanded by the tile loads, not by a pass first
  setenv("VRUN_MM_QROWS", "9", 1);    // and from 9 rows of x (a batched decode step's, below)
  std::mt19937 rng(23);
  const int64_t N = 300;
  // 200 rows: a prefill's; 24: a batched decode step's (block-quantised W only).
  for (int64_t M : {200, 24})
  for (int64_t K : {96, 1056}) {
    for (DType wdt : {DType::q8_0, DType::q4_0, DType::q4_1, DType::f16}) {
      if (wdt == DType::f16) setenv("VRUN_MM_CM2_WA", "1", 1);
      HostTensor wall = random_tensor(wdt, Shape{N + 1, K}, rng);
      HostTensor w = weight_rows(wall, 1, N);
      HostTensor b = random_tensor(DType::f16, Shape{N}, rng);
      HostTensor res = random_tensor(DType::f32, Shape{M, N}, rng);
      for (DType xdt : {DType::f16, DType::f32}) {
        HostTensor x = random_tensor(xdt, Shape{M, K}, rng);
        const std::vector<double> want = linear_ref(x, w, &b, M, N, K);
        // W's halves are rounded from d * q (+ m); x rounded when f32 (LinearPrefillShapeF16).
        const double atol = 6e-4 * std::sqrt(static_cast<double>(K)), rtol = 4e-3;
        for (const char* tile : {"", "128x128x64x128", "64x128x32x128", "128x256x32x256"}) {
          if (*tile) setenv("VRUN_MM_CM2", tile, 1);
          const std::string name = std::string("cm2 ") + dtype_name(wdt) + " x " + dtype_name(xdt) +
                                   " tile " + (*tile ? tile : "default") + " M " + std::to_string(M) + " K " + std::to_string(K);
          check_silu_residual(x, w, b, res, want, atol, rtol, name);
          unsetenv("VRUN_MM_CM2");
        }
      }
      unsetenv("VRUN_MM_CM2_WA");
    }
  }
}

// The workgroup-scope kernels with each tile's K split over workgroups (VRUN_MM_SPLITK; the last
// of a tile's workgroups adds the partial sums and applies the epilogue), against float64: x as A
// (f16 W) and W as A (q4_0, q8_0, f16 W), f16 and f32 x, edge tiles in M and N, 2 to 8 ranges
// (3 asked for: not a divisor of K's steps, so 2), bias, silu and residual into f16 y. A
// split result must not depend on which workgroup finishes last: two runs agree bit for bit.
TEST_F(VkLinalg, LinearWorkgroupScopeSplitK) {
  if (!ctx().coopmat2().on) GTEST_SKIP() << "no VK_NV_cooperative_matrix2 on this device";
  struct Unset {
    ~Unset() {
      unsetenv("VRUN_MM_CM2");
      unsetenv("VRUN_MM_CM2_WA");
      unsetenv("VRUN_MM_SPLITK");
      unsetenv("VRUN_MM_DEQUANT");
    }
  } unset;
  setenv("VRUN_MM_DEQUANT", "0", 1);
  std::mt19937 rng(24);
  const int64_t M = 200, N = 300, K = 2048;
  HostTensor b = random_tensor(DType::f16, Shape{N}, rng);
  HostTensor res = random_tensor(DType::f32, Shape{M, N}, rng);
  struct Case {
    DType w, x;
    const char *wa, *split;
  };
  // f16 W on the x-as-A kernel (a forced tile keeps it there) and with VRUN_MM_CM2_WA=1 on the
  // W-as-A one, which block-quantised W always takes.
  std::vector<Case> cases = {{DType::f16, DType::f16, "0", "3"},
                             {DType::f16, DType::f32, "0", "8"},
                             {DType::f16, DType::f16, "1", "4"}};
  if (ctx().coopmat2().block_loads) {
    cases.push_back({DType::q4_0, DType::f16, "0", "4"});
    cases.push_back({DType::q8_0, DType::f32, "0", "2"});
  }
  setenv("VRUN_MM_CM2", "128x64x32x128", 1);
  for (const Case& c : cases) {
    HostTensor w = random_tensor(c.w, Shape{N, K}, rng);
    HostTensor x = random_tensor(c.x, Shape{M, K}, rng);
    const std::vector<double> want = linear_ref(x, w, &b, M, N, K);
    const double atol = 6e-4 * std::sqrt(static_cast<double>(K)), rtol = 4e-3;
    setenv("VRUN_MM_CM2_WA", c.wa, 1);
    setenv("VRUN_MM_SPLITK", c.split, 1);
    const std::string name = std::string("cm2 ") + dtype_name(c.w) + " x " + dtype_name(c.x) + " W as A " + c.wa +
                             " split " + c.split;
    const HostTensor out = check_silu_residual(x, w, b, res, want, atol, rtol, name);
    auto again = run_gpu(OpKind::linear, {&x, &w, &b}, Attrs(OpKind::linear));
    ASSERT_EQ(again[0].storage->size(), out.storage->size());
    EXPECT_EQ(std::memcmp(again[0].storage->data(), out.storage->data(), out.storage->size()), 0)
        << name << ": two runs differ";
  }
}

// Block-quantised W expanded to f16 by a pass of its own (dequant.comp) before the projection,
// as prefill rows take it on devices with workgroup-scope matrices (VRUN_MM_DEQUANT=64 forces it
// from 64 rows on any device, onto whichever kernel takes f16 W), against float64 from the stored values: q8_0,
// q4_0, q4_1; f16 and f32 x; W starting one row into its tensor; bias, silu and residual into
// f16 y. Decode rows (fewer than the threshold) keep the block-quantised matvec.
TEST_F(VkLinalg, LinearDequantisedWeights) {
  struct Unset {
    ~Unset() { unsetenv("VRUN_MM_DEQUANT"); }
  } unset;
  setenv("VRUN_MM_DEQUANT", "64", 1);
  std::mt19937 rng(25);
  const int64_t N = 300;
  for (int64_t K : {96, 1056}) {
    for (DType wdt : {DType::q8_0, DType::q4_0, DType::q4_1}) {
      HostTensor wall = random_tensor(wdt, Shape{N + 1, K}, rng);
      HostTensor w = weight_rows(wall, 1, N);
      HostTensor b = random_tensor(DType::f16, Shape{N}, rng);
      for (int64_t M : {200, 3}) {
        HostTensor res = random_tensor(DType::f32, Shape{M, N}, rng);
        for (DType xdt : {DType::f16, DType::f32}) {
          HostTensor x = random_tensor(xdt, Shape{M, K}, rng);
          const std::vector<double> want = linear_ref(x, w, &b, M, N, K);
          const double atol = 6e-4 * std::sqrt(static_cast<double>(K)), rtol = 4e-3;
          check_silu_residual(x, w, b, res, want, atol, rtol,
                              std::string("dequantised ") + dtype_name(wdt) + " x " + dtype_name(xdt) + " M " +
                                  std::to_string(M) + " K " + std::to_string(K));
        }
      }
    }
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
