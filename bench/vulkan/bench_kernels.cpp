// Vulkan kernel benchmark: the decode/prefill shapes of a 2048-wide model, measured against the
// device's own rooflines taken in the same run (the memory roofline of gauge.h: a tuned read
// kernel beside the device's copies, PyTorch's included where it runs; f16 matmul rate of the
// fastest linear kernel at 4096^3, or the rate the device's own PyTorch matmul reaches when
// --tensor-roof gives it: bench/vulkan/run.sh measures it in the same run).
//
//   vrun_bench_vulkan [--small] [--reps N] [--device I] [--tensor-roof TFLOPS] [--sweep]
//                     [--gauge] [--gauge-sweep] [--torch-copy GBS]
//                     [--tiles | --quant-tiles [--tile-w q4_0,...] [--tile-list T1,T2,...]
//                      [--tile-shapes "llama-1b o,llama-1b down"] [--tile-m M]]
//                     [--decode-shapes] [--q4-tune] [--attention-shapes] [--mma-peak] [--peer-shapes]
//                     [--sdpa-tiles BR,BC,NT,CLAMP:...] [--sdpa-rows WANT,KBYTES,KCH[,PRE]:...]
//
// --tiles times the tensor-core matmul over encoder and prefill projection shapes with the tile
// chosen by shape ("auto") and with forced tiles (VRUN_MM_TILE's WGMxWGNxFMxFNxBK[xSTAGES] for the
// subgroup-scope kernel, cm2:BMxBNxBKxTHREADS for the workgroup-scope one, VRUN_MM_CM2; split:N
// for its K ranges, VRUN_MM_SPLITK; dequant:ROWS for block-quantised W expanded to halves first
// from that many rows of x, 0 never, VRUN_MM_DEQUANT; "+" joins them: cm2:128x64x32x128+split:2);
// --tile-list replaces the forced ones, --tile-shapes keeps only the shapes it names, --tile-m
// gives every shape M rows of x (a prompt's length: edge tiles). --quant-tiles
// does the same for block-quantised W (q4_0, q8_0, q4_1, or the W dtypes --tile-w lists) on
// Llama's prefill projections, f16 x (cm2 tiles are then W rows x x rows).
//
// --mma-peak measures the rate of KHR cooperative-matrix multiply-adds alone (fragments in
// registers), with the fragments reloaded from shared memory each step, and with a workgroup
// barrier each step too (kernels/vulkan/mma_peak_khr.comp), over workgroup and accumulator shapes:
// the ceiling any kernel built on them can reach on this device.
// --sdpa-tiles times the prefill attention rows on the workgroup-scope attention kernel
// (sdpa_cm2.comp) with each tile listed (VRUN_SDPA_CM2's BR,BC,NT,CLAMP; "auto" the default).
// --sdpa-rows times GQA decode attention (32 / 8 heads) on the row kernel with each key split
// listed (VRUN_SDPA_ROWS's WANT,KBYTES,KCH; "auto" the default).
// --peer-shapes times llama.cpp's own matmul perf shapes (test-backend-ops perf -o MUL_MAT).
// --gauge measures the memory roofline alone, over every read-kernel configuration (each printed),
// and stops; --gauge-sweep tries all of them before the other rows too (else a short list that
// holds the H100's and H200's winners). --torch-copy gives PyTorch's copy figure (GB/s, read +
// written) instead of running bench/gpu/torch_copy.py for it; 0 leaves it out.
// --sweep adds decode linear at 4x and 16x the rows (the slope between sizes separates the
// bandwidth from fixed per-dispatch costs) and prefill linear at other M, K, N.
//
// Each kernel is recorded many times in one command buffer (a barrier separates runs that write
// the same output), replayed for 300 ms, then timed as wall clock per run from submission over at
// least a second of replays of that command buffer, the fastest counted (harness.h, time_runs).
// Bandwidth-bound rows cycle through enough copies of their tensors (>= 256 MiB) that the
// device's L2 cache (50 MB on an H100) cannot serve repeated runs.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/vulkan/bench_attention.h"
#include "bench/vulkan/gauge.h"
#include "bench/vulkan/harness.h"
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/matmul_tiles.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/ops_matvec.h"
#include "kernels/vulkan/pipelines.h"
#include "kernels/vulkan/recorder.h"
#include "runtime/base/strings.h"

using namespace vrun;
using namespace vrun::vulkan;
using namespace vrun::vulkan::bench;

