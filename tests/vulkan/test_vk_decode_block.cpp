// decode_block on the GPU (its one-dispatch kernel, and the unfused kernels with
// VRUN_DECODE_BLOCK=0) and on the CPU, against a float64 implementation of the op's definition
// on the same stored inputs: every weight dtype, both rope modes, grouped-query heads, one key
// and thousands (split), head dims of 32 and 64, rows too short for vector loads.
#include <cstdlib>
#include <string>

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkDecodeBlock : public VulkanTest {};

struct BlockCase {
  int64_t H, KV, hd, D, F, C, pos;
  DType wo, wgu, wd, cache;
  bool interleaved;
  int64_t slots = 1;  // > 1: the cache is slot 1's rows of a batched cache of that many slots
};

struct BlockInputs {
  HostTensor x, q, cache, pos, inv, wo, g, wgu, wd;
  Attrs attrs{OpKind::decode_block};
};

BlockInputs make_inputs(const BlockCase& c, std::mt19937& rng) {
  BlockInputs in;
  in.x = random_tensor(DType::f32, Shape{1, 1, c.D}, rng, -2, 2);
  in.q = random_tensor(DType::f32, Shape{1, 1, c.H, c.hd}, rng, -2, 2);
  in.cache = random_tensor(c.cache, Shape{1, 2 * c.KV, c.slots * c.C, c.hd}, rng, -2, 2);
  if (c.slots > 1) {
    in.cache.view.shape = Shape{1, 2 * c.KV, c.C, c.hd};
    in.cache.view.data = static_cast<uint8_t*>(in.cache.view.data) + c.C * c.hd * dtype_elem_size(c.cache);
  }
  in.pos = vector_tensor(std::vector<int32_t>{static_cast<int32_t>(c.pos)});
  in.inv = vector_tensor(rope_frequencies(c.hd));
  in.wo = random_tensor(c.wo, Shape{c.D, c.H * c.hd}, rng, -0.2, 0.2);
  in.g = random_tensor(DType::f32, Shape{c.D}, rng, 0.5, 1.5);
  in.wgu = random_tensor(c.wgu, Shape{2 * c.F, c.D}, rng, -0.2, 0.2);
  in.wd = random_tensor(c.wd, Shape{c.D, c.F}, rng, -0.2, 0.2);
  in.attrs.set_i("heads", c.H).set_i("kv_heads", c.KV).set_f("eps", 1e-5).set_s("rope_mode", c.interleaved ? "interleaved" : "half");
  return in;
}

