// rms_norm, layer_norm, softmax, log_softmax and argmax against float64 math.
#include <cmath>
#include <limits>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkNorm : public VulkanTest {};

TEST_F(VkNorm, RmsAndLayerNorm) {
  std::mt19937 rng(30);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int64_t C : {1, 7, 33, 4097}) {
      // x [3, 5, C] viewed as every other row of a [3, 10, C] tensor (row-strided, read in place).
      HostTensor big = random_tensor(dt, Shape{3, 10, C}, rng, -2, 3);
      HostTensor x = big;
      x.view.shape = Shape{3, 5, C};
      x.view.strides[1] = 2 * C;
      HostTensor w = random_tensor(dt, Shape{C}, rng);
      HostTensor b = random_tensor(dt, Shape{C}, rng);
      const auto xv = to_doubles(x.view), wv = to_doubles(w.view), bv = to_doubles(b.view);
      const int64_t rows = 15;
      {
        Attrs a(OpKind::rms_norm);
        a.set_f("eps", 1e-5).set_f("unit_offset", 1.0);
        auto out = run_gpu(OpKind::rms_norm, {&x, &w}, a);
        std::vector<double> want;
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t c = 0; c < C; ++c) ss += xv[r * C + c] * xv[r * C + c];
          const double inv = 1 / std::sqrt(ss / C + 1e-5);
          for (int64_t c = 0; c < C; ++c) want.push_back(xv[r * C + c] * inv * (wv[c] + 1.0));
        }
        expect_close(to_doubles(out[0].view), want, 1e-5, rtol_for(dt) + 1e-5, (std::string("rms_norm ") + dtype_name(dt)).c_str());
      }
      {
        Attrs a(OpKind::layer_norm);
        auto out = run_gpu(OpKind::layer_norm, {&x, &w, C == 7 ? nullptr : &b}, a);
        std::vector<double> want;
        for (int64_t r = 0; r < rows; ++r) {
          double mean = 0, var = 0;
          for (int64_t c = 0; c < C; ++c) mean += xv[r * C + c];
          mean /= C;
          for (int64_t c = 0; c < C; ++c) var += (xv[r * C + c] - mean) * (xv[r * C + c] - mean);
          const double inv = 1 / std::sqrt(var / C + 1e-5);
          for (int64_t c = 0; c < C; ++c) want.push_back((xv[r * C + c] - mean) * inv * wv[c] + (C == 7 ? 0 : bv[c]));
        }
        // C = 1: the normalised value is 0, so only the bias survives.
        expect_close(to_doubles(out[0].view), want, 1e-4, rtol_for(dt) + 1e-5, (std::string("layer_norm ") + dtype_name(dt)).c_str());
      }
    }
  }
}

