#include "bench/vulkan/harness.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernels/ops/shape_infer.h"

namespace vrun::vulkan::bench {

namespace {
std::mt19937 rng(1234);
}  // namespace

DevTensor make(Context& ctx, DType dt, const Shape& shape, bool fill) {
  DevTensor t;
  const uint64_t bytes = static_cast<uint64_t>(dtype_bytes(dt, shape.numel()));
  auto b = ctx.allocator().allocate(bytes, MemoryKind::kDevice, "bench tensor");
  must(b.status());
  t.buf = std::move(b).value();
  t.view = DeviceView::dense(t.buf.ref(), dt, shape);
  if (fill) {
    std::vector<float> f(static_cast<size_t>(shape.numel()));
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& x : f) x = d(rng);
    std::vector<uint8_t> host(bytes);
    if (is_quantized(dt)) {
      quantize_row(dt, f.data(), host.data(), shape.numel());
    } else {
      for (size_t i = 0; i < f.size(); ++i) {
        if (dt == DType::f32) std::memcpy(&host[i * 4], &f[i], 4);
        else if (dt == DType::f16) { uint16_t h = f32_to_f16(f[i]); std::memcpy(&host[i * 2], &h, 2); }
        else if (dt == DType::bf16) { uint16_t h = f32_to_bf16(f[i]); std::memcpy(&host[i * 2], &h, 2); }
      }
    }
    Status s = upload(ctx, t.buf.ref(), 0, host.data(), bytes);
    if (!s.is_ok()) std::fprintf(stderr, "%s\n", s.to_string().c_str());
  }
  return t;
}

// The benchmark cannot go on past a failed step: print it and stop.
void must(const Status& s) {
  if (s.is_ok()) return;
  std::fprintf(stderr, "%s\n", s.to_string().c_str());
  std::exit(1);
}

double run_op(Context& ctx, int reps, OpKind op, const std::vector<const DevTensor*>& in, const Attrs& attrs,
              bool rotate, bool serial) {
  std::vector<TensorDesc> d(in.size());
  std::vector<const TensorDesc*> p;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k]) {
      p.push_back(nullptr);
      continue;
    }
    d[k] = {in[k]->view.dtype, in[k]->view.shape};
    p.push_back(&d[k]);
  }
  std::vector<TensorDesc> od;
  must(infer_shapes(op, p, attrs, &od));
  // Sets of inputs and output; extra sets (device copies of the first, all made in one
  // submission) when rotating past the L2 cache.
  uint64_t set_bytes = static_cast<uint64_t>(dtype_bytes(od[0].dtype, od[0].shape.numel()));
  for (const DevTensor* t : in)
    if (t) set_bytes += static_cast<uint64_t>(dtype_bytes(t->view.dtype, t->view.numel()));
  const int copies = rotate ? static_cast<int>(std::clamp<uint64_t>((256ull << 20) / std::max<uint64_t>(set_bytes, 1) + 1, 1, 64)) : 1;
  std::vector<DevTensor> owned;
  std::vector<std::vector<DeviceView>> sets(static_cast<size_t>(copies));
  std::vector<DeviceView> outs;
  owned.reserve(static_cast<size_t>(copies) * (in.size() + 1));
  std::unique_ptr<Recorder> copier;
  for (int c = 0; c < copies; ++c) {
    for (const DevTensor* t : in) {
      if (!t) {
        sets[static_cast<size_t>(c)].emplace_back();
      } else if (c == 0 || t->view.dtype == DType::i32) {
        // Positions and indices are the same in every set.
        sets[static_cast<size_t>(c)].push_back(t->view);
      } else {
        // A device copy of the first set: the cache tells tensors apart by address, not content,
        // and the GPU stays busy (host-filled copies of large tensors idled it for seconds).
        owned.push_back(make(ctx, t->view.dtype, t->view.shape, false));
        if (!copier) copier = std::move(Recorder::create(ctx)).value();
        must(copier->record_buffer_copy(t->buf.ref(), 0, owned.back().buf.ref(), 0, t->buf.size()));
        sets[static_cast<size_t>(c)].push_back(owned.back().view);
      }
    }
    if (c == 0 || !serial) {
      owned.push_back(make(ctx, od[0].dtype, od[0].shape, false));
      outs.push_back(owned.back().view);
    } else {
      outs.push_back(outs[0]);
    }
  }
  if (copier) must(copier->submit_and_wait());
  int next = 0;
  const double t = time_runs(ctx, reps, [&](Recorder& r) {
    const size_t c = static_cast<size_t>(next++ % copies);
    return r.record(op, sets[c], {outs[c]}, attrs);
  });
  return t;
}

void row(const char* name, const std::string& shape, double sec, double amount, const char* unit, double roof) {
  const double rate = amount / sec;
  std::printf("%-24s %-28s %10.3f ms %10.1f %-7s %6.1f%%\n", name, shape.c_str(), sec * 1e3, rate, unit,
              roof > 0 ? 100 * rate / roof : 0.0);
  std::fflush(stdout);
}

}  // namespace vrun::vulkan::bench
