// Attention benchmarks of vrun_bench_vulkan (bench_attention.h).
#include "bench/vulkan/bench_attention.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/vulkan/harness.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/recorder.h"
#include "runtime/base/strings.h"

namespace vrun::vulkan::bench {

void bench_attention_shapes(Context& ctx, int reps, double bw) {
  // Decode attention as a decode step runs it (each call waiting for the one before, K/V
  // resident in L2 as a step's caches are), default kernel choice against VRUN_SDPA=decode,
  // beside the floor a dependent dispatch costs (a 64-element add) and two small matvecs.
  {
    DevTensor a = make(ctx, DType::f32, Shape{1, 64}), b = make(ctx, DType::f32, Shape{1, 64});
    const double t = run_op(ctx, reps, OpKind::add, {&a, &b}, Attrs(OpKind::add), false, true);
    row("dependent dispatch", "add 64", t, 1e-9, "-", 0);
  }
  {
    // A chain of different small kernels, each reading the one before's output (a Parakeet
    // decode step's pattern: matvec, elementwise, argmax): per dispatch, against the same
    // kernel repeated above.
    DevTensor a = make(ctx, DType::f32, Shape{1, 640}), b = make(ctx, DType::f32, Shape{1, 640});
    DevTensor c = make(ctx, DType::f32, Shape{1, 640}, false), w = make(ctx, DType::f16, Shape{640, 640});
    DevTensor d = make(ctx, DType::f32, Shape{1, 640}, false), e = make(ctx, DType::i32, Shape{1}, false);
    const Attrs add(OpKind::add), lin(OpKind::linear), relu(OpKind::relu);
    Attrs am(OpKind::argmax);
    am.set_i("axis", -1);
    const double t = time_runs(ctx, reps, [&](Recorder& r) -> Status {
      VRUN_RETURN_IF_ERROR(r.record(OpKind::add, {a.view, b.view}, {c.view}, add));
      VRUN_RETURN_IF_ERROR(r.record(OpKind::linear, {c.view, w.view, DeviceView{}}, {d.view}, lin));
      VRUN_RETURN_IF_ERROR(r.record(OpKind::relu, {d.view}, {a.view}, relu));
      return r.record(OpKind::argmax, {a.view}, {e.view}, am);
    });
    row("dependent dispatch", "add, matvec, relu, argmax", t / 4, 1e-9, "-", 0);
    const double t2 = time_runs(ctx, reps, [&](Recorder& r) -> Status {
      VRUN_RETURN_IF_ERROR(r.record(OpKind::add, {a.view, b.view}, {c.view}, add));
      VRUN_RETURN_IF_ERROR(r.record(OpKind::add, {c.view, b.view}, {d.view}, add));
      VRUN_RETURN_IF_ERROR(r.record(OpKind::add, {d.view, b.view}, {a.view}, add));
      return r.record(OpKind::add, {a.view, b.view}, {c.view}, add);
    });
    row("dependent dispatch", "add x4 (640)", t2 / 4, 1e-9, "-", 0);
    const double t3 = time_runs(ctx, reps, [&](Recorder& r) -> Status {
      VRUN_RETURN_IF_ERROR(r.record(OpKind::linear, {a.view, w.view, DeviceView{}}, {c.view}, lin));
      VRUN_RETURN_IF_ERROR(r.record(OpKind::linear, {c.view, w.view, DeviceView{}}, {d.view}, lin));
      VRUN_RETURN_IF_ERROR(r.record(OpKind::linear, {d.view, w.view, DeviceView{}}, {a.view}, lin));
      return r.record(OpKind::linear, {a.view, w.view, DeviceView{}}, {c.view}, lin);
    });
    row("dependent dispatch", "matvec 640x640 f16 x4", t3 / 4, 1e-9, "-", 0);
    // A call as a decode step makes one: n dependent dispatches recorded, submitted, waited
    // for; wall time per call (the intercept over n is the cost of a call beyond its work).
    auto rec = std::move(Recorder::create(ctx)).value();
    for (int n : {1, 4, 16}) {
      double best = 1e30;
      for (int pass = 0; pass < 3; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int call = 0; call < 200; ++call) {
          for (int i = 0; i < n; ++i) must(rec->record(OpKind::add, {a.view, b.view}, {i % 2 ? a.view : c.view}, add));
          must(rec->submit_and_wait());
        }
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 200);
      }
      row("call round trip", std::to_string(n) + " dependent adds", best, 1e-9, "-", 0);
    }
  }
  for (const auto& sh : std::vector<std::array<int64_t, 2>>{{384, 384}, {1536, 384}, {2048, 2048}}) {
    DevTensor x = make(ctx, DType::f32, Shape{1, sh[1]}), w = make(ctx, DType::q8_0, Shape{sh[0], sh[1]});
    const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear), false, true);
    row("linear q8_0 serial", std::to_string(sh[0]) + "x" + std::to_string(sh[1]), t,
        static_cast<double>(dtype_bytes(DType::q8_0, sh[0] * sh[1])) / 1e9, "GB/s", bw);
  }
  struct Att {
    const char* name;
    int64_t hq, hkv, d, lk;
    DType dt;
  };
  const Att shapes[] = {{"whisper-tiny self", 6, 6, 64, 64, DType::f32},    {"whisper-tiny self", 6, 6, 64, 224, DType::f32},
                        {"whisper-tiny self", 6, 6, 64, 448, DType::f32},   {"whisper-tiny cross", 6, 6, 64, 1500, DType::f32},
                        {"turbo cross", 20, 20, 64, 1500, DType::f32},      {"llama-1b", 32, 8, 64, 256, DType::f16},
                        {"llama-1b", 32, 8, 64, 1024, DType::f16},          {"llama-1b", 32, 8, 64, 4096, DType::f16},
                        {"llama-8b", 32, 8, 128, 4096, DType::f16}};
  for (const Att& a : shapes) {
    DevTensor q = make(ctx, DType::f32, Shape{1, a.hq, 1, a.d});
    DevTensor k = make(ctx, a.dt, Shape{1, a.hkv, a.lk, a.d}), v = make(ctx, a.dt, Shape{1, a.hkv, a.lk, a.d});
    const double bytes = 2.0 * a.hkv * a.lk * a.d * static_cast<double>(dtype_bytes(a.dt, 1));
    for (const char* kern : {"", "decode"}) {
      setenv("VRUN_SDPA", kern, 1);
      const double t = run_op(ctx, reps, OpKind::sdpa, {&q, &k, &v, nullptr}, Attrs(OpKind::sdpa), false, true);
      char shape[96];
      std::snprintf(shape, sizeof shape, "Hq%lld Hkv%lld D%lld Lk%lld %s %s", static_cast<long long>(a.hq),
                    static_cast<long long>(a.hkv), static_cast<long long>(a.d), static_cast<long long>(a.lk),
                    dtype_name(a.dt), *kern ? kern : "default");
      row(a.name, shape, t, bytes / 1e9, "GB/s", bw);
    }
    unsetenv("VRUN_SDPA");
  }
  // Llama-1B's decode step as the decode method runs it: f32 queries, one cache state of keys
  // and values [1, 2 Hkv, capacity, D] (f16), the position an i32 on the device, every run on
  // caches out of L2 (a step streams the weights between one layer's attention and the next).
  for (const int32_t at : {255, 700}) {
    const int64_t hq = 32, hkv = 8, d = 64, cap = 1024;
    DevTensor q = make(ctx, DType::f32, Shape{1, hq, 1, d});
    DevTensor kv = make(ctx, DType::f16, Shape{1, 2 * hkv, cap, d});
    DevTensor pos = make(ctx, DType::i32, Shape{1}, false);
    must(upload(ctx, pos.buf.ref(), 0, &at, sizeof at));
    DevTensor k, v;  // views into kv's buffer
    k.view = v.view = kv.view;
    k.view.shape = v.view.shape = Shape{1, hkv, cap, d};
    v.view.offset += static_cast<uint64_t>(hkv * cap * d * 2);
    Attrs attrs(OpKind::sdpa);
    attrs.set_i("causal", 1);
    const double bytes = 2.0 * hkv * (at + 1) * d * 2;
    for (const char* kern : {"", "combine", "decode"}) {
      setenv("VRUN_SDPA", kern, 1);
      const double t = run_op(ctx, reps, OpKind::sdpa, {&q, &k, &v, nullptr, &pos}, attrs, true, true);
      char shape[96];
      std::snprintf(shape, sizeof shape, "cap%lld pos%d %s", static_cast<long long>(cap), at, *kern ? kern : "default");
      row("llama-1b step attention", shape, t, bytes / 1e9, "GB/s", bw);
    }
    unsetenv("VRUN_SDPA");
  }
}

