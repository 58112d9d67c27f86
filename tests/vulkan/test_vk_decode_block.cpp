// decode_block and decode_layer on the GPU (the one-dispatch kernel that VRUN_DECODE_BLOCK turns
// on, with and without its QKV stage, and the unfused kernels of the default) and on the CPU, against a float64
// implementation of the ops' definitions on the same stored inputs: every weight dtype, both rope
// modes, grouped-query heads, one key and thousands (split), head dims of 32 and 64, rows too
// short for vector loads, and (decode_layer) the cache row it writes in place.
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
    unsetenv("VRUN_DECODE_LAYER");
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
  // "on": the kernel as the device gets it; "1x64": one small workgroup (subgroups take several
  // rows and keys each), each row's weights requested as it is computed (VRUN_DECODE_STREAM=0);
  // "": the unfused kernels (the default).
  for (const char* knob : {"on", "1x64", ""}) {
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
      if (std::string(knob) != "on") continue;
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

// ---- decode_layer: decode_block's inputs with x's normalised QKV projection in place of q, the
// cache written in place at pos.

struct LayerInputs {
  BlockInputs block;  // q unused; the cache as given (its row at pos random)
  HostTensor an, wqkv;
  Attrs attrs{OpKind::decode_layer};
};

LayerInputs make_layer_inputs(const BlockCase& c, DType wq, std::mt19937& rng) {
  LayerInputs in;
  in.block = make_inputs(c, rng);
  in.an = random_tensor(DType::f32, Shape{c.D}, rng, 0.5, 1.5);
  in.wqkv = random_tensor(wq, Shape{(c.H + 2 * c.KV) * c.hd, c.D}, rng, -0.3, 0.3);
  in.attrs.set_i("heads", c.H).set_i("kv_heads", c.KV).set_f("eps", 1e-5).set_s("rope_mode", c.interleaved ? "interleaved" : "half");
  return in;
}

HostTensor deep_copy(const HostTensor& t) {
  HostTensor c = t;
  c.storage = std::make_shared<std::vector<uint8_t>>(*t.storage);
  c.view.data = c.storage->data() + (static_cast<const uint8_t*>(t.view.data) - t.storage->data());
  return c;
}

// Every element of the cache's whole storage (all slots), as doubles.
std::vector<double> whole_cache(const BlockCase& c, const HostTensor& cache) {
  TensorView all = TensorView::dense(cache.storage->data(), cache.view.dtype, Shape{1, 2 * c.KV, c.slots * c.C, c.hd});
  return to_doubles(all);
}

// The definition in float64: the block's inputs with q and the cache row at pos computed (the
// row rounded to the cache's dtype, as stored in b.cache).
BlockInputs layer_block(const BlockCase& c, const LayerInputs& in) {
  const auto x = to_doubles(in.block.x.view), an = to_doubles(in.an.view), w = to_doubles(in.wqkv.view);
  const auto inv = to_doubles(in.block.inv.view);
  const int64_t N = (c.H + 2 * c.KV) * c.hd, hd = c.hd, half = hd / 2;
  double ss = 0;
  for (double v : x) ss += v * v;
  const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(c.D) + 1e-5);
  std::vector<double> qkv(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < c.D; ++k) qkv[n] += w[n * c.D + k] * x[k] * rstd * an[k];
  BlockInputs b = in.block;
  b.q = make_tensor(DType::f32, Shape{1, 1, c.H, hd});
  for (int64_t i = 0; i < c.H * hd; ++i) static_cast<float*>(b.q.view.data)[i] = static_cast<float>(qkv[i]);
  HostTensor cache = deep_copy(in.block.cache);
  for (int64_t h = 0; h < 2 * c.KV; ++h)
    for (int64_t i = 0; i < hd; ++i) {
      const double* r = &qkv[(c.H + h) * hd];
      double v = r[i];
      if (h < c.KV) {  // keys rotate at pos
        const int64_t f = c.interleaved ? i / 2 : i % half;
        const int64_t partner = c.interleaved ? (i % 2 == 0 ? i + 1 : i - 1) : (i < half ? i + half : i - half);
        const double sgn = c.interleaved ? (i % 2 == 0 ? -1.0 : 1.0) : (i < half ? -1.0 : 1.0);
        const double ang = static_cast<double>(static_cast<float>(c.pos) * static_cast<float>(inv[f]));
        v = r[i] * std::cos(ang) + sgn * r[partner] * std::sin(ang);
      }
      const int64_t idx[4] = {0, h, c.pos, i};
      store_double(cache.view, idx, v);
    }
  b.cache = cache;
  return b;
}

