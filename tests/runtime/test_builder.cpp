// Graph builder passes and memory planning, each checked on its effect and on the numbers the
// resulting program computes (against float64 arithmetic written here).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/executor.h"
#include "runtime/graph/builder.h"

namespace vrun {
namespace {

int count_ops(const MethodDef& m, OpKind op) {
  int n = 0;
  for (const auto& node : m.nodes) n += node.op == op;
  return n;
}

std::vector<float> random_vec(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<TensorView> run1(const std::shared_ptr<Program>& p, const std::string& method, std::vector<TensorView> in,
                             std::map<std::string, int64_t> syms = {}) {
  auto ex = Executor::create(p, {BackendKind::kCpu, 1});
  EXPECT_TRUE(ex.is_ok());
  static std::vector<std::unique_ptr<Executor>> keep;  // outputs point into the executor
  auto out = (*ex)->run(method, in, syms);
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  keep.push_back(std::move(*ex));
  return out.is_ok() ? *out : std::vector<TensorView>{};
}

TEST(Builder, DeadCodeAndCommonSubexpressionsAreRemoved) {
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  Val x = g.input("x", DType::f32, {4, 8});
  Val a = g.op(OpKind::exp, {x});
  Val b = g.op(OpKind::exp, {x});  // same as a
  g.op(OpKind::tanh, {x});         // unused
  g.output(g.op(OpKind::add, {a, b}));
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const MethodDef& m = (*p)->methods[0];
  EXPECT_EQ(count_ops(m, OpKind::exp), 1);
  EXPECT_EQ(count_ops(m, OpKind::tanh), 0);
  auto xv = random_vec(32, 1);
  auto out = run1(*p, "f", {TensorView::dense(xv.data(), DType::f32, {4, 8})});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[0].ptr<float>()[i], 2 * std::exp(double(xv[i])), 1e-5);
}

TEST(Builder, CopiesAreInsertedWhereNeededAndRemovedWhereNot) {
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  Val x = g.input("x", DType::f32, {2, 3, 4});
  // A redundant copy of a dense input goes away.
  Val c = g.op(OpKind::copy, {x});
  // Flattening a permuted view needs a real copy, inserted by the builder.
  Val t = g.op(OpKind::permute, {c}, {{"perm", {0, 2, 1}}});
  Val flat = g.op(OpKind::reshape, {t}, {{"shape", {2, 12}}});
  g.output(g.op(OpKind::neg, {flat}));
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(count_ops((*p)->methods[0], OpKind::copy), 1);
  auto xv = random_vec(24, 2);
  auto out = run1(*p, "f", {TensorView::dense(xv.data(), DType::f32, {2, 3, 4})});
  ASSERT_EQ(out.size(), 1u);
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(out[0].ptr<float>()[b * 12 + k * 3 + j], -xv[b * 12 + j * 4 + k]);
}

TEST(Builder, BatchNormFoldsIntoTheConvolution) {
  const int cin = 3, cout = 4, k = 3, len = 9;
  auto w = random_vec(cout * cin * k, 3), bias = random_vec(cout, 4), mean = random_vec(cout, 5);
  auto var = random_vec(cout, 6), gamma = random_vec(cout, 7), beta = random_vec(cout, 8);
  for (auto& v : var) v = std::fabs(v) + 0.5f;
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  Val x = g.input("x", DType::f32, {1, cin, len});
  auto C = [&](const char* n, const std::vector<float>& v, Shape s) { return g.constant(pb.add_constant_copy(n, DType::f32, s, v.data())); };
  Val y = g.op(OpKind::conv1d, {x, C("w", w, {cout, cin, k}), C("b", bias, {cout})}, {{"padding", {1}}});
  y = g.op(OpKind::batch_norm, {y, C("mean", mean, {cout}), C("var", var, {cout}), C("gamma", gamma, {cout}), C("beta", beta, {cout})},
           {{"eps", 1e-5}});
  g.output(y);
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(count_ops((*p)->methods[0], OpKind::batch_norm), 0);
  EXPECT_EQ((*p)->constants.size(), 2u);  // folded weight and bias only
  auto xv = random_vec(cin * len, 9);
  auto out = run1(*p, "f", {TensorView::dense(xv.data(), DType::f32, {1, cin, len})});
  ASSERT_EQ(out.size(), 1u);
  for (int o = 0; o < cout; ++o)
    for (int t = 0; t < len; ++t) {
      double acc = bias[o];
      for (int i = 0; i < cin; ++i)
        for (int j = 0; j < k; ++j) {
          const int s = t + j - 1;
          if (s >= 0 && s < len) acc += double(w[(o * cin + i) * k + j]) * xv[i * len + s];
        }
      const double want = (acc - mean[o]) / std::sqrt(double(var[o]) + 1e-5) * gamma[o] + beta[o];
      EXPECT_NEAR(out[0].ptr<float>()[o * len + t], want, 1e-5);
    }
}

TEST(Builder, ArenaSlotsAreReusedAcrossLifetimes) {
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  const SymExpr n = g.symbol("n", 1, 1000);
  Val x = g.input("x", DType::f32, {n});
  Val y = x;
  for (int i = 0; i < 10; ++i) y = g.op(i % 2 ? OpKind::neg : OpKind::square, {y});
  g.output(y);
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const MethodDef& m = (*p)->methods[0];
  // Ten 4000-byte intermediates, at most two alive at once; a small value does not take the slot
  // its producer's input just left (that would order two kernels a GPU could overlap), so the
  // chain cycles through three slots.
  EXPECT_LE(m.arena_size, 3 * 4032);
  EXPECT_GE(m.arena_size, 3 * 4000);
  {
    // Large values pack as tightly as their lifetimes allow: two slots.
    ProgramBuilder pb2;
    MethodBuilder g2 = pb2.method("f");
    Val y2 = g2.input("x", DType::f32, {g2.symbol("n", 1, 100000)});
    for (int i = 0; i < 10; ++i) y2 = g2.op(i % 2 ? OpKind::neg : OpKind::square, {y2});
    g2.output(y2);
    auto p2 = pb2.finish();
    ASSERT_TRUE(p2.is_ok()) << p2.status().to_string();
    EXPECT_LE((*p2)->methods[0].arena_size, 2 * 400064);
    EXPECT_GE((*p2)->methods[0].arena_size, 2 * 400000);
  }
  auto xv = random_vec(37, 10);
  auto out = run1(*p, "f", {TensorView::dense(xv.data(), DType::f32, {37})});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 37; ++i) {
    double v = xv[i];
    for (int k = 0; k < 10; ++k) v = k % 2 ? -v : v * v;
    EXPECT_NEAR(out[0].ptr<float>()[i], v, 1e-6 * std::max(1.0, std::fabs(v)));
  }
}

// Methods the program names in kSharedArenasMeta run in one arena, sized to the largest: a small
// and a large method write their outputs to the same place, and each computes right after the
// other ran.
TEST(Builder, MethodsShareOneArenaWhenTheProgramSaysSo) {
  auto make = [](bool shared) {
    ProgramBuilder pb;
    for (const auto& [name, n] : {std::pair<const char*, int64_t>{"small", 16}, {"large", 4096}}) {
      MethodBuilder g = pb.method(name);
      Val x = g.input("x", DType::f32, {n});
      g.output(g.op(OpKind::neg, {g.op(OpKind::square, {x})}));
    }
    if (shared) pb.set_meta(kSharedArenasMeta, MetaValue::string_list({"small,large"}));
    return pb.finish();
  };
  auto xs = random_vec(16, 3), xl = random_vec(4096, 4);
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "shared" : "separate");
    auto p = make(shared);
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    auto ex = Executor::create(*p, {BackendKind::kCpu, 1});
    ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
    const uint8_t* base[2] = {};
    for (int round = 0; round < 2; ++round) {
      for (int k = 0; k < 2; ++k) {
        std::vector<float>& x = k == 0 ? xs : xl;
        auto out = (*ex)->run(k == 0 ? "small" : "large", {TensorView::dense(x.data(), DType::f32, {static_cast<int64_t>(x.size())})});
        ASSERT_TRUE(out.is_ok()) << out.status().to_string();
        for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ((*out)[0].ptr<float>()[i], -x[i] * x[i]) << i;
        const MethodDef& m = (*p)->methods[static_cast<size_t>(k)];
        base[k] = static_cast<const uint8_t*>((*out)[0].data) - m.values[m.outputs[0]].arena_offset;
      }
    }
    EXPECT_EQ(base[0] == base[1], shared);
  }
  // A group naming a method the program lacks is refused when the executor is made.
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  g.output(g.op(OpKind::neg, {g.input("x", DType::f32, {4})}));
  pb.set_meta(kSharedArenasMeta, MetaValue::string_list({"f,g"}));
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  auto ex = Executor::create(*p, {BackendKind::kCpu, 1});
  ASSERT_FALSE(ex.is_ok());
  EXPECT_EQ(ex.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(ex.status().message().find("'g'"), std::string::npos) << ex.status().message();
}