void bench_sdpa_tiles(Context& ctx, int reps, int64_t S, double tensor_roof, const std::string& sdpa_tiles) {
  // Causal prefill (Llama's GQA shape) and unmasked attention in f16 and f32 (rounded to halves).
  const int64_t Hq = 32, Hkv = 8, D = 128, L = 2048 / S, H = 8, Lu = 2500 / S;
  DevTensor q = make(ctx, DType::f16, Shape{1, Hq, L, D});
  DevTensor k = make(ctx, DType::f16, Shape{1, Hkv, L, D}), v = make(ctx, DType::f16, Shape{1, Hkv, L, D});
  // Llama-3.2-1B's heads of 64.
  DevTensor q64 = make(ctx, DType::f16, Shape{1, Hq, L, 64});
  DevTensor k64 = make(ctx, DType::f16, Shape{1, Hkv, L, 64}), v64 = make(ctx, DType::f16, Shape{1, Hkv, L, 64});
  Attrs causal(OpKind::sdpa);
  causal.set_i("causal", 1);
  std::vector<DevTensor> plain;
  for (DType dt : {DType::f16, DType::f32})
    for (int i = 0; i < 3; ++i) plain.push_back(make(ctx, dt, Shape{1, H, Lu, D}));
  for (const std::string& tile : split_nonempty(sdpa_tiles, ':')) {
    if (tile == "auto") unsetenv("VRUN_SDPA_CM2");
    else setenv("VRUN_SDPA_CM2", tile.c_str(), 1);
    setenv("VRUN_SDPA", "cm2", 1);
    double t = run_op(ctx, std::max(2, reps / 4), OpKind::sdpa, {&q, &k, &v, nullptr}, causal);
    row(("sdpa causal f16 " + tile).c_str(), "Hq32 Hkv8 D128 L" + std::to_string(L), t, 2.0 * Hq * L * L * D / 1e12,
        "TFLOP/s", tensor_roof);
    t = run_op(ctx, std::max(2, reps / 4), OpKind::sdpa, {&q64, &k64, &v64, nullptr}, causal);
    row(("sdpa causal f16 " + tile).c_str(), "Hq32 Hkv8 D64 L" + std::to_string(L), t, 2.0 * Hq * L * L * 64 / 1e12,
        "TFLOP/s", tensor_roof);
    for (int d = 0; d < 2; ++d) {
      t = run_op(ctx, std::max(2, reps / 4), OpKind::sdpa, {&plain[3 * d], &plain[3 * d + 1], &plain[3 * d + 2], nullptr},
                 Attrs(OpKind::sdpa));
      row((std::string("sdpa ") + (d ? "f32 " : "f16 ") + tile).c_str(), "H8 D128 L" + std::to_string(Lu), t,
          4.0 * H * Lu * Lu * D / 1e12, "TFLOP/s", tensor_roof);
    }
    unsetenv("VRUN_SDPA");
  }
  unsetenv("VRUN_SDPA_CM2");
}

