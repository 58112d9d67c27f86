// A batched decode step's rows (linear's decode = 1) against each row alone on the GPU, bit for
// bit, where the kernels keep a row's sums: up to the matvec's 8 rows of float, q4_1 and q8_0
// weights, with and without the RMS norm prologue (docs/serving.md says where they do not).
#include <cstring>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkDecodeRows : public VulkanTest {};

// (On devices with the workgroup-scope tensor cores, f16 W from 5 rows takes their exact mode by
// default, whose sums are not the matvec kernels' order: kept off here, VRUN_MM_EXACT_ROWS=0.)
TEST_F(VkDecodeRows, UpToEightRowsHaveTheBitsOfEachRowAlone) {
  struct Unset {
    ~Unset() { unsetenv("VRUN_MM_EXACT_ROWS"); }
  } unset;
  setenv("VRUN_MM_EXACT_ROWS", "0", 1);
  std::mt19937 rng(3);
  const int64_t K = 256, N = 96;
  for (DType wt : {DType::f32, DType::f16, DType::bf16, DType::q4_1, DType::q8_0}) {
    HostTensor w = random_tensor(wt, Shape{N, K}, rng);
    HostTensor g = random_tensor(DType::f32, Shape{K}, rng, 0.5, 1.5);
    for (bool norm : {false, true}) {
      for (int64_t m : {2, 4, 5, 8}) {
        HostTensor x = random_tensor(DType::f32, Shape{1, m, K}, rng, -2, 2);
        Attrs rows(OpKind::linear), one(OpKind::linear);
        rows.set_i("decode", 1);
        if (norm) {
          rows.set_s("norm", "rms").set_f("eps", 1e-5);
          one.set_s("norm", "rms").set_f("eps", 1e-5);
        }
        auto all = run_gpu(OpKind::linear, {&x, &w, nullptr, nullptr, norm ? &g : nullptr}, rows);
        for (int64_t i = 0; i < m; ++i) {
          HostTensor row = make_tensor(DType::f32, Shape{1, 1, K});
          std::memcpy(row.view.data, static_cast<const float*>(x.view.data) + i * K, K * sizeof(float));
          auto alone = run_gpu(OpKind::linear, {&row, &w, nullptr, nullptr, norm ? &g : nullptr}, one);
          EXPECT_EQ(std::memcmp(static_cast<const float*>(all[0].view.data) + i * N, alone[0].view.data, N * sizeof(float)), 0)
              << dtype_name(wt) << (norm ? " rms" : "") << ": row " << i << " of " << m;
        }
      }
    }
  }
}

// VRUN_Q4_MATVEC_ROWS=1: 2-8 rows of q4_0 W on the one-row q4_0 kernel, each row with the bits it
// has alone, with the RMS norm prologue, with the SwiGLU gate and a residual; x staged in shared
// memory where every row's fits, else read from memory, the norm applied as it loads (K 256:
// staged; K 2,048: read from 4 or 6 rows on, on devices of 32 or 48 KiB; K 8,192: one row staged
// alone on a 48 KiB device, read with more). The norm prologue takes K up to 7,168.
TEST_F(VkDecodeRows, Q4RowsOnTheOneRowKernelHaveItsBits) {
  struct Unset {
    ~Unset() {
      unsetenv("VRUN_MM_EXACT_ROWS");
      unsetenv("VRUN_Q4_MATVEC_ROWS");
    }
  } unset;
  setenv("VRUN_MM_EXACT_ROWS", "0", 1);
  setenv("VRUN_Q4_MATVEC_ROWS", "1", 1);
  std::mt19937 rng(5);
  const int64_t N = 72;
  for (int64_t K : {int64_t{256}, int64_t{2048}, int64_t{8192}}) {
    HostTensor w = random_tensor(DType::q4_0, Shape{N, K}, rng);
    HostTensor g = random_tensor(DType::f32, Shape{K}, rng, 0.5, 1.5);
    for (int mode : {0, 1, 2}) {  // plain, RMS norm, SwiGLU gate with a residual
      const bool norm = mode == 1, glu = mode == 2;
      if (norm && K > 7168) continue;
      for (int64_t m : {2, 3, 4, 5, 8}) {
        HostTensor x = random_tensor(DType::f32, Shape{1, m, glu ? 2 * K : K}, rng, -2, 2);
        HostTensor res = random_tensor(DType::f32, Shape{1, m, N}, rng);
        Attrs rows(OpKind::linear), one(OpKind::linear);
        rows.set_i("decode", 1);
        for (Attrs* a : {&rows, &one}) {
          if (norm) a->set_s("norm", "rms").set_f("eps", 1e-5);
          if (glu) a->set_s("glu", "silu");
        }
        auto all = run_gpu(OpKind::linear, {&x, &w, nullptr, glu ? &res : nullptr, norm ? &g : nullptr}, rows);
        const int64_t xk = glu ? 2 * K : K;
        for (int64_t i = 0; i < m; ++i) {
          HostTensor row = make_tensor(DType::f32, Shape{1, 1, xk}), r1 = make_tensor(DType::f32, Shape{1, 1, N});
          std::memcpy(row.view.data, static_cast<const float*>(x.view.data) + i * xk, xk * sizeof(float));
          std::memcpy(r1.view.data, static_cast<const float*>(res.view.data) + i * N, N * sizeof(float));
          auto alone = run_gpu(OpKind::linear, {&row, &w, nullptr, glu ? &r1 : nullptr, norm ? &g : nullptr}, one);
          EXPECT_EQ(std::memcmp(static_cast<const float*>(all[0].view.data) + i * N, alone[0].view.data, N * sizeof(float)), 0)
              << "K " << K << (norm ? " rms" : glu ? " glu" : "") << ": row " << i << " of " << m;
        }
      }
    }
  }
}

}  // namespace
}  // namespace vrun::test