TEST(Builder, SymbolicDimsAreAffineOrDerived) {
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  const SymExpr t = g.symbol("t", 4, 300);
  const SymExpr pos = g.symbol("pos", 0, 50);
  Val x = g.input("x", DType::f32, {1, 2, t});
  Val w = g.constant(pb.add_constant_copy("w", DType::f32, {2, 2, 3}, random_vec(12, 11).data()));
  Val doubled = g.op(OpKind::concat, {x, x}, {{"axis", 2}});                                   // 2t
  Val strided = g.op(OpKind::conv1d, {x, w}, {{"stride", 2}, {"padding", {1}}});                // (t - 1) / 2 + 1
  Val window = g.op(OpKind::slice, {doubled}, {{"axis", 2}, {"start", pos}, {"end", pos + t}});  // t
  g.output(doubled);
  g.output(strided);
  g.output(window);
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const MethodDef& m = (*p)->methods[0];
  const auto names = m.symbol_names();
  const DimDef& d0 = m.values[m.outputs[0]].dims[2];
  ASSERT_TRUE(d0.expr.has_value());
  EXPECT_EQ(d0.expr->str(names), "2*t");
  EXPECT_EQ(d0.size, 600);
  const DimDef& d1 = m.values[m.outputs[1]].dims[2];
  EXPECT_TRUE(d1.derived);
  EXPECT_EQ(d1.size, 150);
  const DimDef& d2 = m.values[m.outputs[2]].dims[2];
  ASSERT_TRUE(d2.expr.has_value());
  EXPECT_EQ(d2.expr->str(names), "t");
}

TEST(Builder, ErrorsNameTheNode) {
  ProgramBuilder pb;
  MethodBuilder g = pb.method("f");
  Val a = g.input("a", DType::f32, {2, 8});
  Val w = g.constant(pb.add_constant_copy("w", DType::f32, {4, 7}, random_vec(28, 12).data()));
  g.op(OpKind::linear, {a, w}, {}, "proj");
  auto p = pb.finish();
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("linear proj"), std::string::npos) << p.status().message();
  ProgramBuilder pb2;
  MethodBuilder g2 = pb2.method("f");
  g2.op(OpKind::slice, {g2.input("x", DType::f32, {3})}, {{"axis", 0}, {"bogus", 1}});
  EXPECT_FALSE(pb2.finish().is_ok());
}

}  // namespace
}  // namespace vrun