// The op's definition in float64 (rope's angle as the op defines it: float32 position times the
// float32 frequency, then cos and sin).
std::vector<double> reference(const BlockCase& c, const BlockInputs& in) {
  const auto x = to_doubles(in.x.view), q = to_doubles(in.q.view), cache = to_doubles(in.cache.view);
  const auto inv = to_doubles(in.inv.view), wo = to_doubles(in.wo.view), g = to_doubles(in.g.view);
  const auto wgu = to_doubles(in.wgu.view), wd = to_doubles(in.wd.view);
  const int64_t hd = c.hd, half = hd / 2, L = c.pos + 1;
  std::vector<double> att(static_cast<size_t>(c.H * hd));
  for (int64_t h = 0; h < c.H; ++h) {
    std::vector<double> qr(static_cast<size_t>(hd));
    for (int64_t i = 0; i < hd; ++i) {
      const int64_t f = c.interleaved ? i / 2 : i % half;
      const int64_t partner = c.interleaved ? (i % 2 == 0 ? i + 1 : i - 1) : (i < half ? i + half : i - half);
      const double sgn = c.interleaved ? (i % 2 == 0 ? -1.0 : 1.0) : (i < half ? -1.0 : 1.0);
      const double ang = static_cast<double>(static_cast<float>(c.pos) * static_cast<float>(inv[f]));
      qr[i] = q[h * hd + i] * std::cos(ang) + sgn * q[h * hd + partner] * std::sin(ang);
    }
    const int64_t kh = h / (c.H / c.KV);
    std::vector<double> s(static_cast<size_t>(L));
    double mx = -1e300;
    for (int64_t k = 0; k < L; ++k) {
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += qr[i] * cache[(kh * c.C + k) * hd + i];
      s[k] = d / std::sqrt(static_cast<double>(hd));
      mx = std::max(mx, s[k]);
    }
    double den = 0;
    for (auto& v : s) den += (v = std::exp(v - mx));
    for (int64_t i = 0; i < hd; ++i) {
      double a = 0;
      for (int64_t k = 0; k < L; ++k) a += s[k] * cache[((c.KV + kh) * c.C + k) * hd + i];
      att[h * hd + i] = a / den;
    }
  }
  const int64_t K = c.H * hd;
  std::vector<double> x1(static_cast<size_t>(c.D)), xn(static_cast<size_t>(c.D)), hb(static_cast<size_t>(c.F)), y(static_cast<size_t>(c.D));
  double ss = 0;
  for (int64_t n = 0; n < c.D; ++n) {
    double a = x[n];
    for (int64_t k = 0; k < K; ++k) a += wo[n * K + k] * att[k];
    x1[n] = a;
    ss += a * a;
  }
  const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(c.D) + 1e-5);
  for (int64_t n = 0; n < c.D; ++n) xn[n] = x1[n] * rstd * g[n];
  for (int64_t u = 0; u < c.F; ++u) {
    double up = 0, gate = 0;
    for (int64_t k = 0; k < c.D; ++k) {
      up += wgu[u * c.D + k] * xn[k];
      gate += wgu[(c.F + u) * c.D + k] * xn[k];
    }
    hb[u] = up * silu_f64(gate);
  }
  for (int64_t n = 0; n < c.D; ++n) {
    double a = x1[n];
    for (int64_t k = 0; k < c.F; ++k) a += wd[n * c.F + k] * hb[k];
    y[n] = a;
  }
  return y;
}

std::string name_of(const BlockCase& c) {
  return "H " + std::to_string(c.H) + "/" + std::to_string(c.KV) + " hd " + std::to_string(c.hd) + " D " + std::to_string(c.D) + " F " +
         std::to_string(c.F) + " pos " + std::to_string(c.pos) + "/" + std::to_string(c.C) + " wo " + dtype_name(c.wo) + " wgu " +
         dtype_name(c.wgu) + " wd " + dtype_name(c.wd) + " cache " + dtype_name(c.cache) + (c.interleaved ? " interleaved" : " half") +
         (c.slots > 1 ? " slot 1 of " + std::to_string(c.slots) : "");
}

struct KnobGuard {
  ~KnobGuard() {
    unsetenv("VRUN_DECODE_BLOCK");
    unsetenv("VRUN_DECODE_STREAM");
  }
};

