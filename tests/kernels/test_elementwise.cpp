// Unary, binary, where and cast CPU kernels against float64 references computed here, over
// dense, permuted/offset and broadcast views, odd sizes, ranks 0..5 and f32/f16/bf16.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "runtime/base/convert.h"
#include "runtime/base/vec_math.h"
#include "tests/kernels/kernel_test_util.h"

namespace vrun::test {
namespace {

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const Layout kLayouts[] = {Layout::kDense, Layout::kPermuted, Layout::kBroadcast};
const Shape kShapes[] = {Shape{1}, Shape{7}, Shape{129}, Shape{3, 33}, Shape{2, 3, 7}, Shape{2, 1, 3, 5, 4}};

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  OpKind op;
  std::function<void(Attrs&)> set;
  std::function<double(double)> ref;
  double lo, hi;
};

std::vector<UnaryCase> unary_cases() {
  auto none = [](Attrs&) {};
  return {
      {"neg", OpKind::neg, none, [](double x) { return -x; }, -3, 3},
      {"abs", OpKind::abs, none, [](double x) { return std::fabs(x); }, -3, 3},
      {"exp", OpKind::exp, none, [](double x) { return std::exp(x); }, -8, 8},
      {"log", OpKind::log, none, [](double x) { return std::log(x); }, 0.05, 20},
      {"sqrt", OpKind::sqrt, none, [](double x) { return std::sqrt(x); }, 0.01, 20},
      {"rsqrt", OpKind::rsqrt, none, [](double x) { return 1 / std::sqrt(x); }, 0.01, 20},
      {"reciprocal", OpKind::reciprocal, none, [](double x) { return 1 / x; }, 0.1, 4},
      {"square", OpKind::square, none, [](double x) { return x * x; }, -3, 3},
      {"sin", OpKind::sin, none, [](double x) { return std::sin(x); }, -6, 6},
      {"cos", OpKind::cos, none, [](double x) { return std::cos(x); }, -6, 6},
      {"tanh", OpKind::tanh, none, [](double x) { return std::tanh(x); }, -4, 4},
      {"erf", OpKind::erf, none, [](double x) { return std::erf(x); }, -3, 3},
      {"sigmoid", OpKind::sigmoid, none, [](double x) { return 1 / (1 + std::exp(-x)); }, -12, 12},
      {"relu", OpKind::relu, none, [](double x) { return x > 0 ? x : 0; }, -3, 3},
      {"silu", OpKind::silu, none, [](double x) { return x / (1 + std::exp(-x)); }, -12, 12},
      {"softplus", OpKind::softplus, none, [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }, -30, 30},
      {"gelu_none", OpKind::gelu, none, gelu_erf, -5, 5},
      {"gelu_tanh", OpKind::gelu, [](Attrs& a) { a.set_s("approximate", "tanh"); }, gelu_tanh, -5, 5},
      {"clamp", OpKind::clamp, [](Attrs& a) { a.set_f("min", -0.3).set_f("max", 0.5); },
       [](double x) { return std::min(std::max(x, -0.3), 0.5); }, -1, 1},
      {"clamp_min_only", OpKind::clamp, [](Attrs& a) { a.set_f("min", 0.25); },
       [](double x) { return std::max(x, 0.25); }, -1, 1},
      {"scale", OpKind::scale, [](Attrs& a) { a.set_f("scale", 1.75).set_f("bias", -0.5); },
       [](double x) { return x * 1.75 - 0.5; }, -2, 2},
      {"pow_scalar_3", OpKind::pow_scalar, [](Attrs& a) { a.set_f("exponent", 3.0); },
       [](double x) { return x * x * x; }, -2, 2},
      {"pow_scalar_frac", OpKind::pow_scalar, [](Attrs& a) { a.set_f("exponent", 1.7); },
       [](double x) { return std::pow(x, 1.7); }, 0.1, 3},
      {"pow_scalar_2", OpKind::pow_scalar, [](Attrs& a) { a.set_f("exponent", 2.0); },
       [](double x) { return x * x; }, -2, 2},
      {"pow_scalar_half", OpKind::pow_scalar, [](Attrs& a) { a.set_f("exponent", 0.5); },
       [](double x) { return std::sqrt(x); }, 0.1, 3},
  };
}

void check_unary(const UnaryCase& uc, DType dt, const Shape& shape, Layout layout, std::mt19937& rng,
                 ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(uc.name) + " " + dtype_name(dt) + " " + shape.str() + " " + layout_name(layout));
  HostTensor x = random_layout(dt, shape, layout, rng, uc.lo, uc.hi);
  Attrs attrs(uc.op);
  uc.set(attrs);
  RunResult r = run_cpu(uc.op, {x.view}, attrs, pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].view.shape, shape);
  ASSERT_EQ(r.outputs[0].view.dtype, dt);
  std::vector<double> want = to_doubles(x.view);
  for (double& v : want) v = uc.ref(v);
  const Tolerance tol = tolerance_for(dt);
  expect_close(to_doubles(r.outputs[0].view), want, tol.atol, tol.rtol, uc.name);
}