// y of the block b with the cache a kernel wrote: a key or value at pos may round to the
// neighbouring value of the cache's dtype where the kernel's rotation (f32, the device's sin and
// cos) lands next to a rounding boundary; the cache check bounds that, and y must then be what
// attention over the written cache gives.
std::vector<double> y_over(const BlockCase& c, BlockInputs b, const HostTensor& written) {
  b.cache = written;
  return reference(c, b);
}

TEST_F(VkDecodeBlock, LayerMatchesFloat64AndWritesTheCacheOnEveryPath) {
  std::mt19937 rng(11);
  struct LayerCase {
    BlockCase c;
    DType wq;
  };
  const std::vector<LayerCase> cases = {
      {{4, 2, 64, 128, 96, 40, 17, DType::f16, DType::f16, DType::f16, DType::f16, false}, DType::f16},
      {{4, 2, 64, 128, 96, 40, 0, DType::q4_0, DType::q4_0, DType::q4_0, DType::f16, false}, DType::q4_0},
      {{6, 3, 32, 96, 64, 300, 250, DType::q4_0, DType::q4_1, DType::q8_0, DType::f32, true}, DType::q8_0},
      {{2, 1, 32, 64, 128, 24, 23, DType::bf16, DType::f32, DType::q4_1, DType::bf16, true}, DType::q4_1},
      {{3, 3, 32, 100, 40, 16, 9, DType::f32, DType::f16, DType::bf16, DType::f16, false}, DType::bf16},
      {{2, 1, 64, 64, 32, 5000, 4500, DType::q4_0, DType::q4_0, DType::q8_0, DType::f16, false}, DType::f32},
      // One slot's rows of a batched cache (decode_batch_1): heads 3 C hd apart.
      {{4, 2, 32, 64, 64, 50, 30, DType::q4_0, DType::q4_0, DType::q4_0, DType::f16, false, 3}, DType::q4_0},
  };
  KnobGuard guard;
  // "on": the kernel with its QKV stage; "1x64": the same as one small workgroup without
  // streaming; "layer0": the QKV projection and the cache write as kernels of their own, then the
  // decode_block kernel; "": every part unfused (the default).
  for (const char* knob : {"on", "1x64", "layer0", ""}) {
    for (const LayerCase& lc : cases) {
      const BlockCase& c = lc.c;
      const std::string what = name_of(c) + " wqkv " + dtype_name(lc.wq) + " knob " + knob;
      SCOPED_TRACE(what);
      const std::string k = knob;
      if (k == "layer0") setenv("VRUN_DECODE_LAYER", "0", 1);
      else unsetenv("VRUN_DECODE_LAYER");
      if (k == "on" || k == "1x64" || k == "layer0") setenv("VRUN_DECODE_BLOCK", k == "1x64" ? "1x64" : "on", 1);
      else unsetenv("VRUN_DECODE_BLOCK");
      if (k == "1x64") setenv("VRUN_DECODE_STREAM", "0", 1);
      else unsetenv("VRUN_DECODE_STREAM");
      LayerInputs in = make_layer_inputs(c, lc.wq, rng);
      const BlockInputs ref = layer_block(c, in);
      const auto want_cache = whole_cache(c, ref.cache);
      double mag = 0;
      for (double v : reference(c, ref)) mag = std::max(mag, std::fabs(v));
      const double cache_rtol = c.cache == DType::f16 ? 0x1p-10 : c.cache == DType::bf16 ? 0x1p-7 : 1e-5;

      // The GPU: the op recorded with the cache as its output 0 (written where it lies).
      const BlockInputs& b = in.block;
      std::vector<DeviceTensor> dev;
      for (const HostTensor* t : std::vector<const HostTensor*>{&b.cache, &b.x, &in.an, &in.wqkv, &b.pos, &b.inv, &b.wo, &b.g, &b.wgu, &b.wd})
        dev.push_back(to_device(*t));
      std::vector<vulkan::DeviceView> views;
      for (const auto& d : dev) views.push_back(d.view);
      auto yb = ctx().allocator().allocate(dtype_bytes(DType::f32, c.D));
      ASSERT_TRUE(yb.is_ok());
      const vulkan::DeviceView yv = vulkan::DeviceView::dense(yb->ref(), DType::f32, Shape{1, 1, c.D});
      auto rec = vulkan::Recorder::create(ctx());
      ASSERT_TRUE(rec.is_ok());
      Status s = (*rec)->record(OpKind::decode_layer, views, {views[0], yv}, in.attrs);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      ASSERT_TRUE((*rec)->submit_and_wait().is_ok());
      HostTensor got_cache = deep_copy(b.cache);
      ASSERT_TRUE(vulkan::download(ctx(), dev[0].buffer.ref(), 0, got_cache.storage->data(), got_cache.storage->size()).is_ok());
      expect_close(whole_cache(c, got_cache), want_cache, 1e-5, cache_rtol, (what + " cache").c_str());
      expect_close(to_doubles(to_host(yv).view), y_over(c, ref, got_cache), 2e-5 * (1 + mag), 2e-4, what.c_str());
      if (k != "on") continue;

      // The CPU, in place on a copy of the cache.
      HostTensor cpu_cache = deep_copy(b.cache);
      HostTensor y = make_tensor(DType::f32, Shape{1, 1, c.D});
      const std::vector<TensorView> ins = {cpu_cache.view, b.x.view, in.an.view, in.wqkv.view, b.pos.view, b.inv.view,
                                           b.wo.view,      b.g.view, b.wgu.view, b.wd.view};
      TensorView outs[2] = {cpu_cache.view, y.view};
      KernelCall call;
      call.op = OpKind::decode_layer;
      call.in = ins.data();
      call.n_in = static_cast<int>(ins.size());
      call.out = outs;
      call.n_out = 2;
      call.attrs = &in.attrs;
      call.pool = &ThreadPool::global();
      s = cpu_kernels().get(OpKind::decode_layer)(call);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      // The CPU's quantised dot products round x to 8 bits a block (as llama.cpp's do): 1e-3.
      const bool quant = is_quantized(c.wo) || is_quantized(c.wgu) || is_quantized(c.wd) || is_quantized(lc.wq);
      expect_close(whole_cache(c, cpu_cache), want_cache, quant ? 2e-3 : 1e-5, quant ? 2e-3 : cache_rtol, (what + " cpu cache").c_str());
      expect_close(to_doubles(y.view), y_over(c, ref, cpu_cache), (quant ? 1e-3 : 2e-5) * (1 + mag), 2e-4, (what + " cpu").c_str());
    }
  }
}

