// Unary, binary (broadcast, strided), where and cast on the GPU against float64 math.
#include <cmath>
#include <functional>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

struct UnaryCase {
  OpKind op;
  std::function<double(double)> ref;
  double lo, hi;
};

class VkElementwise : public VulkanTest {};

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST_F(VkElementwise, UnaryOpsAllFloatDtypesStrided) {
  const std::vector<UnaryCase> cases = {
      {OpKind::neg, [](double x) { return -x; }, -2, 2},
      {OpKind::abs, [](double x) { return std::fabs(x); }, -2, 2},
      {OpKind::exp, [](double x) { return std::exp(x); }, -3, 3},
      {OpKind::log, [](double x) { return std::log(x); }, 0.1, 5},
      {OpKind::sqrt, [](double x) { return std::sqrt(x); }, 0.1, 5},
      {OpKind::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
      {OpKind::reciprocal, [](double x) { return 1 / x; }, 0.5, 5},
      {OpKind::square, [](double x) { return x * x; }, -2, 2},
      {OpKind::sin, [](double x) { return std::sin(x); }, -3, 3},
      {OpKind::cos, [](double x) { return std::cos(x); }, -3, 3},
      {OpKind::tanh, [](double x) { return std::tanh(x); }, -4, 4},
      {OpKind::erf, [](double x) { return std::erf(x); }, -3, 3},
      {OpKind::sigmoid, sigmoid, -6, 6},
      {OpKind::relu, [](double x) { return x > 0 ? x : 0; }, -2, 2},
      {OpKind::silu, [](double x) { return x * sigmoid(x); }, -6, 6},
      {OpKind::softplus, [](double x) { return std::log1p(std::exp(x)); }, -6, 6},
      {OpKind::gelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4},
  };
  std::mt19937 rng(1);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const auto& c : cases) {
      // Transposed layout with a storage offset: [7, 33] stored as [33, 7].
      HostTensor x = random_strided(dt, Shape{7, 33}, {1, 0}, 5, rng);
      std::uniform_real_distribution<double> dist(c.lo, c.hi);
      for_each_index(x.view.shape, [&](const int64_t* i) { store_double(x.view, i, dist(rng)); });
      auto out = run_gpu(c.op, {&x}, Attrs(c.op));
      ASSERT_EQ(out.size(), 1u);
      std::vector<double> want;
      for (double v : to_doubles(x.view)) want.push_back(c.ref(v));
      expect_close(to_doubles(out[0].view), want, 1e-6, rtol_for(dt) + 2e-6,
                   (std::string(op_name(c.op)) + " " + dtype_name(dt)).c_str());
    }
  }
}

TEST_F(VkElementwise, ParametrisedUnary) {
  std::mt19937 rng(2);
  HostTensor x = random_tensor(DType::f32, Shape{4097}, rng, -3, 3);
  const auto xs = to_doubles(x.view);
  {
    Attrs a(OpKind::gelu);
    a.set_s("approximate", "tanh");
    auto out = run_gpu(OpKind::gelu, {&x}, a);
    std::vector<double> want;
    for (double v : xs) want.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    expect_close(to_doubles(out[0].view), want, 1e-6, 1e-5, "gelu tanh");
  }
  {
    Attrs a(OpKind::clamp);
    a.set_f("min", -0.5).set_f("max", 1.25);
    auto out = run_gpu(OpKind::clamp, {&x}, a);
    std::vector<double> want;
    for (double v : xs) want.push_back(std::min(std::max(v, -0.5), 1.25));
    expect_close(to_doubles(out[0].view), want, 0, 1e-7, "clamp");
  }
  {
    Attrs a(OpKind::scale);
    a.set_f("scale", 0.125).set_f("bias", 2.5);
    auto out = run_gpu(OpKind::scale, {&x}, a);
    std::vector<double> want;
    for (double v : xs) want.push_back(v * 0.125 + 2.5);
    expect_close(to_doubles(out[0].view), want, 1e-6, 1e-6, "scale");
  }
  {
    HostTensor p = random_tensor(DType::f32, Shape{33}, rng, 0.1, 3);
    Attrs a(OpKind::pow_scalar);
    a.set_f("exponent", 1.7);
    auto out = run_gpu(OpKind::pow_scalar, {&p}, a);
    std::vector<double> want;
    for (double v : to_doubles(p.view)) want.push_back(std::pow(v, 1.7));
    expect_close(to_doubles(out[0].view), want, 1e-6, 1e-5, "pow_scalar");
  }
}