TEST(Unary, EveryOpDtypeAndLayout) {
  std::mt19937 rng(1);
  for (const UnaryCase& uc : unary_cases())
    for (DType dt : kFloatTypes)
      for (Layout l : kLayouts)
        for (const Shape& s : {Shape{7}, Shape{3, 33}, Shape{2, 1, 3, 5, 4}}) check_unary(uc, dt, s, l, rng);
}

TEST(Unary, OddSizesAndRanks) {
  std::mt19937 rng(2);
  for (const UnaryCase& uc : unary_cases())
    for (const Shape& s : kShapes) check_unary(uc, DType::f32, s, Layout::kPermuted, rng);
  check_unary(unary_cases()[2], DType::f32, Shape{}, Layout::kDense, rng);  // rank 0
}

TEST(Unary, LargeTensorsRunInParallel) {
  std::mt19937 rng(3);
  ThreadPool pool(3);
  for (const UnaryCase& uc : unary_cases()) {
    if (uc.op != OpKind::silu && uc.op != OpKind::exp && uc.op != OpKind::gelu) continue;
    check_unary(uc, DType::f32, Shape{301, 257}, Layout::kDense, rng, &pool);
    check_unary(uc, DType::bf16, Shape{257, 301}, Layout::kPermuted, rng, &pool);
  }
}

TEST(Unary, SpecialValues) {
  HostTensor x = make_tensor(DType::f32, Shape{6});
  float* p = x.view.ptr<float>();
  const float vals[] = {100.f, -200.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), 0.f};
  std::copy(std::begin(vals), std::end(vals), p);
  RunResult r = run_cpu(OpKind::exp, {x.view}, Attrs(OpKind::exp));
  ASSERT_TRUE(r.status.is_ok());
  const float* y = r.outputs[0].view.ptr<float>();
  EXPECT_TRUE(std::isinf(y[0]));
  EXPECT_EQ(y[1], 0.f);
  EXPECT_TRUE(std::isinf(y[2]));
  EXPECT_EQ(y[3], 0.f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 1.f);
  r = run_cpu(OpKind::sigmoid, {x.view}, Attrs(OpKind::sigmoid));
  ASSERT_TRUE(r.status.is_ok());
  y = r.outputs[0].view.ptr<float>();
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 0.5f);
}

TEST(Unary, Errors) {
  std::mt19937 rng(4);
  HostTensor xi = random_tensor(DType::i32, Shape{4}, rng, -5, 5);
  RunResult r = run_cpu(OpKind::exp, {xi.view}, Attrs(OpKind::exp));
  EXPECT_EQ(r.status.code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status.message().find("i32"), std::string::npos) << r.status.message();
  HostTensor x = random_tensor(DType::f32, Shape{4}, rng);
  r = run_cpu(OpKind::gelu, {x.view}, Attrs(OpKind::gelu).set_s("approximate", "fast"));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  r = run_cpu(OpKind::cast, {x.view}, Attrs(OpKind::cast).set_s("dtype", "f12"));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  r = run_cpu(OpKind::cast, {x.view}, Attrs(OpKind::cast).set_s("dtype", "q8_0"));
  EXPECT_EQ(r.status.code(), ErrorCode::kUnsupported);
  r = run_cpu(OpKind::neg, {}, Attrs(OpKind::neg));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  // A direct kernel call with a mismatched output dtype is refused, not run.
  HostTensor y = make_tensor(DType::f16, Shape{4});
  KernelCall call;
  call.op = OpKind::neg;
  call.in = &x.view;
  call.n_in = 1;
  call.out = &y.view;
  call.n_out = 1;
  Attrs attrs(OpKind::neg);
  call.attrs = &attrs;
  call.pool = &ThreadPool::global();
  EXPECT_EQ(cpu_kernels().get(OpKind::neg)(call).code(), ErrorCode::kUnsupported);
}

// ---- cast