TEST_F(VkDecodeBlock, LayerShapeErrorsNameTheInput) {
  std::mt19937 rng(5);
  BlockCase c{4, 2, 64, 128, 96, 40, 5, DType::f16, DType::f16, DType::f16, DType::f16, false};
  LayerInputs in = make_layer_inputs(c, DType::f16, rng);
  auto infer = [&](const HostTensor& wq, const HostTensor& an) {
    std::vector<TensorDesc> d, descs;
    const BlockInputs& b = in.block;
    for (const HostTensor* t : std::vector<const HostTensor*>{&b.cache, &b.x, &an, &wq, &b.pos, &b.inv, &b.wo, &b.g, &b.wgu, &b.wd})
      descs.push_back({t->view.dtype, t->view.shape});
    std::vector<const TensorDesc*> ptrs;
    for (const auto& t : descs) ptrs.push_back(&t);
    Status s = infer_shapes(OpKind::decode_layer, ptrs, in.attrs, &d);
    if (s.is_ok()) {
      EXPECT_EQ(d.size(), 2u);
      EXPECT_EQ(d[0].shape, b.cache.view.shape);
      EXPECT_EQ(d[1].shape, b.x.view.shape);
    }
    return s;
  };
  EXPECT_TRUE(infer(in.wqkv, in.an).is_ok());
  const Status bad_w = infer(random_tensor(DType::f16, Shape{511, 128}, rng), in.an);
  EXPECT_NE(bad_w.to_string().find("decode_layer: w_qkv must be [512, 128]"), std::string::npos) << bad_w.to_string();
  const Status bad_norm = infer(in.wqkv, random_tensor(DType::f32, Shape{127}, rng));
  EXPECT_NE(bad_norm.to_string().find("decode_layer: attn_norm must be [128]"), std::string::npos) << bad_norm.to_string();
}

}  // namespace
}  // namespace vrun::test
