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

}  // namespace
}  // namespace vrun::test