int main(int argc, char** argv) {
  bool small = false;
  int reps = 20;
  double tensor_roof = 0;
  bool sweep = false, decode_shapes = false, q4_tune = false, attention_shapes = false, tiles = false, quant_tiles = false,
       mma_peak = false, peer_shapes = false, gauge_only = false;
  std::string rows_list;
  GaugeOptions gauge_opts;
  gauge_opts.sweep = false;
  std::string sdpa_tiles, sdpa_rows;
  std::string tile_w = "q4_0,q8_0,q4_1";
  std::vector<std::string> tile_shapes;
  int64_t tile_m = 0;  // --tile-m: the rows of x for every --tiles shape (a prompt's length)
  std::string tile_list =
      "2x4x4x2x16x2,4x4x2x4x32,2x4x2x2x32,cm2:128x256x32x256,cm2:128x128x32x128,cm2:64x128x32x128,"
      "cm2:128x128x64x128,cm2:128x128x16x128,cm2:256x128x32x256,cm2:64x256x32x128";
  ContextOptions opts;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small")) small = true;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) opts.device_index = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--tensor-roof") && i + 1 < argc) tensor_roof = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--sweep")) sweep = true;
    else if (!std::strcmp(argv[i], "--decode-shapes")) decode_shapes = true;
    else if (!std::strcmp(argv[i], "--q4-tune")) decode_shapes = q4_tune = true;
    else if (!std::strcmp(argv[i], "--attention-shapes")) attention_shapes = true;
    else if (!std::strcmp(argv[i], "--rows-shapes") && i + 1 < argc) rows_list = argv[++i];
    else if (!std::strcmp(argv[i], "--tiles")) tiles = true;
    else if (!std::strcmp(argv[i], "--quant-tiles")) tiles = quant_tiles = true;
    else if (!std::strcmp(argv[i], "--tile-list") && i + 1 < argc) tile_list = argv[++i];
    else if (!std::strcmp(argv[i], "--tile-w") && i + 1 < argc) tile_w = argv[++i];
    else if (!std::strcmp(argv[i], "--tile-shapes") && i + 1 < argc) tile_shapes = split_nonempty(argv[++i], ',');
    else if (!std::strcmp(argv[i], "--tile-m") && i + 1 < argc) tile_m = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--mma-peak")) mma_peak = true;
    else if (!std::strcmp(argv[i], "--sdpa-tiles") && i + 1 < argc) sdpa_tiles = argv[++i];
    else if (!std::strcmp(argv[i], "--sdpa-rows") && i + 1 < argc) sdpa_rows = argv[++i];
    else if (!std::strcmp(argv[i], "--peer-shapes")) peer_shapes = true;
    else if (!std::strcmp(argv[i], "--gauge")) gauge_only = gauge_opts.sweep = gauge_opts.verbose = true;
    else if (!std::strcmp(argv[i], "--gauge-sweep")) gauge_opts.sweep = true;
    else if (!std::strcmp(argv[i], "--torch-copy") && i + 1 < argc) gauge_opts.torch_copy_gbs = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: vrun_bench_vulkan [--small] [--reps N] [--device I] [--tensor-roof TFLOPS] [--sweep] [--decode-shapes] [--q4-tune] [--rows-shapes M,...] [--attention-shapes] [--tiles | --quant-tiles [--tile-w q4_0,...] [--tile-list T1,T2,...] [--tile-shapes NAME,...] [--tile-m M]] [--mma-peak] [--peer-shapes] [--gauge] [--gauge-sweep] [--torch-copy GBS] [--sdpa-tiles BR,BC,NT,CLAMP:...] [--sdpa-rows WANT,KBYTES,KCH[,PRE]:...]\n");
      return 2;
    }
  }
  auto c = Context::create(opts);
  if (!c.is_ok()) {
    std::fprintf(stderr, "%s\n", c.status().to_string().c_str());
    return 1;
  }
  Context& ctx = **c;
  const auto& info = ctx.info();
  std::printf("device: %s (%s), subgroup %u, fp16 %d, coopmat %s\n", info.name.c_str(), info.type.c_str(),
              info.subgroup_size, info.fp16,
              ctx.coopmat() == Context::CoopMat::kKhr ? "KHR" : ctx.coopmat() == Context::CoopMat::kNv ? "NV" : "none");
  if (ctx.coopmat2().on) {
    const Context::CoopMat2& c2 = ctx.coopmat2();
    std::string sizes;
    for (uint32_t n : c2.invocations) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
    std::printf("NV cooperative matrix 2: workgroups of %s, granularity %u x %u x %u, max dimension %u, %u bytes of "
                "shared memory reserved\n", sizes.c_str(), c2.m_granularity, c2.n_granularity, c2.k_granularity,
                c2.max_dimension, c2.reserved_shared);
  }
  {
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(ctx.physical_device(), &mem);
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
      std::printf("memory type %u: heap %u (%llu MiB) flags 0x%x\n", i, mem.memoryTypes[i].heapIndex,
                  static_cast<unsigned long long>(mem.memoryHeaps[mem.memoryTypes[i].heapIndex].size >> 20),
                  mem.memoryTypes[i].propertyFlags);
  }
  const int64_t S = small ? 8 : 1;  // --small divides the big dims (CPU implementations)

  // Roofline 1: the memory bandwidth (gauge.h), bytes moved a second; a copy counts read + written.
  const uint64_t copy_bytes = small ? (32ull << 20) : (1ull << 30);
  gauge_opts.bytes = copy_bytes;
  const Gauge gauge = measure_gauge(ctx, gauge_opts);
  print_gauge(gauge);
  if (gauge_only) return gauge.read_gbs > 0 ? 0 : 1;
  DevTensor ca = make(ctx, DType::u8, Shape{static_cast<int64_t>(copy_bytes)}, false);
  DevTensor cb = make(ctx, DType::u8, Shape{static_cast<int64_t>(copy_bytes)}, false);
  const double tcopy = time_runs(ctx, reps, [&](Recorder& r) { return r.record_buffer_copy(ca.buf.ref(), 0, cb.buf.ref(), 0, copy_bytes); });
  // The same traffic through the elementwise copy kernel (f32 words).
  const int64_t words = static_cast<int64_t>(copy_bytes / 4);
  DeviceView wa = DeviceView::dense(ca.buf.ref(), DType::f32, Shape{words});
  DeviceView wb = DeviceView::dense(cb.buf.ref(), DType::f32, Shape{words});
  const double tkern = time_runs(ctx, reps, [&](Recorder& r) { return r.record_copy(wa, wb); });
  const double bw = gauge.roof_gbs;

  if (decode_shapes) {
    // The projections of a Llama-3.2-1B decode step, each run waiting for the one before.
    std::printf("memory roofline %.1f GB/s\n", bw);
    // {N, K, glu}: the last but one is the down projection as a step runs it, reading SwiGLU's
    // two halves (x of 2K) and gating them itself.
    const int64_t shapes[][3] = {{3072, 2048, 0}, {2048, 2048, 0}, {16384, 2048, 0}, {2048, 8192, 0}, {2048, 8192, 1}, {128256, 2048, 0}};
    std::vector<vulkan::Q4Tuning> tunings = {{}};
    if (q4_tune) {
      tunings.push_back({-1});  // the generic matvec kernel
      for (int rows : {4, 8, 16, 32, 64})
        for (int rg : {2, 4})
          for (int stage : {0, 1})
            for (int inv : {64, 128})
              for (int pf : {0, 1})
                if (rows * 32 >= rg * inv) tunings.push_back({rows, rg, stage, inv, 16384, pf});
    }
    for (DType wdt : {DType::f16, DType::q4_0}) {
      for (const auto& sh : shapes) {
        const int64_t Nd = sh[0] / S, Kd = sh[1];
        DevTensor x = make(ctx, DType::f32, Shape{1, sh[2] ? 2 * Kd : Kd}), w = make(ctx, wdt, Shape{Nd, Kd});
        const double bytes = static_cast<double>(dtype_bytes(wdt, Nd * Kd) + 4 * x.view.shape[1] + 4 * Nd);
        Attrs lin(OpKind::linear);
        if (sh[2]) lin.set_s("glu", "silu");
        for (const auto& tu : wdt == DType::q4_0 ? tunings : std::vector<vulkan::Q4Tuning>{{}}) {
          vulkan::set_q4_0_tuning_for_bench(tu.rows != 0 ? &tu : nullptr);
          const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, lin, true, true);
          char name[96];
          if (tu.rows < 0)
            std::snprintf(name, sizeof name, "decode %s generic", dtype_name(wdt));
          else
            std::snprintf(name, sizeof name, "decode %s r%d g%d s%d i%d p%d", dtype_name(wdt), tu.rows, tu.rows_per_pass,
                          tu.stage_x, tu.invocations, tu.prefetch);
          row(name, std::to_string(Nd) + "x" + std::to_string(Kd) + (sh[2] ? " glu" : ""), t, bytes / 1e9, "GB/s", bw);
        }
        vulkan::set_q4_0_tuning_for_bench(nullptr);
      }
    }
    return 0;
  }

  if (!rows_list.empty()) {
    // The projections of a Llama-3.2-1B batched decode step of M rows (linear's decode attribute),
    // in TFLOP/s: on the rows kernel (VRUN_MM_EXACT_ROWS=0) at its rule ("rule") and forced to 4
    // and 8 K ranges, then on the tensor cores' exact mode where the device has it
    // ("exact-scaled", q4_0 W's integers with each block's sums scaled, the default; "exact": W split
    // into halves, VRUN_MM_EXACT_Q=split, and f16 W), at its rule and with each K split forced
    // (VRUN_MM_SPLITK). (Its tiles: 128 x 32 measured best or even at 32 rows against 128 x 64,
    // 64 x 32 and 256 x 32 on an H200; VRUN_MM_CM2 forces one.)
    // (Rows-kernel variants measured and dropped: two 32-element blocks a step, 0.21 against 0.14
    // ms for gate-up at 32 rows; tiles of 128 columns and one load an element, no faster on an H200:
    // docs/performance.md.)
    const int64_t shapes[][2] = {{3072, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192}, {128256, 2048}};
    struct Env {
      ~Env() {
        unsetenv("VRUN_MM_EXACT_ROWS");
        unsetenv("VRUN_MM_CM2");
        unsetenv("VRUN_MM_SPLITK");
        unsetenv("VRUN_MM_EXACT_Q");
        unsetenv("VRUN_MM_EXACT_WIDE");
      }
    } env;
    for (size_t at = 0; at < rows_list.size();) {
      size_t comma = rows_list.find(',', at);
      if (comma == std::string::npos) comma = rows_list.size();
      const int64_t M = std::atoll(rows_list.substr(at, comma - at).c_str());
      at = comma + 1;
      if (M < 1) continue;
      for (DType wdt : {DType::q4_0, DType::f16}) {
        for (const auto& sh : shapes) {
          const int64_t Nd = sh[0] / S, Kd = sh[1];
          DevTensor x = make(ctx, DType::f32, Shape{M, Kd}), w = make(ctx, wdt, Shape{Nd, Kd});
          Attrs lin(OpKind::linear);
          lin.set_i("decode", 1);
          char shape[64];
          std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(Nd), static_cast<long long>(Kd));
          setenv("VRUN_MM_EXACT_ROWS", "0", 1);
          for (int split : {0, 4, 8}) {
            if ((Kd / 32) % std::max(split, 1) != 0) continue;
            vulkan::set_matmul_rows_for_bench(split, false);
            const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, lin, true, true);
            char name[64];
            std::snprintf(name, sizeof name, "rows %s M%lld %s", dtype_name(wdt), static_cast<long long>(M),
                          split ? ("s" + std::to_string(split)).c_str() : "rule");
            row(name, shape, t, 2.0 * M * Nd * Kd / 1e12, "TFLOP/s", 0);
          }
          vulkan::set_matmul_rows_for_bench(0, false);
          setenv("VRUN_MM_EXACT_ROWS", "1", 1);
          // Every shape, block-quantised W's narrow ones too (by default it takes only wide ones:
          // VRUN_MM_EXACT_WIDE), in both forms for q4_0 ("exact": VRUN_MM_EXACT_Q=split).
          if (!vulkan::cm2_exact_tile(ctx, M, wdt)) continue;
          setenv("VRUN_MM_EXACT_WIDE", "1", 1);
          for (const char* form : {"split", ""})
            for (int split : {0, 2, 4, 8}) {
              if (!*form && wdt != DType::q4_0) continue;
              if ((Kd / 32) % std::max(split, 1) != 0) continue;
              setenv("VRUN_MM_EXACT_Q", form, 1);
              if (split) setenv("VRUN_MM_SPLITK", std::to_string(split).c_str(), 1);
              else unsetenv("VRUN_MM_SPLITK");
              const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, lin, true, true);
              char name[96];
              std::snprintf(name, sizeof name, "exact%s %s M%lld %s", *form || wdt != DType::q4_0 ? "" : "-scaled", dtype_name(wdt),
                            static_cast<long long>(M), split ? ("s" + std::to_string(split)).c_str() : "rule");
              row(name, shape, t, 2.0 * M * Nd * Kd / 1e12, "TFLOP/s", 0);
            }
          unsetenv("VRUN_MM_CM2");
          unsetenv("VRUN_MM_SPLITK");
          unsetenv("VRUN_MM_EXACT_Q");
          unsetenv("VRUN_MM_EXACT_WIDE");
        }
      }
    }
    return 0;
  }

  if (attention_shapes) {
    bench_attention_shapes(ctx, reps, bw);
    return 0;
  }

  if (peer_shapes) {
    // llama.cpp's matmul perf cases (test-backend-ops perf -o MUL_MAT): W [4096, 14336] in each
    // weight type, f32 activations of 1 and 512 rows (y = x W^T: out 4096 x rows, K 14336), so
    // the two programs' kernels can be set side by side on one device. f16 x beside them.
    std::printf("memory roofline %.1f GB/s\n", bw);
    const int64_t Np = 4096 / S, Kp = 14336 / S;
    for (DType wdt : {DType::f16, DType::q4_0, DType::q4_1, DType::q8_0}) {
      DevTensor w = make(ctx, wdt, Shape{Np, Kp});
      for (int64_t rows : {1, 512})
        for (DType xdt : {DType::f32, DType::f16}) {
          DevTensor x = make(ctx, xdt, Shape{rows, Kp});
          const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear), rows == 1);
          char shape[96];
          std::snprintf(shape, sizeof shape, "m=%lld n=%lld k=%lld %s x", static_cast<long long>(Np),
                        static_cast<long long>(rows), static_cast<long long>(Kp), dtype_name(xdt));
          const std::string name = std::string("linear ") + dtype_name(wdt);
          if (rows == 1)
            row(name.c_str(), shape, t, static_cast<double>(dtype_bytes(wdt, Np * Kp)) / 1e9, "GB/s", bw);
          else
            row(name.c_str(), shape, t, 2.0 * rows * Np * Kp / 1e12, "TFLOP/s", 0);
        }
    }
    return 0;
  }

  if (!sdpa_tiles.empty()) {
    bench_sdpa_tiles(ctx, reps, S, tensor_roof, sdpa_tiles);
    return 0;
  }

  if (!sdpa_rows.empty()) {
    bench_sdpa_rows(ctx, reps, bw, S, sdpa_rows);
    return 0;
  }

  if (mma_peak) {
    if (ctx.coopmat() != Context::CoopMat::kKhr || !PipelineCache::has_kernel("mma_peak_khr")) {
      std::fprintf(stderr, "--mma-peak needs KHR cooperative matrices on the device and in the build\n");
      return 2;
    }
    const uint32_t sms = std::max<uint32_t>(info.multiprocessors, 1);
    const char* modes[] = {"registers", "shared loads", "shared loads + barrier"};
    struct Shape4 {
      int warps, fm, fn, per_sm;
    };
    const Shape4 shapes[] = {{8, 4, 4, 1}, {8, 4, 4, 2}, {4, 4, 4, 2}, {8, 4, 2, 2}, {16, 2, 2, 1}, {4, 2, 2, 4}};
    for (int mode = 0; mode < 3; ++mode)
      for (const Shape4& sh : shapes) {
        const uint32_t groups = sms * static_cast<uint32_t>(sh.per_sm), iters = 4096;
        DevTensor y = make(ctx, DType::f32, Shape{static_cast<int64_t>(groups) * sh.warps * sh.fm * sh.fn * 256}, false);
        const std::vector<int32_t> spec = {32 * sh.warps, mode, sh.fm, sh.fn};
        const double t = time_runs(ctx, reps, [&](Recorder& r) {
          return r.dispatch("mma_peak_khr", spec, {{&y.view, true}}, &iters, 4, groups, 1, 1);
        });
        const double flop = 2.0 * 16 * 16 * 16 * sh.fm * sh.fn * iters * sh.warps * groups;
        char shape[96];
        std::snprintf(shape, sizeof shape, "%d subgroups, %dx%d acc, %d/SM", sh.warps, sh.fm, sh.fn, sh.per_sm);
        row(modes[mode], shape, t, flop / 1e12, "TFLOP/s", tensor_roof);
      }
    return 0;
  }

  if (tiles) {
    std::printf("multiprocessors: %u, shared memory per workgroup: %u bytes\n", info.multiprocessors,
                ctx.limits().maxComputeSharedMemorySize);
    struct Mm {
      const char* name;
      int64_t m, k, n;
    };
    const Mm shapes[] = {{"parakeet ff up", 1875, 1024, 4096},   {"parakeet ff down", 1875, 4096, 1024},
                         {"parakeet attn proj", 1875, 1024, 1024}, {"parakeet conv pw1", 1875, 1024, 2048},
                         {"parakeet ff up 4x", 8000, 1024, 4096},  {"parakeet attn 4x", 8000, 1024, 1024},
                         {"parakeet ff down 4x", 8000, 4096, 1024}, {"parakeet conv pw1 4x", 8000, 1024, 2048},
                         {"whisper-tiny fc1", 1500, 384, 1536},    {"whisper-tiny qkv", 1500, 384, 384},
                         {"turbo fc1", 1500, 1280, 5120},          {"turbo attn", 1500, 1280, 1280},
                         {"turbo fc1 8x", 12000, 1280, 5120},      {"turbo attn 8x", 12000, 1280, 1280},
                         {"turbo fc2 8x", 12000, 5120, 1280},
                         {"llama-1b qkv", 512, 2048, 3072},        {"llama-1b o", 512, 2048, 2048},
                         {"llama-1b up", 512, 2048, 16384},        {"llama-1b down", 512, 8192, 2048},
                         {"prefill 8192", 512, 2048, 8192},        {"square 4096", 4096, 4096, 4096}};
    std::vector<std::string> cands = {""};
    for (std::string& t : split_nonempty(tile_list, ',')) cands.push_back(std::move(t));
    // W and x dtypes: f16 W with f32 and f16 x, or (--quant-tiles) --tile-w's W with f16 x.
    std::vector<std::pair<DType, DType>> dts = {{DType::f16, DType::f32}, {DType::f16, DType::f16}};
    if (quant_tiles) {
      dts.clear();
      for (const std::string& name : split_nonempty(tile_w, ',')) {
        const auto d = dtype_from_name(name);
        if (!d) return std::fprintf(stderr, "--tile-w: unknown dtype %s\n", name.c_str()), 2;
        dts.emplace_back(*d, DType::f16);
      }
    }
    auto clear_forced = [] {
      for (const char* v : {"VRUN_MM_TILE", "VRUN_MM_CM2", "VRUN_MM_SPLITK", "VRUN_MM_DEQUANT"}) unsetenv(v);
    };
    for (const auto& [wdt, xdt] : dts)
      for (const Mm& m : shapes) {
        // Block-quantised W: Llama's prefill projections.
        const bool llama = std::strncmp(m.name, "llama", 5) == 0 || std::strcmp(m.name, "prefill 8192") == 0;
        if (quant_tiles && !llama) continue;
        if (!tile_shapes.empty() && std::none_of(tile_shapes.begin(), tile_shapes.end(),
                                                 [&](const std::string& n) { return n == m.name; }))
          continue;
        const int64_t M = tile_m > 0 ? tile_m : m.m;
        DevTensor x = make(ctx, xdt, Shape{M, m.k}), w = make(ctx, wdt, Shape{m.n, m.k});
        for (const std::string& cs : cands) {
          // "cm2:BMxBNxBKxTHREADS" forces a workgroup-scope tile (VRUN_MM_CM2), "split:N" its K
          // ranges (VRUN_MM_SPLITK), any other a subgroup-scope tile (VRUN_MM_TILE, which keeps the
          // workgroup-scope kernel off); "+" joins them.
          bool cm2 = false;
          clear_forced();
          for (const std::string& part : split_nonempty(cs, '+')) {
            if (part.rfind("dequant:", 0) == 0) {  // block-quantised W expanded to halves first from these rows
              setenv("VRUN_MM_DEQUANT", part.c_str() + 8, 1);
              continue;
            }
            const bool is_cm2 = part.rfind("cm2:", 0) == 0, is_split = part.rfind("split:", 0) == 0;
            cm2 = cm2 || is_cm2 || is_split;
            setenv(is_cm2 ? "VRUN_MM_CM2" : is_split ? "VRUN_MM_SPLITK" : "VRUN_MM_TILE",
                   part.c_str() + (is_cm2 ? 4 : is_split ? 6 : 0), 1);
          }
          if (cm2 && !ctx.coopmat2().on) continue;
          const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
          char shape[96];
          std::snprintf(shape, sizeof shape, "%lldx%lldx%lld %s x %s %s", static_cast<long long>(M),
                        static_cast<long long>(m.k), static_cast<long long>(m.n), dtype_name(wdt), dtype_name(xdt),
                        cs.empty() ? "auto" : cs.c_str());
          row(m.name, shape, t, 2.0 * M * m.k * m.n / 1e12, "TFLOP/s", 0);
        }
        clear_forced();
      }
    return 0;
  }

  // Roofline 2: f16 matmul rate of the best linear kernel at 4096^3.
  const int64_t P = 4096 / S;
  DevTensor px = make(ctx, DType::f16, Shape{P, P}), pw = make(ctx, DType::f16, Shape{P, P});
  const double tpeak = run_op(ctx, std::max(2, reps / 4), OpKind::linear, {&px, &pw, nullptr}, Attrs(OpKind::linear));
  const double own_peak = 2.0 * P * P * P / tpeak / 1e12;
  const double peak = tensor_roof > 0 ? tensor_roof : own_peak;
  if (tensor_roof > 0) std::printf("compute roof: %.1f TFLOP/s (PyTorch f16 matmul on this device)\n", tensor_roof);

  std::printf("%-24s %-28s %13s %10s %-7s %7s\n", "kernel", "shape", "time", "rate", "unit", "roof");
  row("copy", std::to_string(copy_bytes >> 20) + " MiB", tcopy, 2.0 * copy_bytes / 1e9, "GB/s", bw);
  row("copy kernel", std::to_string(copy_bytes >> 20) + " MiB", tkern, 2.0 * copy_bytes / 1e9, "GB/s", bw);
  row(tensor_roof > 0 ? "linear f16" : "linear f16 (roofline)", std::to_string(P) + "^3", tpeak, 2.0 * P * P * P / 1e12,
      "TFLOP/s", peak);

  const int64_t K = 2048, N = 8192 / S;
  {
    const int64_t M = 512 / S;
    DevTensor x = make(ctx, DType::f16, Shape{M, K}), w = make(ctx, DType::f16, Shape{N, K});
    const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
    const std::string shape = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    row("linear prefill f16", shape, t, 2.0 * M * N * K / 1e12, "TFLOP/s", peak);
    if (ctx.coopmat2().on) {
      // The same through the subgroup-scope kernel, which devices without the extension run.
      setenv("VRUN_MM_CM2", "0", 1);
      const double t0 = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
      unsetenv("VRUN_MM_CM2");
      row("  subgroup-scope kernel", shape, t0, 2.0 * M * N * K / 1e12, "TFLOP/s", peak);
    }
    // Block-quantised checkpoints prefill through the same shape (blocks expanded to halves as
    // the tiles load), and f32 activations (the speech encoders') rounded to halves.
    for (DType wdt : {DType::q4_0, DType::q4_1, DType::q8_0}) {
      DevTensor wq = make(ctx, wdt, Shape{N, K});
      const double tq = run_op(ctx, reps, OpKind::linear, {&x, &wq, nullptr}, Attrs(OpKind::linear));
      row((std::string("linear prefill ") + dtype_name(wdt)).c_str(), shape, tq, 2.0 * M * N * K / 1e12, "TFLOP/s", peak);
    }
    DevTensor x32 = make(ctx, DType::f32, Shape{M, K});
    const double t32 = run_op(ctx, reps, OpKind::linear, {&x32, &w, nullptr}, Attrs(OpKind::linear));
    row("linear prefill f32 x", shape, t32, 2.0 * M * N * K / 1e12, "TFLOP/s", peak);
  }
  if (sweep) {
    const int64_t shapes[][3] = {{512, 2048, 2048}, {2048, 2048, 8192}, {512, 4096, 8192}, {1500, 1280, 5120},
                                 {4096, 2048, 8192}, {4096, 4096, 4096}, {4096, 2048, 4096}, {4096, 4096, 8192}};
    for (const auto& sh : shapes) {
      const int64_t M = sh[0] / S, Kp = sh[1], Np = sh[2] / S;
      DevTensor x = make(ctx, DType::f16, Shape{M, Kp}), w = make(ctx, DType::f16, Shape{Np, Kp});
      const double t = run_op(ctx, std::max(2, reps / 4), OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear));
      row("linear prefill f16", std::to_string(M) + "x" + std::to_string(Kp) + "x" + std::to_string(Np), t,
          2.0 * M * Np * Kp / 1e12, "TFLOP/s", peak);
    }
  }
  for (DType wdt : {DType::f16, DType::q4_0, DType::q4_1, DType::q8_0}) {
    for (int64_t scale : sweep ? std::vector<int64_t>{1, 4, 16} : std::vector<int64_t>{1}) {
      const int64_t Ns = N * scale;
      DevTensor x = make(ctx, DType::f16, Shape{1, K}), w = make(ctx, wdt, Shape{Ns, K});
      const double t = run_op(ctx, reps, OpKind::linear, {&x, &w, nullptr}, Attrs(OpKind::linear), true);
      const double bytes = static_cast<double>(dtype_bytes(wdt, Ns * K) + 2 * K + 2 * Ns);
      row((std::string("linear decode ") + dtype_name(wdt)).c_str(), "1x" + std::to_string(K) + "x" + std::to_string(Ns),
          t, bytes / 1e9, "GB/s", bw);
    }
  }
  {
    const int64_t Hq = 32, Hkv = 8, D = 128, L = 4096 / S;
    DevTensor q = make(ctx, DType::f16, Shape{1, Hq, 1, D});
    DevTensor k = make(ctx, DType::f16, Shape{1, Hkv, L, D}), v = make(ctx, DType::f16, Shape{1, Hkv, L, D});
    const double t = run_op(ctx, reps, OpKind::sdpa, {&q, &k, &v, nullptr}, Attrs(OpKind::sdpa), true);
    row("sdpa decode f16", "Hq32 Hkv8 D128 Lk" + std::to_string(L), t, 2.0 * 2 * Hkv * L * D / 1e9, "GB/s", bw);
  }
  {
    const int64_t Hq = 32, Hkv = 8, D = 128, L = 2048 / S;
    DevTensor q = make(ctx, DType::f16, Shape{1, Hq, L, D});
    DevTensor k = make(ctx, DType::f16, Shape{1, Hkv, L, D}), v = make(ctx, DType::f16, Shape{1, Hkv, L, D});
    Attrs a(OpKind::sdpa);
    a.set_i("causal", 1);
    const double t = run_op(ctx, std::max(2, reps / 4), OpKind::sdpa, {&q, &k, &v, nullptr}, a);
    row("sdpa prefill causal f16", "Hq32 Hkv8 D128 L" + std::to_string(L), t, 2.0 * Hq * L * L * D / 1e12, "TFLOP/s", peak);
  }
  {
    // Parakeet's relative-position attention at a 200-s chunk: f32 q, k, v (rounded to halves
    // on the tensor cores) and an f32 additive mask per score (the position term).
    // The same with the position term stored as halves, and with everything stored as halves.
    const int64_t H = 8, D = 128, L = 2500 / S;
    // No mask at all: what the position term costs.
    for (DType qdt : {DType::f32, DType::f16})
      for (DType mdt : {DType::f32, DType::f16, DType::u8}) {
        if (qdt == DType::f16 && mdt == DType::f32) continue;
        const bool masked = mdt != DType::u8;
        DevTensor q = make(ctx, qdt, Shape{1, H, L, D});
        DevTensor k = make(ctx, qdt, Shape{1, H, L, D}), v = make(ctx, qdt, Shape{1, H, L, D});
        DevTensor m = make(ctx, masked ? mdt : DType::f32, Shape{1, H, masked ? L : 1, masked ? L : 1});
        const double t = run_op(ctx, std::max(2, reps / 4), OpKind::sdpa, {&q, &k, &v, masked ? &m : nullptr}, Attrs(OpKind::sdpa));
        const std::string name = std::string("sdpa ") + dtype_name(qdt) + (masked ? std::string(" + ") + dtype_name(mdt) + " mask" : " no mask");
        row(name.c_str(), "H8 D128 L" + std::to_string(L), t, 4.0 * H * L * L * D / 1e12, "TFLOP/s", peak);
      }
  }
  {
    // Parakeet's limited-context attention (window [128, 128]) over a long recording: each row
    // sees 257 keys and its band of the position term; the rate counts the band's work only.
    const int64_t H = 8, D = 128, L = 10000 / S, W = 257;
    for (DType qdt : {DType::f32, DType::f16}) {
      DevTensor q = make(ctx, qdt, Shape{1, H, L, D});
      DevTensor k = make(ctx, qdt, Shape{1, H, L, D}), v = make(ctx, qdt, Shape{1, H, L, D});
      DevTensor m = make(ctx, DType::f32, Shape{1, H, L, W});
      Attrs a(OpKind::sdpa);
      a.set_ints("window", {128, 128});
      const double t = run_op(ctx, std::max(2, reps / 4), OpKind::sdpa, {&q, &k, &v, &m}, a);
      const std::string name = std::string("sdpa window 128/128 ") + dtype_name(qdt) + " + f32 band mask";
      row(name.c_str(), "H8 D128 L" + std::to_string(L), t, 4.0 * H * L * W * D / 1e12, "TFLOP/s", peak);
    }
  }
  {
    const int64_t C = 1024, T = 4096 / S, Kc = 31;
    DevTensor x = make(ctx, DType::f16, Shape{1, C, T}), w = make(ctx, DType::f16, Shape{C, 1, Kc});
    Attrs a(OpKind::conv1d);
    a.set_ints("padding", {Kc / 2}).set_i("groups", C);
    const double t = run_op(ctx, reps, OpKind::conv1d, {&x, &w, nullptr}, a, true);
    row("conv1d depthwise f16", "C1024 T" + std::to_string(T) + " K31", t, 2.0 * 2 * C * T / 1e9, "GB/s", bw);
  }
  if (sweep) {
    // The compute roof again, last: it should match the first measurement.
    const double t = run_op(ctx, std::max(2, reps / 4), OpKind::linear, {&px, &pw, nullptr}, Attrs(OpKind::linear));
    row("linear f16 (again)", std::to_string(P) + "^3", t, 2.0 * P * P * P / 1e12, "TFLOP/s", peak);
  }
  return 0;
}