TEST_F(VkDecodeBlock, MatchesFloat64OnEveryPath) {
  std::mt19937 rng(7);
  const std::vector<BlockCase> cases = {
      {4, 2, 64, 128, 96, 40, 17, DType::f16, DType::f16, DType::f16, DType::f16, false},
      {4, 2, 64, 128, 96, 40, 0, DType::q4_0, DType::q4_0, DType::q4_0, DType::f16, false},
      {6, 3, 32, 96, 64, 300, 250, DType::q4_0, DType::q4_1, DType::q8_0, DType::f32, true},
      {2, 1, 32, 64, 128, 24, 23, DType::bf16, DType::f32, DType::q4_1, DType::f16, true},
      {3, 3, 32, 100, 40, 16, 9, DType::f32, DType::f16, DType::bf16, DType::f16, false},
      // A cache longer than one item's 2,048 keys: several splits of a head, merged.
      {2, 1, 64, 64, 32, 5000, 4500, DType::q4_0, DType::q4_0, DType::q8_0, DType::f16, false},
      // One slot's rows of a batched cache (decode_batch_1): heads 3 C hd apart.
      {4, 2, 32, 64, 64, 50, 30, DType::q4_0, DType::q4_0, DType::q4_0, DType::f16, false, 3},
  };
  KnobGuard guard;
  // "": the kernel as the device gets it; "1x64": one small workgroup (subgroups take several
  // rows and keys each), each row's weights requested as it is computed (VRUN_DECODE_STREAM=0);
  // "0": the unfused kernels.
  for (const char* knob : {"", "1x64", "0"}) {
    for (const BlockCase& c : cases) {
      const std::string what = name_of(c) + " VRUN_DECODE_BLOCK=" + knob;
      SCOPED_TRACE(what);
      if (*knob) setenv("VRUN_DECODE_BLOCK", knob, 1);
      else unsetenv("VRUN_DECODE_BLOCK");
      if (std::string(knob) == "1x64") setenv("VRUN_DECODE_STREAM", "0", 1);
      else unsetenv("VRUN_DECODE_STREAM");
      BlockInputs in = make_inputs(c, rng);
      const auto want = reference(c, in);
      double mag = 0;
      for (double v : want) mag = std::max(mag, std::fabs(v));
      auto gpu = run_gpu(OpKind::decode_block, {&in.x, &in.q, &in.cache, &in.pos, &in.inv, &in.wo, &in.g, &in.wgu, &in.wd}, in.attrs);
      ASSERT_EQ(gpu[0].view.shape, (Shape{1, 1, c.D}));
      // f32 arithmetic over sums of a few hundred products; the unfused kernels may feed halves
      // to tensor cores nowhere here (one row).
      expect_close(to_doubles(gpu[0].view), want, 2e-5 * (1 + mag), 2e-4, what.c_str());
      if (*knob) continue;
      RunResult cpu = run_cpu(OpKind::decode_block, {in.x.view, in.q.view, in.cache.view, in.pos.view, in.inv.view, in.wo.view, in.g.view,
                                                     in.wgu.view, in.wd.view},
                              in.attrs);
      ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
      // The CPU's quantised dot products round x to 8 bits a block (as llama.cpp's do): 1e-3.
      const bool quant = is_quantized(c.wo) || is_quantized(c.wgu) || is_quantized(c.wd);
      expect_close(to_doubles(cpu.outputs[0].view), want, (quant ? 1e-3 : 2e-5) * (1 + mag), 2e-4, (what + " cpu").c_str());
    }
  }
}

TEST_F(VkDecodeBlock, ShapeErrorsNameTheInput) {
  std::mt19937 rng(3);
  BlockCase c{4, 2, 64, 128, 96, 40, 5, DType::f16, DType::f16, DType::f16, DType::f16, false};
  BlockInputs in = make_inputs(c, rng);
  auto infer = [&](const HostTensor& wd, int64_t heads) {
    Attrs a = in.attrs;
    a.set_i("heads", heads);
    std::vector<TensorDesc> d;
    std::vector<TensorDesc> descs;
    for (const HostTensor* t : std::vector<const HostTensor*>{&in.x, &in.q, &in.cache, &in.pos, &in.inv, &in.wo, &in.g, &in.wgu, &wd})
      descs.push_back({t->view.dtype, t->view.shape});
    std::vector<const TensorDesc*> ptrs;
    for (const auto& t : descs) ptrs.push_back(&t);
    return infer_shapes(OpKind::decode_block, ptrs, a, &d);
  };
  EXPECT_TRUE(infer(in.wd, 4).is_ok());
  const Status bad_down = infer(random_tensor(DType::f16, Shape{127, 96}, rng), 4);
  EXPECT_NE(bad_down.to_string().find("w_down must be [128, 96]"), std::string::npos) << bad_down.to_string();
  const Status bad_heads = infer(in.wd, 3);
  EXPECT_NE(bad_heads.to_string().find("multiple of kv_heads"), std::string::npos) << bad_heads.to_string();
}

}  // namespace
}  // namespace vrun::test