// Float to int truncates toward zero; int narrowing wraps; anything to bool is != 0.
double cast_ref(double v, DType to) {
  switch (to) {
    case DType::bool_: return v != 0;
    case DType::i8: return static_cast<int8_t>(static_cast<int64_t>(std::trunc(v)));
    case DType::u8: return static_cast<uint8_t>(static_cast<int64_t>(std::trunc(v)));
    case DType::i32: return static_cast<int32_t>(static_cast<int64_t>(std::trunc(v)));
    case DType::i64: return static_cast<double>(static_cast<int64_t>(std::trunc(v)));
    case DType::f16: return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case DType::bf16: return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case DType::f32: return static_cast<float>(v);
    default: return v;
  }
}

TEST(Cast, AllPlainPairs) {
  std::mt19937 rng(5);
  const DType all[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8,
                       DType::u8,  DType::i32, DType::i64,  DType::bool_};
  for (DType from : all)
    for (DType to : all)
      for (Layout l : {Layout::kDense, Layout::kPermuted}) {
        SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to) + " " + layout_name(l));
        const bool unsigned_involved = from == DType::u8 || to == DType::u8;
        const double lo = from == DType::bool_ ? 0 : unsigned_involved ? 0 : -120;
        const double hi = from == DType::bool_ ? 2 : 120;
        HostTensor x = random_layout(from, Shape{3, 17}, l, rng, lo, hi);
        RunResult r = run_cpu(OpKind::cast, {x.view}, Attrs(OpKind::cast).set_s("dtype", dtype_name(to)));
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        ASSERT_EQ(r.outputs[0].view.dtype, to);
        std::vector<double> want = to_doubles(x.view);
        for (double& v : want) v = cast_ref(v, to);
        expect_close(to_doubles(r.outputs[0].view), want, 0, 0, "cast");
      }
}

