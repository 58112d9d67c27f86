// Prefill and decode speed of a random-weight Llama-shaped model, and decode as a fraction of
// the memory-bandwidth roofline: the bytes a decode step must read (every weight once, the output
// head, the token's embedding row and the KV cache of every layer at the step's position) times
// tokens/s, over the memory bandwidth measured in the same run (on Vulkan the roofline of
// bench/vulkan/gauge.h: a tuned read kernel beside the device's copies, PyTorch's where it runs;
// on the CPU a memcpy, counting bytes read + written).
//
//   bench_llama_roofline [--shape llama-1b|smollm2] [--dtype f16|q8_0|q4_0|q4_1] [--backend cpu|vulkan]
//                        [--step decode|forward]
//                        [--threads N] [--prompt 512] [--decode 64]
//                        [--gauge-sweep] [--torch-copy GBS]
//
// --gauge-sweep tunes the read kernel over every configuration (else a short list holding the
// H100's and H200's winners); --torch-copy gives PyTorch's copy figure (GB/s, read + written)
// instead of running bench/gpu/torch_copy.py, 0 leaves it out. --decode 0 times the prefill alone
// (with VRUN_VK_PROFILE=1, a profile of the prefill's kernels only).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "models/llama/llama_model.h"
#include "runtime/executor.h"
#ifdef VRUN_BENCH_VULKAN
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/recorder.h"
#include "bench/vulkan/gauge.h"
#endif

using namespace vrun;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// The fastest of `reps` runs of `run` (each returning its seconds) after a first call and at least
// `warm_s` seconds of untimed ones.
template <typename F>
Result<double> best_after_warm_up(F&& run, int reps, double warm_s) {
  // The first call compiles pipelines and records (seconds, with the GPU idle and its clocks
  // falling): it does not count towards the warm-up.
  VRUN_RETURN_IF_ERROR(run().status());
  for (double spent = 0; spent < warm_s;) {
    VRUN_ASSIGN_OR_RETURN(const double t, run());
    spent += t;
  }
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    VRUN_ASSIGN_OR_RETURN(const double t, run());
    best = std::min(best, t);
  }
  return best;
}

struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  float next() {  // uniform in [-1, 1)
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(static_cast<int64_t>(s >> 11) - (int64_t{1} << 52)) / static_cast<float>(int64_t{1} << 52);
  }
};

