// Builds the tiny transformer, writes it, loads it back, runs prefill and 5 decode steps through
// the KV cache and compares the logits with a naive float64 transformer written here.
#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "runtime/executor.h"
#include "runtime/graph/builder.h"
#include "tests/runtime/tiny_transformer.h"
#include "tests/runtime/vulkan_executor.h"

namespace vrun::test {
namespace {

// Full recomputation over the whole token prefix, no cache: logits of the last position.
std::vector<double> reference_logits(const TinyWeights& w, const std::vector<int>& toks) {
  const TinyConfig& c = w.cfg;
  const int n = static_cast<int>(toks.size()), d = c.dim, hd = c.head_dim(), kvd = c.kv_heads * hd;
  using Mat = std::vector<std::vector<double>>;
  Mat x(n, std::vector<double>(d));
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i) x[t][i] = w.embed[static_cast<size_t>(toks[t]) * d + i];
  auto rms = [&](const std::vector<double>& v, const std::vector<float>& g) {
    double ss = 0;
    for (double a : v) ss += a * a;
    const double r = 1.0 / std::sqrt(ss / v.size() + c.eps);
    std::vector<double> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = v[i] * r * g[i];
    return o;
  };
  auto matvec = [](const std::vector<float>& W, const std::vector<double>& v, int rows) {
    std::vector<double> o(rows, 0.0);
    const size_t cols = v.size();
    for (int r = 0; r < rows; ++r)
      for (size_t k = 0; k < cols; ++k) o[r] += W[r * cols + k] * v[k];
    return o;
  };
  auto rope = [&](std::vector<double>& v, int heads, int p) {
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const double f = std::pow(c.rope_theta, -2.0 * i / hd);
        const double a = p * f, co = std::cos(a), si = std::sin(a);
        double& x0 = v[h * hd + i];
        double& x1 = v[h * hd + i + hd / 2];
        const double y0 = x0 * co - x1 * si, y1 = x1 * co + x0 * si;
        x0 = y0;
        x1 = y1;
      }
  };
  for (const TinyLayer& L : w.layers) {
    Mat q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      auto h = rms(x[t], L.attn_norm);
      q[t] = matvec(L.wq, h, d);
      k[t] = matvec(L.wk, h, kvd);
      v[t] = matvec(L.wv, h, kvd);
      rope(q[t], c.heads, t);
      rope(k[t], c.kv_heads, t);
    }
    for (int t = 0; t < n; ++t) {
      std::vector<double> att(d, 0.0);
      for (int h = 0; h < c.heads; ++h) {
        const int kh = h / (c.heads / c.kv_heads);
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kh * hd + i];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][kh * hd + i];
      }
      const auto o = matvec(L.wo, att, d);
      for (int i = 0; i < d; ++i) x[t][i] += o[i];
      const auto h2 = rms(x[t], L.ffn_norm);
      auto gt = matvec(L.wg, h2, c.ffn);
      const auto up = matvec(L.wu, h2, c.ffn);
      for (int i = 0; i < c.ffn; ++i) gt[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
      const auto dn = matvec(L.wd, gt, d);
      for (int i = 0; i < d; ++i) x[t][i] += dn[i];
    }
  }
  return matvec(w.out, rms(x[n - 1], w.final_norm), c.vocab);
}

void expect_logits(const TensorView& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.ptr<float>()[i], want[i], 1e-4 * std::max(1.0, scale)) << what << " logit " << i;
}