TEST(Cast, FloatToIntSaturatesInsteadOfOverflowing) {
  HostTensor x = make_tensor(DType::f32, Shape{4});
  float* p = x.view.ptr<float>();
  p[0] = 1e20f;
  p[1] = -1e20f;
  p[2] = std::numeric_limits<float>::quiet_NaN();
  p[3] = -2.75f;
  RunResult r = run_cpu(OpKind::cast, {x.view}, Attrs(OpKind::cast).set_s("dtype", "i32"));
  ASSERT_TRUE(r.status.is_ok());
  const int32_t* y = r.outputs[0].view.ptr<int32_t>();
  EXPECT_EQ(y[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(y[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(y[2], 0);
  EXPECT_EQ(y[3], -2);
}

// GGUF block decoding written independently of dequantize_row.
double f16_bits(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

std::vector<double> decode_blocks(DType t, const uint8_t* p, int64_t n) {
  std::vector<double> out;
  for (int64_t b = 0; b < n / 32; ++b) {
    if (t == DType::q8_0) {
      const uint8_t* blk = p + b * 34;
      const double d = f16_bits(blk);
      for (int j = 0; j < 32; ++j) out.push_back(static_cast<int8_t>(blk[2 + j]) * d);
    } else if (t == DType::q4_0) {
      const uint8_t* blk = p + b * 18;
      const double d = f16_bits(blk);
      double v[32];
      for (int j = 0; j < 16; ++j) {
        v[j] = ((blk[2 + j] & 15) - 8) * d;
        v[j + 16] = ((blk[2 + j] >> 4) - 8) * d;
      }
      out.insert(out.end(), v, v + 32);
    } else {
      const uint8_t* blk = p + b * 20;
      const double d = f16_bits(blk), m = f16_bits(blk + 2);
      double v[32];
      for (int j = 0; j < 16; ++j) {
        v[j] = (blk[4 + j] & 15) * d + m;
        v[j + 16] = (blk[4 + j] >> 4) * d + m;
      }
      out.insert(out.end(), v, v + 32);
    }
  }
  return out;
}

TEST(Cast, DequantisesBlockTypes) {
  std::mt19937 rng(6);
  ThreadPool pool(3);
  for (DType q : {DType::q8_0, DType::q4_0, DType::q4_1})
    for (DType to : kFloatTypes)
      for (const Shape& s : {Shape{2, 64}, Shape{3, 5, 96}, Shape{700, 128}}) {
        SCOPED_TRACE(std::string(dtype_name(q)) + " -> " + dtype_name(to) + " " + s.str());
        HostTensor x = random_tensor(q, s, rng, -2, 3);
        RunResult r = run_cpu(OpKind::cast, {x.view}, Attrs(OpKind::cast).set_s("dtype", dtype_name(to)), &pool);
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        std::vector<double> want = decode_blocks(q, static_cast<const uint8_t*>(x.view.data), s.numel());
        for (double& v : want) v = cast_ref(v, to);
        expect_close(to_doubles(r.outputs[0].view), want, 1e-6, 1e-6, "dequantise");
      }
  HostTensor x = random_tensor(DType::q8_0, Shape{64}, rng);
  EXPECT_EQ(run_cpu(OpKind::cast, {x.view}, Attrs(OpKind::cast).set_s("dtype", "i32")).status.code(),
            ErrorCode::kUnsupported);
}

// ---- binary

struct BinaryCase {
  OpKind op;
  std::function<double(double, double)> ref;
  double lo_a, hi_a, lo_b, hi_b;
  bool ints;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {OpKind::add, [](double a, double b) { return a + b; }, -2, 2, -2, 2, true},
      {OpKind::sub, [](double a, double b) { return a - b; }, -2, 2, -2, 2, true},
      {OpKind::mul, [](double a, double b) { return a * b; }, -2, 2, -2, 2, true},
      {OpKind::div, [](double a, double b) { return a / b; }, -2, 2, 0.25, 2, false},
      {OpKind::maximum, [](double a, double b) { return std::max(a, b); }, -2, 2, -2, 2, true},
      {OpKind::minimum, [](double a, double b) { return std::min(a, b); }, -2, 2, -2, 2, true},
      {OpKind::pow, [](double a, double b) { return std::pow(a, b); }, 0.1, 2, -2, 2, false},
      // Small integers (stored as floats) make equal hits likely.
      {OpKind::equal, [](double a, double b) { return a == b; }, -3, 3, -3, 3, true},
      {OpKind::less, [](double a, double b) { return a < b; }, -3, 3, -3, 3, true},
      {OpKind::greater, [](double a, double b) { return a > b; }, -3, 3, -3, 3, true},
  };
}

struct ShapePair {
  Shape a, b;
};
const ShapePair kPairs[] = {
    {Shape{33}, Shape{33}},       {Shape{4, 1, 7}, Shape{5, 1}}, {Shape{1}, Shape{3, 7}},
    {Shape{3, 7}, Shape{}},       {Shape{2, 3, 1, 4, 5}, Shape{3, 6, 1, 5}}, {Shape{129, 2}, Shape{129, 1}},
};

void check_binary(const BinaryCase& bc, DType dt, const ShapePair& sp, Layout la, Layout lb, std::mt19937& rng,
                  ThreadPool* pool = nullptr) {
  SCOPED_TRACE(std::string(op_name(bc.op)) + " " + dtype_name(dt) + " " + sp.a.str() + " " + sp.b.str() + " " +
               layout_name(la) + "/" + layout_name(lb));
  const bool cmp = bc.op == OpKind::equal || bc.op == OpKind::less || bc.op == OpKind::greater;
  const bool int_dt = !is_float(dt);
  double la_lo = bc.lo_a, la_hi = bc.hi_a, lb_lo = bc.lo_b, lb_hi = bc.hi_b;
  if (cmp || int_dt) la_lo = std::floor(la_lo) * 10, la_hi *= 10, lb_lo = std::floor(lb_lo) * 10, lb_hi *= 10;
  if (cmp) la_lo /= 10, la_hi /= 10, lb_lo /= 10, lb_hi /= 10;
  HostTensor a = random_layout(dt, sp.a, la, rng, la_lo, la_hi);
  HostTensor b = random_layout(dt, sp.b, lb, rng, lb_lo, lb_hi);
  if (cmp && is_float(dt)) {  // integral values so that equality happens
    for_each_index(a.view.shape, [&](const int64_t* i) { store_double(a.view, i, std::round(load_double(a.view, i))); });
    for_each_index(b.view.shape, [&](const int64_t* i) { store_double(b.view, i, std::round(load_double(b.view, i))); });
  }
  RunResult r = run_cpu(bc.op, {a.view, b.view}, Attrs(bc.op), pool);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  Shape want_shape;
  ASSERT_TRUE(broadcast_shapes(sp.a, sp.b, &want_shape));
  const TensorView& y = r.outputs[0].view;
  ASSERT_EQ(y.shape, want_shape);
  ASSERT_EQ(y.dtype, cmp ? DType::bool_ : dt);
  std::vector<double> want;
  for_each_index(want_shape, [&](const int64_t* i) {
    // Index each input with its own broadcast (right-aligned) coordinates.
    int64_t ia[kMaxRank] = {}, ib[kMaxRank] = {};
    for (int d = 0; d < sp.a.rank; ++d) ia[d] = sp.a[d] == 1 ? 0 : i[want_shape.rank - sp.a.rank + d];
    for (int d = 0; d < sp.b.rank; ++d) ib[d] = sp.b[d] == 1 ? 0 : i[want_shape.rank - sp.b.rank + d];
    double v = bc.ref(load_double(a.view, ia), load_double(b.view, ib));
    if (!cmp && dt == DType::f16) v = f16_to_f32(f32_to_f16(static_cast<float>(v)));
    if (!cmp && dt == DType::bf16) v = bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    want.push_back(v);
  });
  const Tolerance tol = cmp || int_dt ? Tolerance{0, 0} : tolerance_for(dt);
  expect_close(to_doubles(y), want, tol.atol, tol.rtol, op_name(bc.op));
}

TEST(Binary, EveryOpBroadcastAndLayout) {
  std::mt19937 rng(7);
  for (const BinaryCase& bc : binary_cases())
    for (const ShapePair& sp : kPairs)
      for (Layout la : kLayouts) check_binary(bc, DType::f32, sp, la, la == Layout::kDense ? Layout::kPermuted : Layout::kDense, rng);
}

TEST(Binary, HalfTypesAndIntegers) {
  std::mt19937 rng(8);
  for (const BinaryCase& bc : binary_cases()) {
    std::vector<DType> types = {DType::f16, DType::bf16};
    if (bc.ints) types.insert(types.end(), {DType::i32, DType::i64});
    for (DType dt : types)
      for (const ShapePair& sp : {kPairs[0], kPairs[1], kPairs[4]}) check_binary(bc, dt, sp, Layout::kPermuted, Layout::kBroadcast, rng);
  }
}

TEST(Binary, LargeParallel) {
  std::mt19937 rng(9);
  ThreadPool pool(3);
  const BinaryCase add = binary_cases()[0];
  check_binary(add, DType::f32, {Shape{64, 1, 1031}, Shape{97, 1}}, Layout::kDense, Layout::kDense, rng, &pool);
  check_binary(add, DType::f16, {Shape{333, 517}, Shape{333, 517}}, Layout::kPermuted, Layout::kDense, rng, &pool);
}

TEST(Binary, MaximumPropagatesNan) {
  HostTensor a = make_tensor(DType::f32, Shape{2}), b = make_tensor(DType::f32, Shape{2});
  a.view.ptr<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  a.view.ptr<float>()[1] = 1;
  b.view.ptr<float>()[0] = 1;
  b.view.ptr<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  for (OpKind op : {OpKind::maximum, OpKind::minimum}) {
    RunResult r = run_cpu(op, {a.view, b.view}, Attrs(op));
    ASSERT_TRUE(r.status.is_ok());
    EXPECT_TRUE(std::isnan(r.outputs[0].view.ptr<float>()[0]));
    EXPECT_TRUE(std::isnan(r.outputs[0].view.ptr<float>()[1]));
  }
}

TEST(Binary, Errors) {
  std::mt19937 rng(10);
  HostTensor a = random_tensor(DType::f32, Shape{3, 4}, rng), b = random_tensor(DType::f32, Shape{5}, rng);
  RunResult r = run_cpu(OpKind::add, {a.view, b.view}, Attrs(OpKind::add));
  EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("[3, 4]"), std::string::npos) << r.status.message();
  HostTensor h = random_tensor(DType::f16, Shape{3, 4}, rng);
  EXPECT_EQ(run_cpu(OpKind::mul, {a.view, h.view}, Attrs(OpKind::mul)).status.code(), ErrorCode::kInvalidArgument);
  HostTensor i = random_tensor(DType::i32, Shape{3, 4}, rng, 1, 5);
  r = run_cpu(OpKind::div, {i.view, i.view}, Attrs(OpKind::div));
  EXPECT_EQ(r.status.code(), ErrorCode::kUnsupported);
  HostTensor u = random_tensor(DType::u8, Shape{3, 4}, rng, 1, 5);
  EXPECT_EQ(run_cpu(OpKind::add, {u.view, u.view}, Attrs(OpKind::add)).status.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(run_cpu(OpKind::add, {a.view}, Attrs(OpKind::add)).status.code(), ErrorCode::kInvalidArgument);
}

TEST(Binary, IntegerOverflowWraps) {
  HostTensor a = make_tensor(DType::i32, Shape{1}), b = make_tensor(DType::i32, Shape{1});
  a.view.ptr<int32_t>()[0] = std::numeric_limits<int32_t>::max();
  b.view.ptr<int32_t>()[0] = 1;
  RunResult r = run_cpu(OpKind::add, {a.view, b.view}, Attrs(OpKind::add));
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(r.outputs[0].view.ptr<int32_t>()[0], std::numeric_limits<int32_t>::min());
}

// ---- where

TEST(Where, BroadcastsAllThreeInputs) {
  std::mt19937 rng(11);
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8, DType::bool_})
    for (DType ct : {DType::bool_, DType::u8}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " cond " + dtype_name(ct));
      const Shape cs{4, 1, 7}, as{3, 1}, bs{1, 3, 7};
      HostTensor c = random_layout(ct, cs, Layout::kPermuted, rng, 0, 2);
      HostTensor a = random_layout(dt, as, Layout::kDense, rng, 0, 50);
      HostTensor b = random_layout(dt, bs, Layout::kPermuted, rng, 0, 50);
      RunResult r = run_cpu(OpKind::where, {c.view, a.view, b.view}, Attrs(OpKind::where));
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      const Shape ys{4, 3, 7};
      ASSERT_EQ(r.outputs[0].view.shape, ys);
      std::vector<double> want;
      int trues = 0;
      for_each_index(ys, [&](const int64_t* i) {
        const int64_t ic[3] = {i[0], 0, i[2]}, ia[2] = {i[1], 0}, ib[3] = {0, i[1], i[2]};
        const bool cv = load_double(c.view, ic) != 0;
        trues += cv;
        want.push_back(cv ? load_double(a.view, ia) : load_double(b.view, ib));
      });
      EXPECT_GT(trues, 0);
      expect_close(to_doubles(r.outputs[0].view), want, 0, 0, "where");
    }
  HostTensor f = random_tensor(DType::f32, Shape{3}, rng);
  EXPECT_EQ(run_cpu(OpKind::where, {f.view, f.view, f.view}, Attrs(OpKind::where)).status.code(),
            ErrorCode::kInvalidArgument);
}

// ---- conversion helpers and fast math used by the kernels

TEST(Convert, HalfConversionsMatchTheRuntime) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = cpu::half_to_float(static_cast<uint16_t>(h)), b = f16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(cpu::float_to_bits(a), cpu::float_to_bits(b)) << "half bits " << h;
    ASSERT_EQ(cpu::float_to_bits(cpu::bf16_to_float(static_cast<uint16_t>(h))),
              cpu::float_to_bits(bf16_to_f32(static_cast<uint16_t>(h))));
  }
  std::mt19937 rng(12);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = rng();
    const float f = cpu::bits_to_float(bits);
    ASSERT_EQ(cpu::float_to_half(f), f32_to_f16(f)) << "float bits " << bits;
    ASSERT_EQ(cpu::float_to_bf16(f), f32_to_bf16(f)) << "float bits " << bits;
  }
}