double cpu_copy_gbs() {
  const size_t n = size_t{1} << 29;
  std::vector<uint8_t> a(n, 1), b(n, 0);
  double best = 1e9;
  for (int r = 0; r < 3; ++r) {
    const auto t = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    best = std::min(best, secs(t));
  }
  return 2.0 * n / best / 1e9;  // bytes read + written
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape = "llama-1b", dtype_name_s = "f16", backend = "cpu";
  int threads = 0, prompt = 512, decode = 64;
  std::string step_method = "decode";
  bool gauge_sweep = false;
  double torch_copy = -1;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--gauge-sweep") {
      gauge_sweep = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) return std::fprintf(stderr, "%s takes a value\n", k.c_str()), 2;
    const std::string v = argv[i + 1];
    if (k == "--shape") shape = v;
    else if (k == "--torch-copy") torch_copy = std::stod(v);
    else if (k == "--dtype") dtype_name_s = v;
    else if (k == "--backend") backend = v;
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--prompt") prompt = std::stoi(v);
    else if (k == "--decode") decode = std::stoi(v);
    else if (k == "--step") step_method = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if ((decode != 0 && decode < 2) || prompt < 1)
    return std::fprintf(stderr, "--decode takes 0 (prefill only) or at least 2 steps, --prompt at least 1 token\n"), 2;
  if (step_method != "decode" && step_method != "forward")
    return std::fprintf(stderr, "--step takes decode or forward, not %s\n", step_method.c_str()), 2;
  llama::LlamaConfig c;
  if (shape == "llama-1b") {
    c.vocab = 128256, c.dim = 2048, c.layers = 16, c.heads = 32, c.kv_heads = 8, c.ffn = 8192, c.head_dim = 64;
    c.rope_theta = 500000;
  } else {
    c.vocab = 49152, c.dim = 576, c.layers = 30, c.heads = 9, c.kv_heads = 3, c.ffn = 1536, c.head_dim = 64;
    c.rope_theta = 100000;
  }
  c.max_context = 2048;
  c.tied_embeddings = true;
  const auto wdt = dtype_from_name(dtype_name_s);
  if (!wdt) return std::fprintf(stderr, "unknown dtype %s\n", dtype_name_s.c_str()), 2;
  // Random weights, made once per (rows, cols): all layers share the same bytes (the reads are
  // what is measured, not the values).
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<std::vector<uint8_t>>> cache;
  uint64_t weight_bytes = 0;
  std::set<std::string> counted;  // the builder may ask for a weight more than once
  Rng rng;
  auto make = [&](int64_t rows, int64_t cols, DType dt) {
    auto& slot = cache[{rows * 16 + static_cast<int64_t>(dt), cols}];
    if (!slot) {
      std::vector<float> row(static_cast<size_t>(cols));
      slot = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(dtype_bytes(dt, rows * cols)));
      const int64_t rb = dtype_bytes(dt, cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& x : row) x = rng.next() * 0.05f;
        uint8_t* dst = slot->data() + r * rb;
        if (dt == DType::f32) std::memcpy(dst, row.data(), static_cast<size_t>(rb));
        else if (dt == DType::f16)
          for (int64_t j = 0; j < cols; ++j) reinterpret_cast<uint16_t*>(dst)[j] = f32_to_f16(row[j]);
        else quantize_row(dt, row.data(), dst, cols);
      }
    }
    return slot;
  };
  auto source = [&](const std::string& name) -> std::optional<llama::Weight> {
    llama::Weight w;
    int64_t rows = 0, cols = 0;
    DType dt = *wdt;
    auto is = [&](const char* s) { return name.find(s) != std::string::npos; };
    if (name == "token_embd.weight") rows = c.vocab, cols = c.dim;
    else if (name == "output.weight" || is(".bias")) return std::nullopt;
    else if (is("norm")) rows = 1, cols = c.dim, dt = DType::f32;
    else if (is("attn_q") || is("attn_output")) rows = c.dim, cols = c.dim;
    else if (is("attn_k") || is("attn_v")) rows = c.kv_heads * c.head_dim, cols = c.dim;
    else if (is("ffn_gate") || is("ffn_up")) rows = c.ffn, cols = c.dim;
    else if (is("ffn_down")) rows = c.dim, cols = c.ffn;
    else return std::nullopt;
    auto bytes = make(rows, cols, dt);
    w.dtype = dt;
    w.shape = rows == 1 ? Shape{cols} : Shape{rows, cols};
    w.data = bytes->data();
    w.keep = bytes;
    if (counted.insert(name).second) weight_bytes += static_cast<uint64_t>(dtype_bytes(dt, rows * cols));
    return w;
  };
  llama::BuildSettings s;
  s.context = std::max(1024, prompt + decode + 8);
  s.chunk = prompt;
  const auto t_build = Clock::now();
  auto prog = llama::build_llama_program(c, source, s, {});
  if (!prog.is_ok()) return std::fprintf(stderr, "%s\n", prog.status().to_string().c_str()), 1;
  ExecutorOptions eo;
  auto bk = parse_backend_kind(backend);
  if (!bk.is_ok()) return std::fprintf(stderr, "%s\n", bk.status().message().c_str()), 2;
  eo.backend = *bk;
  eo.threads = threads;
  auto ex = Executor::create(*prog, eo);
  if (!ex.is_ok()) return std::fprintf(stderr, "%s\n", ex.status().to_string().c_str()), 1;
  std::fprintf(stderr, "built %s %s in %.1f s on %s\n", shape.c_str(), dtype_name_s.c_str(), secs(t_build),
               (*ex)->device_description().c_str());
  std::vector<int32_t> toks(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i) toks[i] = (i * 7919) % static_cast<int>(c.vocab);
  // GPUs drop their clocks when idle and can take seconds of load to climb back; the first call
  // also compiles the pipelines (7.9 s for Llama-1B on a fresh H100, the GPU idling meanwhile):
  // every figure is the best of several timed passes after that call and 3 s of the same work on
  // a GPU, 0.5 s on the CPU (best_after_warm_up).
  auto run_prefill = [&]() -> Result<double> {
    (*ex)->reset_state();
    const auto t = Clock::now();
    auto r = (*ex)->run("forward", {TensorView::dense(toks.data(), DType::i32, {1, prompt})}, {{"pos", 0}});
    if (!r.is_ok()) return r.status();
    return secs(t);
  };
  // (The CPU backend holds its clocks: fewer passes there.)
  const bool gpu = (*ex)->uses_gpu();
  const double warm_s = gpu ? 3.0 : 0.5;
  const auto prefill_best = best_after_warm_up(run_prefill, gpu ? 5 : 2, warm_s);
  if (!prefill_best.is_ok()) return std::fprintf(stderr, "%s\n", prefill_best.status().to_string().c_str()), 1;
  if (decode == 0) {  // prefill only: with VRUN_VK_PROFILE=1 the profile is the prefill's alone
    std::printf("%s %s %s: prefill %d tokens %.1f tok/s (%.3f ms a call)\n", shape.c_str(), dtype_name_s.c_str(),
                (*ex)->device_description().c_str(), prompt, prompt / *prefill_best, 1e3 * *prefill_best);
    return 0;
  }
  // Decode steps as the runner takes them: the decode method, its position an input (--step
  // forward: the chunk method at seq 1, its position a symbol, recorded anew every step). A
  // window is `decode` steps from position `prompt` on, timed from its second step (the first
  // may record what later steps replay); the best of three windows (one on the CPU) after the
  // warm-up.
  // Each step reads back what greedy `vrun generate` reads: the greedy token.
  int32_t tok = 1, pos = prompt;
  const uint64_t fetch = llama::has_greedy_output(**prog, step_method) ? llama::kFetchGreedy : Executor::kFetchAll;
  auto step = [&] {
    if (step_method == "forward") return (*ex)->run("forward", {TensorView::dense(&tok, DType::i32, {1, 1})}, {{"pos", pos}}, fetch);
    return (*ex)->run("decode", {TensorView::dense(&tok, DType::i32, {1, 1}), TensorView::dense(&pos, DType::i32, {1})}, {}, fetch);
  };
  auto window = [&]() -> Result<double> {
    pos = prompt;
    VRUN_RETURN_IF_ERROR(step().status());
    const auto t = Clock::now();
    for (int i = 1; i < decode; ++i) {
      pos = prompt + i;
      VRUN_RETURN_IF_ERROR(step().status());
    }
    return secs(t);
  };
  const auto decode_best = best_after_warm_up(window, gpu ? 3 : 1, warm_s);
  if (!decode_best.is_ok()) return std::fprintf(stderr, "%s\n", decode_best.status().to_string().c_str()), 1;
  const double decode_tps = (decode - 1) / *decode_best;
  // What a decode step at position p must read: every weight once (the tied embedding table once,
  // as the output head), the token's embedding row, and K and V of every layer for positions
  // 0..p. The timed steps run at p = prompt + 1 .. prompt + decode - 1.
  const DType table_dt = *wdt;
  const std::string device = (*ex)->device_description();
  const double embed_row = static_cast<double>(dtype_bytes(table_dt, c.dim));
  const MetaValue* kv_meta = (*prog)->meta("vrun.kv_cache_dtype");
  const auto kv_dt = kv_meta ? dtype_from_name(kv_meta->s) : std::optional<DType>(DType::f16);
  const double mean_keys = prompt + 1 + decode / 2.0;
  const double kv_bytes = 2.0 * static_cast<double>(c.layers * c.kv_heads * c.head_dim) * mean_keys *
                          static_cast<double>(dtype_bytes(kv_dt.value_or(DType::f16), 1));
  const double token_bytes = static_cast<double>(weight_bytes) + embed_row + kv_bytes;
  const double read_gbs = token_bytes * decode_tps / 1e9;
  double roof = 0;
  const char* roof_what = "memcpy, read + written";