TEST_F(VkElementwise, BinaryBroadcastStrided) {
  const std::vector<std::pair<OpKind, std::function<double(double, double)>>> ops = {
      {OpKind::add, [](double a, double b) { return a + b; }},
      {OpKind::sub, [](double a, double b) { return a - b; }},
      {OpKind::mul, [](double a, double b) { return a * b; }},
      {OpKind::div, [](double a, double b) { return a / b; }},
      {OpKind::maximum, [](double a, double b) { return std::max(a, b); }},
      {OpKind::minimum, [](double a, double b) { return std::min(a, b); }},
      {OpKind::less, [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {OpKind::greater, [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {OpKind::equal, [](double a, double b) { return a == b ? 1.0 : 0.0; }},
  };
  std::mt19937 rng(3);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const auto& [op, fn] : ops) {
      // a: [3, 7, 5] permuted layout; b: [7, 1] broadcast over dims 0 and 2 (rank-2 operand).
      HostTensor a = random_strided(dt, Shape{3, 7, 5}, {2, 0, 1}, 3, rng);
      HostTensor b = random_tensor(dt, Shape{7, 1}, rng, 0.5, 2);
      if (op == OpKind::equal) store_double(a.view, std::array<int64_t, 3>{1, 2, 0}.data(), 1.0), store_double(b.view, std::array<int64_t, 2>{2, 0}.data(), 1.0);
      auto out = run_gpu(op, {&a, &b}, Attrs(op));
      HostTensor b3 = b;
      b3.view.shape = Shape{1, 7, 1};
      b3.view.strides = contiguous_strides(b3.view.shape);
      const auto av = to_doubles(a.view), bv = to_doubles(broadcast_view(b3.view, Shape{3, 7, 5}));
      std::vector<double> want;
      for (size_t i = 0; i < av.size(); ++i) want.push_back(fn(av[i], bv[i]));
      expect_close(to_doubles(out[0].view), want, 1e-6, rtol_for(dt) + 2e-6,
                   (std::string(op_name(op)) + " " + dtype_name(dt)).c_str());
    }
  }
}

TEST_F(VkElementwise, WhereAndCast) {
  std::mt19937 rng(4);
  HostTensor cond = random_tensor(DType::bool_, Shape{5, 1}, rng, 0, 2);
  store_double(cond.view, std::array<int64_t, 2>{0, 0}.data(), 1);
  store_double(cond.view, std::array<int64_t, 2>{1, 0}.data(), 0);
  HostTensor a = random_tensor(DType::f16, Shape{5, 9}, rng);
  HostTensor b = random_tensor(DType::f16, Shape{9}, rng);
  auto out = run_gpu(OpKind::where, {&cond, &a, &b}, Attrs(OpKind::where));
  const auto cv = to_doubles(broadcast_view(cond.view, Shape{5, 9}));
  HostTensor b2 = b;
  b2.view.shape = Shape{1, 9};
  b2.view.strides = contiguous_strides(b2.view.shape);
  const auto av = to_doubles(a.view), bv = to_doubles(broadcast_view(b2.view, Shape{5, 9}));
  std::vector<double> want;
  for (size_t i = 0; i < av.size(); ++i) want.push_back(cv[i] != 0 ? av[i] : bv[i]);
  expect_close(to_doubles(out[0].view), want, 0, 0, "where");

  HostTensor x = random_tensor(DType::f32, Shape{33, 3}, rng, -100, 100);
  for (const char* to : {"f16", "bf16", "f32"}) {
    Attrs c(OpKind::cast);
    c.set_s("dtype", to);
    auto y = run_gpu(OpKind::cast, {&x}, c);
    ASSERT_EQ(dtype_name(y[0].view.dtype), std::string(to));
    // Exact rounding: compare against the host's own conversion of the same f32 values.
    HostTensor want = make_tensor(y[0].view.dtype, x.view.shape);
    for_each_index(x.view.shape, [&](const int64_t* i) { store_double(want.view, i, load_double(x.view, i)); });
    expect_close(to_doubles(y[0].view), to_doubles(want.view), 0, 0, to);
  }
}

}  // namespace
}  // namespace vrun::test