TEST(Convert, ExpFastIsAccurate) {
  double worst = 0;
  for (double x = -103; x < 88.7; x += 0.00731) {
    const float xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    if (want < 1.2e-38) continue;  // subnormal results: absolute error only
    worst = std::max(worst, std::fabs(cpu::exp_fast(xf) - want) / want);
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_TRUE(std::isinf(cpu::exp_fast(89.f)));
  EXPECT_EQ(cpu::exp_fast(-105.f), 0.f);
  EXPECT_LT(std::fabs(cpu::exp_fast(-100.f) - std::exp(-100.0)), 1e-44);
}

}  // namespace
}  // namespace vrun::test

namespace vrun::test {
namespace {

TEST(Registry, EveryOpOfTheseFamiliesHasACpuKernel) {
  int n = 0;
  for (int k = 0; k < kNumOps; ++k) {
    const OpSchema& s = op_schema(static_cast<OpKind>(k));
    const OpFamily f = s.family;
    if (f != OpFamily::unary && f != OpFamily::binary && f != OpFamily::reduce && f != OpFamily::norm &&
        f != OpFamily::data)
      continue;
    ++n;
    EXPECT_NE(cpu_kernels().get(s.kind), nullptr) << s.name << " has no CPU kernel";
  }
  EXPECT_GT(n, 40);
}

}  // namespace
}  // namespace vrun::test