TEST_F(VkNorm, SoftmaxLogSoftmaxArgmaxAnyAxis) {
  std::mt19937 rng(31);
  for (DType dt : {DType::f32, DType::f16}) {
    HostTensor x = random_strided(dt, Shape{3, 33, 5}, {2, 1, 0}, 2, rng);
    const auto xv = to_doubles(x.view);
    for (int axis : {-1, 1, 0}) {
      const int ax = axis < 0 ? 2 : axis;
      const int64_t dims[3] = {3, 33, 5};
      for (OpKind op : {OpKind::softmax, OpKind::log_softmax, OpKind::argmax}) {
        Attrs a(op);
        a.set_i("axis", axis);
        auto out = run_gpu(op, {&x}, a);
        std::vector<double> want;
        std::vector<double> full(xv.size());
        std::vector<double> am;
        // Iterate rows over the other two axes in output order.
        const int o1 = ax == 0 ? 1 : 0, o2 = ax == 2 ? 1 : 2;
        for (int64_t i = 0; i < dims[o1]; ++i)
          for (int64_t j = 0; j < dims[o2]; ++j) {
            auto at = [&](int64_t c) {
              int64_t idx[3];
              idx[ax] = c;
              idx[o1] = i;
              idx[o2] = j;
              return (idx[0] * 33 + idx[1]) * 5 + idx[2];
            };
            double mx = -INFINITY, sum = 0;
            int64_t best = 0;
            for (int64_t c = 0; c < dims[ax]; ++c)
              if (xv[at(c)] > mx) mx = xv[at(c)], best = c;
            for (int64_t c = 0; c < dims[ax]; ++c) sum += std::exp(xv[at(c)] - mx);
            for (int64_t c = 0; c < dims[ax]; ++c)
              full[at(c)] = op == OpKind::softmax ? std::exp(xv[at(c)] - mx) / sum : xv[at(c)] - mx - std::log(sum);
            am.push_back(static_cast<double>(best));
          }
        const std::string what = std::string(op_name(op)) + " axis " + std::to_string(axis) + " " + dtype_name(dt);
        if (op == OpKind::argmax) {
          ASSERT_EQ(out[0].view.dtype, DType::i32);
          expect_close(to_doubles(out[0].view), am, 0, 0, what.c_str());
        } else {
          expect_close(to_doubles(out[0].view), full, 1e-6, rtol_for(dt) + 1e-5, what.c_str());
        }
      }
    }
  }
}

// Long rows are split over workgroups and merged (argmax.comp's two stages): each row's index as
// the CPU kernel's (torch.argmax's rule), ties common (values rounded), NaN rows included, along
// the last axis (a language model's logits) and a middle one.
TEST_F(VkNorm, ArgmaxLongRowsAsTheCpu) {
  std::mt19937 rng(32);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    DType dt;
    Shape shape;
    int axis;
  };
  for (const Case& c : {Case{DType::f32, Shape{1, 128256}, -1}, Case{DType::f32, Shape{5, 49152}, -1},
                        Case{DType::f16, Shape{3, 4097}, -1}, Case{DType::f32, Shape{2, 2047}, 1},
                        Case{DType::f32, Shape{2, 6000, 3}, 1}, Case{DType::bf16, Shape{2, 530000}, -1}}) {
    const std::string what = std::string(dtype_name(c.dt)) + " " + c.shape.str() + " axis " + std::to_string(c.axis);
    SCOPED_TRACE(what);
    std::uniform_int_distribution<int> value(-10, 10);  // 21 values: many ties
    const int64_t n = c.shape.numel();
    std::vector<float> p(static_cast<size_t>(n));
    for (float& v : p) v = static_cast<float>(value(rng));
    // Row 0's last element the unique maximum; in rows after the first, NaNs (one early, one
    // late, or a row of them).
    p[n / c.shape[0] - 1] = 3e4f;
    if (c.shape[0] > 1) {
      const int64_t row = n / c.shape[0];
      p[row + row / 3] = nan;
      p[row + row - 2] = nan;
      if (c.shape[0] > 2)
        for (int64_t i = 2 * row; i < 3 * row; ++i) p[i] = nan;
    }
    HostTensor xt = make_tensor(c.dt, c.shape);
    size_t k = 0;
    for_each_index(c.shape, [&](const int64_t* i) { store_double(xt.view, i, p[k++]); });
    for (int flag : {0, 1}) {  // nan_flag: -1 for the rows holding a NaN
      Attrs a(OpKind::argmax);
      a.set_i("axis", c.axis).set_i("nan_flag", flag);
      RunResult cpu = run_cpu(OpKind::argmax, {xt.view}, a);
      ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
      auto out = run_gpu(OpKind::argmax, {&xt}, a);
      ASSERT_EQ(out[0].view.dtype, DType::i32);
      expect_close(to_doubles(out[0].view), to_doubles(cpu.outputs[0].view), 0, 0, (what + " nan_flag " + std::to_string(flag)).c_str());
    }
  }
}

}  // namespace
}  // namespace vrun::test