void bench_sdpa_rows(Context& ctx, int reps, double bw, int64_t S, const std::string& sdpa_rows) {
  // GQA decode attention (32 query heads on 8 KV heads, one query row each, f16 cache) on the
  // row kernel's key split as VRUN_SDPA_ROWS sets it ("auto": the default): caches rotated out
  // of L2 as in the main table, and each call waiting for the one before on an L2-resident
  // cache as in a decode step.
  struct Att {
    int64_t d, lk;
  };
  const Att shapes[] = {{128, 4096 / S}, {64, 1024 / S}, {64, 4096 / S}, {64, 16384 / S}};
  for (const std::string& set : split_nonempty(sdpa_rows, ':')) {
    if (set == "auto") unsetenv("VRUN_SDPA_ROWS");
    else setenv("VRUN_SDPA_ROWS", set.c_str(), 1);
    for (const Att& a : shapes) {
      DevTensor q = make(ctx, DType::f16, Shape{1, 32, 1, a.d});
      DevTensor k = make(ctx, DType::f16, Shape{1, 8, a.lk, a.d}), v = make(ctx, DType::f16, Shape{1, 8, a.lk, a.d});
      const double bytes = 2.0 * 2 * 8 * a.lk * a.d;
      const std::string shape = "Hq32 Hkv8 D" + std::to_string(a.d) + " Lk" + std::to_string(a.lk);
      double t = run_op(ctx, reps, OpKind::sdpa, {&q, &k, &v, nullptr}, Attrs(OpKind::sdpa), true);
      row(("sdpa decode " + set).c_str(), shape, t, bytes / 1e9, "GB/s", bw);
      t = run_op(ctx, reps, OpKind::sdpa, {&q, &k, &v, nullptr}, Attrs(OpKind::sdpa), false, true);
      row(("sdpa decode serial " + set).c_str(), shape, t, bytes / 1e9, "GB/s", bw);
    }
  }
  unsetenv("VRUN_SDPA_ROWS");
}

}  // namespace vrun::vulkan::bench