TEST(RoundTrip, WriteLoadPrefillAndDecodeMatchNaiveReference) {
  TinyConfig cfg;
  const TinyWeights w = make_tiny_weights(cfg, 1234);
  auto built = build_tiny_transformer(w);
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
  const std::string path = (std::filesystem::temp_directory_path() / ("vrun_roundtrip_" + std::to_string(::getpid()) + ".vrp")).string();
  ASSERT_TRUE(write_program(**built, path).is_ok());
  auto loaded = load_program(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  std::remove(path.c_str());

  // The symbolic shapes survive the trip.
  const MethodDef* m = (*loaded)->method("forward");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->symbols.size(), 2u);
  const ValueDef& tok = m->values[m->inputs[0]];
  ASSERT_TRUE(tok.dims[1].expr.has_value());
  EXPECT_EQ(tok.dims[1].expr->str(m->symbol_names()), "seq");
  EXPECT_GT(m->arena_size, 0);
  EXPECT_EQ((*loaded)->meta("general.architecture")->s, "tiny-llama");

  auto ex = Executor::create(*loaded, {BackendKind::kCpu, 2});
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  std::vector<int> toks = {3, 17, 5, 29, 11, 0, 36};  // prompt
  const std::vector<int> next = {7, 21, 2, 30, 14};   // fed one at a time
  std::vector<int32_t> in(toks.begin(), toks.end());
  auto out = (*ex)->run("forward", {TensorView::dense(in.data(), DType::i32, {1, static_cast<int64_t>(in.size())})},
                        {{"pos", 0}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  expect_logits((*out)[0], reference_logits(w, toks), "prefill");
  for (size_t s = 0; s < next.size(); ++s) {
    int32_t t = next[s];
    out = (*ex)->run("forward", {TensorView::dense(&t, DType::i32, {1, 1})}, {{"pos", static_cast<int64_t>(toks.size())}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    toks.push_back(next[s]);
    expect_logits((*out)[0], reference_logits(w, toks), "decode step " + std::to_string(s));
  }
  // A reset cache gives the prefill result again, from the in-memory program this time.
  auto ex2 = Executor::create(*built, {BackendKind::kCpu, 1});
  ASSERT_TRUE(ex2.is_ok());
  auto again = (*ex2)->run("forward", {TensorView::dense(in.data(), DType::i32, {1, static_cast<int64_t>(in.size())})},
                           {{"pos", 0}});
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  expect_logits((*again)[0], reference_logits(w, {3, 17, 5, 29, 11, 0, 36}), "in-memory program");
}

TEST(RoundTrip, BadCallsAreClearErrors) {
  TinyConfig cfg;
  auto built = build_tiny_transformer(make_tiny_weights(cfg, 7));
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
  auto ex = Executor::create(*built, {BackendKind::kCpu, 1});
  ASSERT_TRUE(ex.is_ok());
  int32_t toks[20] = {1, 2, 3};
  // Sequence longer than the symbol's bound.
  auto r = (*ex)->run("forward", {TensorView::dense(toks, DType::i32, {1, 20})}, {{"pos", 0}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("seq = 20"), std::string::npos) << r.status().message();
  // Missing symbol value.
  r = (*ex)->run("forward", {TensorView::dense(toks, DType::i32, {1, 3})});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("pos"), std::string::npos);
  // Wrong dtype, unknown method, out-of-range token id.
  float f[3] = {1, 2, 3};
  EXPECT_FALSE((*ex)->run("forward", {TensorView::dense(f, DType::f32, {1, 3})}, {{"pos", 0}}).is_ok());
  EXPECT_EQ((*ex)->run("decode", {}).status().code(), ErrorCode::kNotFound);
  int32_t bad[1] = {1000};
  r = (*ex)->run("forward", {TensorView::dense(bad, DType::i32, {1, 1})}, {{"pos", 0}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("embedding"), std::string::npos) << r.status().message();
  // Cache overflow: position + length past the cache.
  r = (*ex)->run("forward", {TensorView::dense(toks, DType::i32, {1, 3})}, {{"pos", 22}});
  EXPECT_FALSE(r.is_ok());
}

}  // namespace
}  // namespace vrun::test

namespace vrun::test {
namespace {

// The tiny transformer with the weights of `seed` on a Vulkan executor (vulkan_executor.h: *ex
// stays null, the test skipped or failed, without a usable device).
void vulkan_tiny_transformer(unsigned seed, TinyWeights* w, std::unique_ptr<Executor>* ex,
                             const TinyConfig& cfg = TinyConfig{}) {
  *w = make_tiny_weights(cfg, seed);
  auto built = build_tiny_transformer(*w);
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
  vulkan_executor(*built, ex);
}

// The same program on the Vulkan backend (lavapipe here, a GPU elsewhere): same logits as the
// float64 reference, nodes really on the GPU, and no validation-layer errors.
TEST(RoundTrip, VulkanBackendMatchesReference) {
  TinyWeights w;
  std::unique_ptr<Executor> ex;
  vulkan_tiny_transformer(4321, &w, &ex);
  if (!ex) return;
  const auto backends = ex->node_backends("forward");
  EXPECT_GT(std::count(backends.begin(), backends.end(), "vulkan"), 20) << ex->device_description();
  std::vector<int> toks = {5, 1, 33, 8, 19};
  std::vector<int32_t> in(toks.begin(), toks.end());
  auto out = ex->run("forward", {TensorView::dense(in.data(), DType::i32, {1, 5})}, {{"pos", 0}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  expect_logits((*out)[0], reference_logits(w, toks), "vulkan prefill");
  for (int s = 0; s < 3; ++s) {
    int32_t t = 7 + s;
    out = ex->run("forward", {TensorView::dense(&t, DType::i32, {1, 1})}, {{"pos", static_cast<int64_t>(toks.size())}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    toks.push_back(t);
    expect_logits((*out)[0], reference_logits(w, toks), "vulkan decode step " + std::to_string(s));
  }
  ex->reset_state();
  out = ex->run("forward", {TensorView::dense(in.data(), DType::i32, {1, 5})}, {{"pos", 0}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  expect_logits((*out)[0], reference_logits(w, {5, 1, 33, 8, 19}), "vulkan after reset");
  EXPECT_EQ(ex->gpu_validation_errors(), 0u);
}

// Calls that repeat (same method, symbol values and state residency) are recorded the first
// time, captured the second and replayed after that: each round here feeds other tokens, so a
// replay that kept stale inputs, outputs or cache writes would give other logits.
TEST(RoundTrip, VulkanRepeatedCallsReplayWithFreshData) {
  TinyWeights w;
  std::unique_ptr<Executor> ex;
  vulkan_tiny_transformer(99, &w, &ex);
  if (!ex) return;
  for (int round = 0; round < 4; ++round) {
    ex->reset_state();
    std::vector<int> toks = {3 + round, 1, 30 - round, 8, 19};
    std::vector<int32_t> in(toks.begin(), toks.end());
    auto out = ex->run("forward", {TensorView::dense(in.data(), DType::i32, {1, 5})}, {{"pos", 0}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    expect_logits((*out)[0], reference_logits(w, toks), "round " + std::to_string(round) + " prefill");
    for (int s = 0; s < 3; ++s) {
      int32_t t = (7 + 5 * s + 3 * round) % w.cfg.vocab;
      out = ex->run("forward", {TensorView::dense(&t, DType::i32, {1, 1})}, {{"pos", static_cast<int64_t>(toks.size())}});
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      toks.push_back(t);
      expect_logits((*out)[0], reference_logits(w, toks), "round " + std::to_string(round) + " decode " + std::to_string(s));
    }
  }
  // Rounds 2 and 3 replay all four calls, unless this device cannot replay (no push descriptors).
  const uint64_t replayed = ex->gpu_replayed_calls();
  EXPECT_TRUE(replayed == 8 || replayed == 0) << replayed;
  std::printf("replayed calls: %llu\n", static_cast<unsigned long long>(replayed));
  EXPECT_EQ(ex->gpu_validation_errors(), 0u);
}

// Decode over a cache of 150+ keys under VRUN_SDPA=decode: each layer's attention splits the keys
// over workgroups whose last one merges them (counters that must return to zero for the next
// layer, call and replay).
TEST(RoundTrip, VulkanLongCacheDecodeSplitsKeys) {
  setenv("VRUN_SDPA", "decode", 1);
  TinyConfig cfg;
  cfg.ctx = 200;
  cfg.max_seq = 160;
  TinyWeights w;
  std::unique_ptr<Executor> ex;
  vulkan_tiny_transformer(7, &w, &ex, cfg);
  if (!ex) return;
  for (int round = 0; round < 3; ++round) {
    ex->reset_state();
    std::vector<int> toks;
    for (int i = 0; i < 150; ++i) toks.push_back((i * 7 + round * 3 + 1) % w.cfg.vocab);
    std::vector<int32_t> in(toks.begin(), toks.end());
    auto out = ex->run("forward", {TensorView::dense(in.data(), DType::i32, {1, 150})}, {{"pos", 0}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    for (int s = 0; s < 2; ++s) {
      int32_t t = (5 + 11 * s + round) % w.cfg.vocab;
      out = ex->run("forward", {TensorView::dense(&t, DType::i32, {1, 1})}, {{"pos", static_cast<int64_t>(toks.size())}});
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      toks.push_back(t);
      expect_logits((*out)[0], reference_logits(w, toks), "round " + std::to_string(round) + " decode " + std::to_string(s));
    }
  }
  unsetenv("VRUN_SDPA");
  EXPECT_EQ(ex->gpu_validation_errors(), 0u);
}

// A projection whose workgroup-scope tiles split K over workgroups (VRUN_MM_SPLITK; the last of a
// tile's workgroups merges the partial sums and sets the tile's counter back to zero), called
// with fresh x each time: the first call is recorded, the second captured, the rest replayed
// with the same counters, so a counter left non-zero would leave y unwritten in the next call.
// On devices without VK_NV_cooperative_matrix2 (lavapipe) the projection takes other kernels
// and the same checks hold.
TEST(RoundTrip, VulkanSplitKProjectionReplays) {
  constexpr int64_t kM = 150, kK = 1024, kN = 300;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto w16 = std::make_shared<std::vector<uint16_t>>(kN * kK);
  std::vector<double> w(kN * kK);
  for (int64_t i = 0; i < kN * kK; ++i) {
    (*w16)[i] = f32_to_f16(u(rng));
    w[i] = f16_to_f32((*w16)[i]);
  }
  ProgramBuilder pb;
  const int wc = pb.add_constant("w", DType::f16, Shape{kN, kK}, w16->data(), std::shared_ptr<const void>(w16, w16->data()));
  MethodBuilder g = pb.method("f");
  Val x_in = g.input("x", DType::f32, {kM, kK});
  g.output(g.op(OpKind::linear, {x_in, g.constant(wc)}));
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  setenv("VRUN_MM_CM2", "128x64x32x128", 1);
  setenv("VRUN_MM_SPLITK", "4", 1);
  std::unique_ptr<Executor> ex;
  vulkan_executor(*p, &ex);
  if (ex) {
    for (int call = 0; call < 4; ++call) {
      // f32 x of values that halves hold exactly (the tensor cores take x as halves).
      std::vector<float> x(kM * kK);
      for (auto& v : x) v = f16_to_f32(f32_to_f16(u(rng)));
      auto out = ex->run("f", {TensorView::dense(x.data(), DType::f32, {kM, kK})});
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      const TensorView& y = (*out)[0];
      ASSERT_EQ(y.dtype, DType::f32);
      double worst = 0;
      for (int64_t m = 0; m < kM; ++m)
        for (int64_t n = 0; n < kN; ++n) {
          double s = 0;
          for (int64_t k = 0; k < kK; ++k) s += double(x[m * kK + k]) * w[n * kK + k];
          worst = std::max(worst, std::abs(y.ptr<float>()[m * kN + n] - s) / (1e-5 * std::sqrt(double(kK)) + 2e-3 * std::abs(s)));
        }
      EXPECT_LE(worst, 1.0) << "call " << call << ": worst error over its bound";
    }
    EXPECT_EQ(ex->gpu_validation_errors(), 0u);
  }
  unsetenv("VRUN_MM_CM2");
  unsetenv("VRUN_MM_SPLITK");
}

}  // namespace
}  // namespace vrun::test