#ifdef VRUN_BENCH_VULKAN
  vulkan::bench::Gauge gauge;
  if (gpu) {
    (*ex).reset();  // the model's memory back before the gauge's 2 GiB
    auto ctx = vulkan::Context::create({});
    if (ctx.is_ok()) {
      vulkan::bench::GaugeOptions go;
      go.sweep = gauge_sweep;
      go.torch_copy_gbs = torch_copy;
      gauge = vulkan::bench::measure_gauge(**ctx, go);
      vulkan::bench::print_gauge(gauge);
      roof = gauge.roof_gbs;
      roof_what = "memory roofline";
    }
  }
#endif
  if (!gpu) roof = cpu_copy_gbs();
  std::printf("bytes a token: weights %.3f GB (output head %.3f GB of it) + embedding row %.1f KB + KV cache %.2f MB "
              "(%.0f positions, %s) = %.3f GB\n",
              static_cast<double>(weight_bytes) / 1e9, static_cast<double>(dtype_bytes(table_dt, c.vocab * c.dim)) / 1e9,
              embed_row / 1e3, kv_bytes / 1e6, mean_keys, dtype_name(kv_dt.value_or(DType::f16)), token_bytes / 1e9);
  std::printf("%s %s %s: prefill %d tokens %.1f tok/s | decode %.1f tok/s | %.3f GB a token | %.1f GB/s of %.1f GB/s (%s) = %.1f%% of roofline\n",
              shape.c_str(), dtype_name_s.c_str(), device.c_str(), prompt, prompt / *prefill_best,
              decode_tps, token_bytes / 1e9, read_gbs, roof, roof_what, roof > 0 ? 100 * read_gbs / roof : 0);
  if (roof > 0 && read_gbs > roof)
    std::printf("ABOVE 100%% OF THE ROOF: the roof or the byte count is wrong\n");
  return 0;
}
