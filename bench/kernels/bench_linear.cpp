// Linear and sdpa timings at SmolLM2-135M shapes (hidden 576, MLP 1536, 9 query / 3 kv heads of
// 64): decode (M = 1) and prefill (M = 512), 1 and 2 threads. Run:
//   bench_linear --benchmark_filter=Linear
#include <benchmark/benchmark.h>

#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/quant_dot.h"

namespace vrun {
namespace {

struct Buffer {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Buffer make(DType t, const Shape& s, std::mt19937& rng) {
  Buffer b;
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> f(static_cast<size_t>(s.numel()));
  for (auto& v : f) v = dist(rng);
  b.bytes.resize(static_cast<size_t>(dtype_bytes(t, s.numel())));
  if (is_quantized(t))
    quantize_row(t, f.data(), b.bytes.data(), s.numel());
  else if (t == DType::f16)
    for (size_t i = 0; i < f.size(); ++i) reinterpret_cast<uint16_t*>(b.bytes.data())[i] = f32_to_f16(f[i]);
  else
    std::memcpy(b.bytes.data(), f.data(), f.size() * 4);
  b.view = TensorView::dense(b.bytes.data(), t, s);
  return b;
}

ThreadPool& pool_of(int threads) {
  static ThreadPool p1(1), p2(2);
  return threads == 1 ? p1 : p2;
}

// Times the op's CPU kernel on inputs `in` writing y, on `threads` threads.
void time_kernel(benchmark::State& st, OpKind op, std::span<TensorView> in, TensorView& y, const Attrs& attrs, int threads) {
  KernelCall call;
  call.op = op;
  call.in = in.data();
  call.n_in = static_cast<int>(in.size());
  call.out = &y;
  call.n_out = 1;
  call.attrs = &attrs;
  call.pool = &pool_of(threads);
  const CpuKernelFn fn = cpu_kernels().get(op);
  for (auto _ : st) {
    Status s = fn(call);
    benchmark::DoNotOptimize(s);
  }
}

// args: M, N, K, threads, weight dtype code
void BM_Linear(benchmark::State& st) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const DType wt = static_cast<DType>(st.range(4));
  std::mt19937 rng(1);
  Buffer x = make(DType::f32, Shape{m, k}, rng), w = make(wt, Shape{n, k}, rng);
  Buffer y = make(DType::f32, Shape{m, n}, rng);
  Attrs attrs(OpKind::linear);
  TensorView in[2] = {x.view, w.view};
  time_kernel(st, OpKind::linear, in, y.view, attrs, static_cast<int>(st.range(3)));
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::OneK::kIs1000) ;
  st.counters["GFLOP/s"].value /= 1e9;
  st.SetLabel(std::string(dtype_name(wt)) + " " + quant_dot_isa());
}

void linear_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::q4_1, DType::q4_0, DType::q8_0, DType::f32})
    for (int64_t m : {1, 512})
      for (auto nk : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}})
        for (int th : {1, 2}) b->Args({m, nk.first, nk.second, th, static_cast<int64_t>(t)});
}
BENCHMARK(BM_Linear)->Apply(linear_args)->Unit(benchmark::kMicrosecond);
// The tied q8_0 output projection (49152 x 576, 30 MB): streams from memory every decode step.
BENCHMARK(BM_Linear)
    ->Args({1, 49152, 576, 1, static_cast<int64_t>(DType::q8_0)})
    ->Args({1, 49152, 576, 2, static_cast<int64_t>(DType::q8_0)})
    ->Unit(benchmark::kMicrosecond);

// args: Lq, Lk, threads, K/V dtype code (B = 1, 9 query heads over 3 kv heads, D = 64, causal)
void BM_Sdpa(benchmark::State& st) {
  const int64_t lq = st.range(0), lk = st.range(1);
  std::mt19937 rng(2);
  const DType kv = static_cast<DType>(st.range(3));
  Buffer q = make(DType::f32, Shape{1, 9, lq, 64}, rng), k = make(kv, Shape{1, 3, lk, 64}, rng);
  Buffer v = make(kv, Shape{1, 3, lk, 64}, rng), y = make(DType::f32, Shape{1, 9, lq, 64}, rng);
  Attrs attrs(OpKind::sdpa);
  attrs.set_i("causal", 1);
  TensorView in[3] = {q.view, k.view, v.view};
  time_kernel(st, OpKind::sdpa, in, y.view, attrs, static_cast<int>(st.range(2)));
}
void sdpa_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::f32, DType::f16})
    for (int64_t lq : {1, 512})
      for (int th : {1, 2}) b->Args({lq, 512, th, static_cast<int64_t>(t)});
}
BENCHMARK(BM_Sdpa)->Apply(sdpa_args)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vrun

BENCHMARK_MAIN();
